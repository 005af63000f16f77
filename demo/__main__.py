"""`make demo`: the platform end to end on the embedded default (local Ray, local storage,
MLflow on SQLite).

1. Curation. Builds the demo's images (real photos from scikit-image, each in three views,
   and broken variants), serves them over HTTP on 127.0.0.1, generates a realistic web
   alt-text candidate set pointing at them, and curates it: text filters, fetch, image
   filters, labels and overlap, hypernymization, entity frequency and splits, with every
   rejection reason.
2. Captioning. CNN features of what was kept, a short training run of one variant,
   registration (the champion rule), evaluation on the held-out split beside the
   nearest-neighbour baseline, and the champion's captions for the held-out photos. Those
   are other views (mirrored, zoomed) of the five photos: five scenes are all the demo has.
3. Spoken captions. Every curated caption read aloud (espeak-ng, a voice, rate, pitch and
   gain drawn per clip), with the funnel and one clip's parameters.
4. Serving. The champion behind the Ray Serve endpoint on 127.0.0.1, with a curl to paste;
   it serves until Ctrl-C (--no-serve stops before).
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
    caption,
    curate,
    evaluate_captioner,
    features,
    synthesize_speech,
    train_captioner,
)
from conceptual.logs import job_output
from conceptual.paths import state_dir
from conceptual.serve.app import start
from conceptual_demo.corpus import write_candidates
from conceptual_demo.images import Catalogue, build_images, demo_candidates, fetch_overrides
from conceptual_demo.server import serve_directory

# The demo has 15 distinct photos (5 scenes x 3 views): these fractions hold 6 of them out
# (4 val, 2 test; the split is a hash of the image bytes), every scene staying in train.
SPLITS = ["split.train=0.6", "split.val=0.2", "split.test=0.2"]
# A few minutes on two CPUs: the small recurrent variant (the 8x8 Transformer of the paper
# is what compare_captioners and a GPU are for).
TRAINING = [
    "model.architecture=rnn",
    "model.feature_map=1x1",
    "model.d_model=256",
    "optimizer=adamw",
    "lr=0.002",
    "epochs=8",
    "batch_size=16",
    "min_count=2",
    "cpus_per_worker=0.5",
    # The demo's dev split is 4 photos: the run warns that its CIDEr says little, and this
    # lets its model be the champion anyway, so the demo can show evaluation and serving.
    "min_eval_size=4",
    "experiment=demo-captioning",
]
CHAMPION = f"models:/{registry.MODEL_NAME}@{registry.CHAMPION}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conceptual_demo", description=__doc__)
    parser.add_argument("--candidates", type=int, default=3000)
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
        held_out = caption_demo(catalogue, root)
        if held_out is None or speech_demo(root):
            return 1
        if args.no_serve:
            return 0
        serve_demo(held_out[0], args.port)
    return 0


def curate_demo(catalogue: Catalogue, root: Path, n: int, seed: int) -> int:
    candidates = root / "candidates" / "candidates.tsv"
    storage.delete(str(candidates.parent))
    candidates.parent.mkdir(parents=True)
    with serve_directory(catalogue.directory) as server:
        rows = demo_candidates(catalogue, server.url, n, seed=seed)
        write_candidates(rows, str(candidates), fmt="cc_tsv")
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
                "entity_frequency.more_than=3",
                # The demo's few dozen photos stand behind thousands of candidates on purpose
                # (it has no crawl to draw from): keeping each photo once would leave too few
                # captions to train on. A crawl keeps the default, duplicates kept once.
                "dedup.by_image=false",
                "dedup.by_url=false",
                "webdataset.enabled=true",
                *SPLITS,
                *fetch_overrides(catalogue),
            ]
        )


def caption_demo(catalogue: Catalogue, root: Path) -> list[Path] | None:
    """Features, training, evaluation and captions; the held-out photos, or None when a
    step failed (it printed why)."""
    features_uri = str(root / "features")
    steps = [
        (
            "features of the kept images",
            features.main,
            ["--data", str(root / "curated"), "--output", features_uri],
        ),
        (
            "a short training run (registered; the champion rule decides)",
            train_captioner.main,
            ["--features", features_uri, *TRAINING],
        ),
        (
            "the champion on the held-out test split",
            evaluate_captioner.main,
            [
                "--model",
                CHAMPION,
                "--features",
                features_uri,
                "--split",
                "test",
                "experiment=demo-captioning",
            ],
        ),
    ]
    for title, job, job_args in steps:
        print(f"\ndemo: {title}")
        if job(job_args):
            return None
    held_out = held_out_photos(catalogue, root / "curated" / "curated")
    print(f"\ndemo: the champion's captions for the {len(held_out)} held-out photos")
    return None if caption.main(["--model", CHAMPION, *map(str, held_out)]) else held_out


def speech_demo(root: Path) -> int:
    """Spoken captions: every curated caption read aloud by espeak-ng, each clip with its
    own voice, rate, pitch and gain; the job prints the funnel, one clip's parameters and
    where the clips went."""
    print("\ndemo: spoken captions of the curated captions (espeak-ng, 16 kHz FLAC)")
    return synthesize_speech.main(
        ["--input", str(root / "curated"), "--output", str(root / "speech")]
    )


def serve_demo(photo: Path, port: int) -> None:
    """The champion on Ray Serve until Ctrl-C, with a curl that captions `photo`."""
    print("\ndemo: serving the champion (Ray Serve, autoscaled replicas, 127.0.0.1)")
    url = start(port=port)
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
