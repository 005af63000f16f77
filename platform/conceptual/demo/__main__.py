"""`make demo`: the platform end to end on the embedded default (local Ray, local storage,
MLflow on SQLite). Generates a realistic web alt-text candidate set and curates it."""

from __future__ import annotations

import argparse
import sys

from conceptual import storage
from conceptual.demo.corpus import generate_candidates, write_candidates
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
    write_candidates(
        generate_candidates(args.candidates, seed=args.seed), str(candidates), fmt="cc_tsv"
    )
    print(f"demo: wrote {args.candidates} web alt-text candidates to {candidates}\n")
    # A few thousand candidates need a small entity-frequency threshold (the paper's 100
    # was for billions): keep a caption when each of its concepts occurs more than 3 times.
    return curate.main(
        [
            "--input",
            str(candidates.parent),
            "--output",
            str(root / "curated"),
            "entity_frequency.more_than=3",
        ]
    )


if __name__ == "__main__":
    sys.exit(main())
