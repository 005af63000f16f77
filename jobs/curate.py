"""Curate candidates into a caption dataset.

    python -m conceptual.jobs.curate --input URI --output URI [--config FILE] [key=value ...]

URIs are paths, file:// or s3:// (see README: object storage). Overrides use the config's
dotted keys, e.g. entity_frequency.more_than=5 text.filters.max_chars=300.
"""

from __future__ import annotations

import argparse
import sys

from conceptual.jobs.arguments import add_common, location, report_run
from conceptual.logs import job_output, stderr


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m conceptual.jobs.curate", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--input",
        required=True,
        type=location,
        help="candidates: a file or folder (TSV, CSV, JSONL, Parquet); try examples/candidates.tsv",
    )
    parser.add_argument(
        "--output", required=True, type=location, help="where curated/, rejected/ and stats.json go"
    )
    parser.add_argument(
        "--config", type=location, help="YAML file (configs/curation.yaml shows every key)"
    )
    add_common(parser)
    args = parser.parse_args(argv)
    # Imported here, so that --help and argument errors answer at once.
    from conceptual import funnel, storage
    from conceptual.candidates import CandidateFormatError
    from conceptual.config import ConfigError, load
    from conceptual.pipelines.curation import CurationConfig, nothing_kept_hint, run
    from conceptual.runtime import init_ray
    from conceptual.storage import StorageError

    with job_output("curate", args.verbose) as log:
        try:
            config = load(CurationConfig, args.config, args.overrides)
            print(f"curate: {args.input} -> {args.output}", flush=True)
            init_ray()
            stats, run_id = run(args.input, args.output, config)
        except (ConfigError, CandidateFormatError, StorageError) as exc:
            print(f"error: {exc}", file=stderr())
            return 2
    print(funnel.render(stats))
    curated = storage.join(args.output, "curated")
    if stats["kept"]:
        print(f"curated:  {curated}  ({stats['kept']} records)")
    else:
        print(f"curated:  nothing kept, so nothing written to {curated}")
        print(f"          {nothing_kept_hint(stats, config)}")
    if stats["input"] > stats["kept"]:
        print(
            f"rejected: {storage.join(args.output, 'rejected')}  "
            f"({stats['input'] - stats['kept']} records, with reasons)"
        )
    print(f"stats:    {storage.join(args.output, 'stats.json')}")
    report_run(run_id, config.experiment, log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
