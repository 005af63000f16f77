"""`make demo`: the platform end to end on the embedded default (local Ray, local storage,
MLflow on SQLite). Builds the demo's images (real photos from scikit-image and broken
variants of them), serves them over HTTP on 127.0.0.1, generates a realistic web alt-text
candidate set pointing at them, and curates it: text filters, fetch, image filters, labels
and overlap, hypernymization, entity frequency and splits, with every rejection reason."""

from __future__ import annotations

import argparse
import sys

from conceptual import storage
from conceptual.demo.corpus import write_candidates
from conceptual.demo.images import build_images, demo_candidates, fetch_overrides
from conceptual.demo.server import serve_directory
from conceptual.jobs import curate
from conceptual.paths import state_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conceptual.demo", description=__doc__)
    parser.add_argument("--candidates", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    root = state_dir() / "demo"
    candidates = root / "candidates" / "candidates.tsv"
    storage.delete(str(candidates.parent))
    candidates.parent.mkdir(parents=True)
    catalogue = build_images(root / "images")
    with serve_directory(catalogue.directory) as server:
        rows = demo_candidates(catalogue, server.url, args.candidates, seed=args.seed)
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
                "webdataset.enabled=true",
                *fetch_overrides(catalogue),
            ]
        )


if __name__ == "__main__":
    sys.exit(main())
