"""Curate candidates into a caption dataset.

    python -m conceptual.jobs.curate --input URI --output URI [--config FILE] [key=value ...]

URIs are paths, file:// or s3:// (see README: object storage). Overrides use the config's
dotted keys, e.g. entity_frequency.more_than=5 text.filters.max_chars=300.
"""

from __future__ import annotations

import argparse
import sys

from conceptual import funnel, storage
from conceptual.candidates import CandidateFormatError
from conceptual.config import ConfigError, load
from conceptual.pipelines.curation import CurationConfig, run
from conceptual.runtime import init_ray
from conceptual.storage import StorageError
from conceptual.tracking import tracking_uri


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m conceptual.jobs.curate", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--input", required=True, help="candidates: a file or folder (TSV, CSV, JSONL, Parquet)"
    )
    parser.add_argument(
        "--output", required=True, help="where curated/, rejected/ and stats.json go"
    )
    parser.add_argument("--config", help="YAML file (configs/curation.yaml shows every key)")
    parser.add_argument("overrides", nargs="*", metavar="key=value")
    args = parser.parse_args(argv)
    try:
        config = load(CurationConfig, args.config, args.overrides)
        init_ray()
        stats, run_id = run(args.input, args.output, config)
    except (ConfigError, CandidateFormatError, StorageError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(funnel.render(stats))
    print(f"curated:  {storage.join(args.output, 'curated')}  ({stats['kept']} records)")
    print(
        f"rejected: {storage.join(args.output, 'rejected')}  ({stats['input'] - stats['kept']} records, with reasons)"
    )
    print(f"stats:    {storage.join(args.output, 'stats.json')}")
    print(f"mlflow:   run {run_id} in experiment {config.experiment!r} at {tracking_uri()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
