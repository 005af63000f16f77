"""Harvest candidate image/alt-text pairs from web archives (WARC, WAT).

    python -m conceptual.jobs.harvest --input URI [URI ...] --output URI [--config FILE]
        [key=value ...]

Inputs: WARC files (`wget --warc-file`, Heritrix, browsertrix, Common Crawl's WARCs) or
Common Crawl WAT files, plain or gzipped (per record or as one stream), known by their
content; each a path, file:// or s3:// URI, a folder or prefix (its .warc/.wat files), or a
quoted glob (`'crawl/*.warc.gz'`). Writes OUTPUT/candidates/*.parquet, which `curate` reads
as they are, and OUTPUT/stats.json, the harvest's funnel. Overrides use the config's dotted
keys, e.g. harvest.respect_opt_out=false (configs/harvest.yaml shows every key).
"""

from __future__ import annotations

import sys

from conceptual.jobs.arguments import JobParser, add_config, add_data_arguments
from conceptual.jobs.runner import job_main, run_data_job


@job_main
def main(argv: list[str] | None = None) -> int:
    parser = JobParser("harvest", __doc__, keys="harvest.yaml")
    archives = "web archives: files, folders, s3:// prefixes or quoted globs (WARC or WAT)"
    add_data_arguments(parser, "where candidates/ and stats.json go", "--input", archives, True)
    add_config(parser, "HarvestConfig", "harvest.respect_opt_out=false")
    args = parser.parse_args(argv)
    # Imported here, so that --help and argument errors answer at once.
    from conceptual import storage
    from conceptual.harvest.stats import render
    from conceptual.pipelines.harvest import CANDIDATES, HarvestConfig, archive_files, run

    def check(inputs: list[str], config: HarvestConfig) -> HarvestConfig:
        archive_files(inputs)  # an input naming no archive is said before Ray starts
        return config

    def show(stats: dict, config: HarvestConfig) -> None:
        print(render(stats))
        candidates = stats["images"]["harvested"]
        print(f"candidates: {storage.join(args.output, CANDIDATES)}  ({candidates} pairs)")
        print(f"stats:      {storage.join(args.output, 'stats.json')}")

    return run_data_job("harvest", args, args.input, HarvestConfig, run, show, check=check)


if __name__ == "__main__":
    sys.exit(main())
