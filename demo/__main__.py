"""`make demo`: the platform end to end on the embedded default (local Ray, local storage,
MLflow on SQLite).

1. Curation. Builds the demo's images (real photos from scikit-image, each in three views,
   and broken variants), serves them over HTTP on 127.0.0.1, generates a realistic web
   alt-text candidate set pointing at them, and curates it: text filters, fetch, image
   filters, labels and overlap, hypernymization, entity frequency and splits, with every
   rejection reason.
2. Captioning. CNN features of what was kept, a short training run of one variant,
   registered as a version of the demo's own model (`demo-captioner`, so the demo never
   displaces or shows a champion of the user's `captioner`), its evaluation on the held-out
   split beside the nearest-neighbour baseline, and its captions for the held-out photos,
   each beside a true caption of its scene. The splits are stated, not hashed
   (images.VIEW_SPLITS): each scene trains on its photo, is chosen on its mirror image and
   tested on its zoomed view; five scenes are all the demo has.
3. Spoken captions. Every curated caption read aloud (espeak-ng, a voice, rate, pitch and
   gain drawn per clip), with the funnel and one clip's parameters.
4. Serving. The demo model's champion behind the Ray Serve endpoint on 127.0.0.1, with a
   curl to paste; it says whether that is the version this run trained or an earlier one
   (which, and why). It serves until Ctrl-C (--no-serve stops before).
"""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

from conceptual import registry, storage
from conceptual.jobs import (
    curate,
    evaluate_captioner,
    features,
    synthesize_speech,
    train_captioner,
)
from conceptual.jobs.runner import job_run
from conceptual.logs import job_output
from conceptual.models.inference import ImageCaptioner
from conceptual.paths import state_dir
from conceptual.serve.app import ServeConfig, start
from conceptual.serve.captioner_deployment import CaptioningSettings
from conceptual_demo.corpus import write_candidates
from conceptual_demo.images import (
    PHOTOS,
    PHOTOS_BY_NAME,
    Catalogue,
    build_images,
    demo_candidates,
    fetch_overrides,
    named_scene,
)
from conceptual_demo.server import serve_directory

# A few minutes on two CPUs: the small recurrent variant (the 8x8 Transformer of the paper
# is what compare_captioners and a GPU are for).
TRAINING = [
    "model.architecture=rnn",
    "model.feature_map=1x1",
    "model.d_model=256",
    "optimizer=adamw",
    "lr=0.002",
    "batch_size=16",
    "min_count=2",
    "cpus_per_worker=0.5",
    # The dev split is the five scenes' mirror images (images.VIEW_SPLITS): the run warns
    # that CIDEr over so few says little, and this lets its model be the champion anyway, so
    # the demo can show evaluation and serving.
    f"min_eval_size={len(PHOTOS)}",
    "experiment=demo-captioning",
]
EPOCHS = 8
# The demo's registered model: its versions and champion are the demo's alone.
MODEL_NAME = "demo-captioner"
# The demo's folders under <home>/demo are its own, also those an older version wrote.
OWN_FOLDER = storage.INTO_EXISTING


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conceptual_demo", description=__doc__)
    parser.add_argument("--candidates", type=int, default=3000)
    parser.add_argument("--epochs", type=int, default=EPOCHS, help="of the training run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--curate-only", action="store_true", help="stop after curation")
    parser.add_argument("--no-serve", action="store_true", help="stop before serving")
    parser.add_argument("--port", type=int, default=8000, help="the endpoint's port")
    parser.add_argument("--verbose", action="store_true", help="Ray's and MLflow's logs here")
    args = parser.parse_args(argv)

    root = state_dir() / "demo"
    # Ray's and MLflow's own output goes to one log file for the whole demo.
    with job_output("demo", args.verbose) as log:
        if log:
            print(f"demo: Ray's and MLflow's logs go to {log} (--verbose shows them here)")
        catalogue = build_images(root / "images")
        code = curate_demo(catalogue, root, args.candidates, args.seed)
        if code or args.curate_only:
            return code
        trained = caption_demo(catalogue, root, args.epochs)
        if trained is None or speech_demo(root):
            return 1
        if args.no_serve:
            return 0
        serve_demo(*trained, args.port)
    return 0


def curate_demo(catalogue: Catalogue, root: Path, n: int, seed: int) -> int:
    candidates = root / "candidates" / "candidates.tsv"
    storage.delete(str(candidates.parent))
    candidates.parent.mkdir(parents=True)
    with serve_directory(catalogue.directory) as server:
        rows = demo_candidates(catalogue, server.url, n, seed=seed)
        write_candidates(rows, str(candidates), fmt="tsv")
        print(f"demo: {len(catalogue.files)} images served at {server.url}")
        print(f"demo: wrote {len(rows)} web alt-text candidates to {candidates}\n")
        # A few thousand candidates need a small entity-frequency threshold (the paper's 100
        # was for billions): keep a caption when each of its concepts occurs more than 3 times.
        return curate.main(
            [
                "--input",
                str(candidates.parent),
                "--output",
                str(root / "curated"),
                OWN_FOLDER,
                "entity_frequency.more_than=3",
                # The demo's few dozen photos stand behind thousands of candidates on purpose
                # (it has no crawl to draw from): keeping each photo once would leave too few
                # captions to train on. A crawl keeps the default, duplicates kept once.
                "dedup.by_image=false",
                "dedup.by_url=false",
                "webdataset.enabled=true",
                *fetch_overrides(catalogue),
            ]
        )


