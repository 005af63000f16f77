"""The ablation's inputs from the shared Flickr8k photos (../shared/data/flickr8k_mini): the
candidates (some photos with their human captions, plus the demo's generated noise
alt-texts on the same photos, imported with their image bytes) and the held-out set (other
photos, never among the candidates, with their captions: curated, then features), for the
ablation's integration test and its benchmark."""

from __future__ import annotations

import csv
import random
import shutil
from pathlib import Path

from conceptual_demo.corpus import generate_candidates

FLICKR = "flickr8k_mini"
VAL_SHARE = 0.2  # of the candidate photos, stated `val`: the training runs' dev set


def captions_by_photo(real_data: Path) -> dict[str, list[str]]:
    """Flickr8k's photos in captions.csv's order, each with its five captions."""
    photos: dict[str, list[str]] = {}
    with open(real_data / FLICKR / "captions.csv", newline="") as f:
        for row in csv.DictReader(f):
            photos.setdefault(row["image"], []).append(row["caption"])
    return photos


def write_folder(folder: Path, rows: list[tuple[str, str, str]], images: Path) -> Path:
    """An import_captions folder: captions.csv (image, caption, split) and images/, copies of
    the shared photos (the import reads no file outside its folder, links included)."""
    (folder / "images").mkdir(parents=True)
    with open(folder / "captions.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["image", "caption", "split"])
        writer.writerows(rows)
    for name in {image for image, _, _ in rows}:
        shutil.copyfile(images / name, folder / "images" / name)
    return folder


def folders(
    real_data: Path,
    root: Path,
    candidates: int,
    held_out: int,
    noise: float,
    seed: int = 0,
    val_share: float = VAL_SHARE,
) -> tuple[Path, Path]:
    """(the candidates' folder, the held-out folder): the first `candidates` photos with
    their captions and `noise` generated alt-texts per caption (the demo's corpus: junk and
    captions of other scenes), on photos drawn at random among them; the next `held_out`
    photos, all `test`. `val_share` of the candidate photos are stated `val`, which the
    curation keeps."""
    photos = list(captions_by_photo(real_data).items())
    if candidates + held_out > len(photos):
        raise ValueError(f"{FLICKR} has {len(photos)} photos, not {candidates + held_out}")
    chosen, kept_apart = photos[:candidates], photos[candidates : candidates + held_out]
    val = {name for name, _ in chosen[: round(candidates * val_share)]}
    rows = [(n, c, "val" if n in val else "train") for n, captions in chosen for c in captions]
    rng = random.Random(seed)
    for generated in generate_candidates(round(len(rows) * noise), seed=seed):
        name = rng.choice(chosen)[0]
        rows.append((name, generated["alt_text"] or "", "val" if name in val else "train"))
    images = real_data / FLICKR / "images"
    held = [(n, c, "test") for n, captions in kept_apart for c in captions]
    return write_folder(root / "candidates", rows, images), write_folder(
        root / "held-out", held, images
    )


def imported(real_data: Path, root: Path, **sizes) -> tuple[str, str]:
    """(the candidates, the held-out features) as the ablation reads them: the import jobs'
    and the features job's output under `root`."""
    from conceptual.jobs import features, import_captions

    candidates, held_out = folders(real_data, root / "folders", **sizes)
    imports = root / "imports"
    assert import_captions.main(["--folder", str(candidates), "--output", str(imports / "c")]) == 0
    held = ["--folder", str(held_out), "--output", str(imports / "h"), "--curated"]
    assert import_captions.main(held) == 0
    eval_features = root / "eval-features"
    assert features.main(["--data", str(imports / "h"), "--output", str(eval_features)]) == 0
    return str(imports / "c" / "candidates"), str(eval_features)


def scorer(real_data: Path, root: Path, skip: int, epochs: int = 8) -> str:
    """The alignment variants' scorer: `train_contrastive` (its defaults, `epochs`) on the
    photos after the first `skip` (neither candidates nor held out), a fifth of them its dev
    set; copied to root/scorer, which a rerun reuses. Returns that folder."""
    from conceptual.jobs import features, import_captions
    from conceptual.registry import resolve

    saved = root / "scorer"
    if saved.is_dir():
        return str(saved)
    photos = list(captions_by_photo(real_data).items())[skip:]
    dev = {name for name, _ in photos[: round(len(photos) * VAL_SHARE)]}
    rows = [(n, c, "val" if n in dev else "train") for n, captions in photos for c in captions]
    folder = write_folder(root / "folders" / "scorer", rows, real_data / FLICKR / "images")
    imports = root / "imports" / "s"
    given = ["--folder", str(folder), "--output", str(imports), "--curated"]
    assert import_captions.main(given) == 0
    assert features.main(["--data", str(imports), "--output", str(root / "scorer-features")]) == 0
    shutil.copytree(resolve(train_contrastive(root / "scorer-features", epochs)), saved)
    return str(saved)


def train_contrastive(data: Path, epochs: int) -> str:
    """The registry URI of the model `train_contrastive` trains on `data`'s features."""
    import importlib

    from mlflow import MlflowClient

    from conceptual.registry import configure

    job = importlib.import_module("conceptual.jobs.train_contrastive")
    given = ["--features", str(data), f"epochs={epochs}", "experiment=ablation-scorer"]
    assert job.main(given) == 0
    client = MlflowClient(configure())
    versions = client.search_model_versions("name='contrastive'", order_by=["version_number DESC"])
    return f"models:/contrastive/{versions[0].version}"
