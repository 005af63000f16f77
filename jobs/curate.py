"""Curate candidates into a caption dataset.

    python -m conceptual.jobs.curate --input URI --output URI [--config FILE] [key=value ...]

URIs are paths, file:// or s3:// (see docs/configuration.md, Object storage). Overrides use the config's
dotted keys, e.g. entity_frequency.more_than=5 text.filters.max_chars=300.
"""

from __future__ import annotations

import sys

from conceptual.jobs.arguments import JobParser, add_config, add_data_arguments
from conceptual.jobs.runner import job_main, run_data_job


@job_main
def main(argv: list[str] | None = None) -> int:
    parser = JobParser("curate", __doc__, keys="curation.yaml")
    add_data_arguments(
        parser,
        "where curated/, rejected/ and stats.json go (and harvest/, for web archives)",
        "--input",
        "candidates: a file or folder (TSV, CSV, JSONL, Parquet; try examples/candidates.tsv), "
        "or web archives to harvest first (WARC, WAT: files, folders, globs)",
        many=True,
    )
    add_config(parser, "CurationConfig", "entity_frequency.more_than=5")
    args = parser.parse_args(argv)
    # Imported here, so that --help and argument errors answer at once.
    from conceptual import funnel
    from conceptual.candidates import CandidateFormatError
    from conceptual.pipelines.curation.curation import run, where_it_went
    from conceptual.pipelines.curation.curation_config import CurationConfig

    def show(stats: dict, config: CurationConfig) -> None:
        if "harvest" in stats:  # web archives were harvested first: the top of the funnel
            from conceptual.harvest.stats import render

            print(render(stats["harvest"]))
        print(funnel.render(stats))
        print(where_it_went(stats, args.output, config))

    return run_data_job(
        "curate", args, args.input, CurationConfig, run, show, (CandidateFormatError,)
    )


if __name__ == "__main__":
    sys.exit(main())