def caption_demo(catalogue: Catalogue, root: Path, epochs: int) -> tuple[str, Path] | None:
    """Features, training, evaluation and captions; the version this run registered and the
    held-out photo to try the endpoint with (the first it captioned with its own scene), or
    None when a step failed (it printed why)."""
    features_uri = str(root / "features")
    print("\ndemo: features of the kept images")
    if features.main(["--data", str(root / "curated"), "--output", features_uri, OWN_FOLDER]):
        return None
    print(f"\ndemo: a short training run, registered as a version of {MODEL_NAME!r}")
    before = registry.newest_version(MODEL_NAME)
    training = ["--features", features_uri, "--model-name", MODEL_NAME, f"epochs={epochs}"]
    if train_captioner.main([*training, *TRAINING]):
        return None
    trained = registry.newest_version(MODEL_NAME)
    if trained is None or (before is not None and trained.version == before.version):
        print(f"error: the training run registered no version of {MODEL_NAME!r}")
        return None
    model = f"models:/{MODEL_NAME}/{trained.version}"
    print(f"\ndemo: {model}, the model this run trained, on the held-out test split")
    evaluation = ["--model", model, "--features", features_uri, "--split", "test"]
    if evaluate_captioner.main([*evaluation, "experiment=demo-captioning"]):
        return None
    held_out = held_out_photos(catalogue, root / "curated" / "curated")
    print(f"\ndemo: its captions for the {len(held_out)} held-out photos, beside a true one")
    with job_run("caption", verbose=False, refused=(ValueError,)):
        captioner = ImageCaptioner(registry.resolve(model))
        captions = captioner.caption_bytes([photo.read_bytes() for photo in held_out])
    print(held_out_report(catalogue, held_out, captions))
    scenes = {file.name: file.photo for file in catalogue.views()}
    right = (p for p, c in zip(held_out, captions) if named_scene(c) == scenes[p.name])
    return trained.version, next(right, held_out[0])


def held_out_report(catalogue: Catalogue, photos: list[Path], captions: list[str]) -> str:
    """A line per held-out photo (its scene, the model's caption, a true caption of the
    scene) and how many captions name their own scene's subject; when half or fewer do, a
    line saying that these captions are no result."""
    scenes = {file.name: file.photo for file in catalogue.views()}
    lines, right = [], 0
    for photo, caption in zip(photos, captions, strict=True):
        scene = scenes[photo.name]
        named = named_scene(caption)
        right += named == scene
        verdict = "right scene" if named == scene else f"names {named or 'no scene'}"
        lines.append(f"  {photo.name:<24} {caption!r}  ({verdict})")
        lines.append(f"  {'':<24} true: {PHOTOS_BY_NAME[scene].captions()[0]!r}")
    lines.append(f"demo: {right} of {len(photos)} held-out captions name their own scene")
    if 2 * right <= len(photos):
        lines.append(
            "demo: half or fewer: this short run on five scenes has not learned them, so "
            "these captions are not a result (more epochs: --epochs)"
        )
    return "\n".join(lines)


def speech_demo(root: Path) -> int:
    """Spoken captions: every curated caption read aloud by espeak-ng, each clip with its
    own voice, rate, pitch and gain; the job prints the funnel, one clip's parameters and
    where the clips went."""
    print("\ndemo: spoken captions of the curated captions (espeak-ng, 16 kHz FLAC)")
    return synthesize_speech.main(
        ["--input", str(root / "curated"), "--output", str(root / "speech"), OWN_FOLDER]
    )


def serve_demo(trained: str, photo: Path, port: int) -> None:
    """The demo model's champion on Ray Serve until Ctrl-C, with a curl that captions
    `photo`; says whether the champion is the version this run trained."""
    champion = registry.champion_version(MODEL_NAME)
    if champion is None:
        print(f"\ndemo: {MODEL_NAME!r} has no champion, so there is nothing to serve")
        return
    if champion.version == trained:
        print(f"\ndemo: serving the model this run trained, models:/{MODEL_NAME}/{trained}")
    else:
        print(
            f"\ndemo: serving an earlier champion, models:/{MODEL_NAME}/{champion.version}: "
            f"this run's version {trained} did not beat it on the same dev set (above)"
        )
    print("demo: Ray Serve, autoscaled replicas, on 127.0.0.1")
    config = ServeConfig(captioning=CaptioningSettings(models={"en": MODEL_NAME}))
    url = start(config, port=port)
    curl = (
        f"curl -s --data-binary @{photo} -H 'Content-Type: image/jpeg' "
        f"'{url}/v1/captions?num_captions=3'"
    )
    print(f"demo: try it:\n\n  {curl}\n")
    print(f"demo: what is served: curl -s {url}/v1/models; API docs at {url}/docs")
    print("demo: Ctrl-C stops the endpoint (and this demo)", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        print("\ndemo: stopped", flush=True)


def held_out_photos(catalogue: Catalogue, curated: Path) -> list[Path]:
    """The catalogue files of the kept test-split records (by their URL's file name)."""
    urls = set()
    for part in sorted(curated.glob("*.parquet")):
        table = pq.read_table(part, columns=["image_url", "split"])
        urls.update(table.filter(pc.field("split") == "test")["image_url"].to_pylist())
    names = sorted({url.rsplit("/", 1)[-1] for url in urls})
    return [catalogue.directory / name for name in names]


if __name__ == "__main__":
    sys.exit(main())
