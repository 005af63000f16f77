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
