"""Harvest candidate image/alt-text pairs from web archives (WARC, WAT).

    python -m conceptual.jobs.harvest --input URI [URI ...] --output URI [--config FILE]
        [key=value ...]
    python -m conceptual.jobs.harvest --crawl CC-MAIN-2025-08 [--files N | --fraction F]
        [--kind wat|warc] --output URI [key=value ...]

Inputs: WARC files (`wget --warc-file`, Heritrix, browsertrix, Common Crawl's WARCs) or
Common Crawl WAT files, plain or gzipped (per record or as one stream), known by their
content; each a path, file:// or s3:// URI, a folder or prefix (its .warc/.wat files), or a
quoted glob (`'crawl/*.warc.gz'`). Writes OUTPUT/candidates/*.parquet, which `curate` reads
as they are, and OUTPUT/stats.json, the harvest's funnel. Overrides use the config's dotted
keys, e.g. harvest.respect_opt_out=false (configs/harvest.yaml shows every key).

`--crawl` names a Common Crawl crawl instead: its `wat.paths.gz` (or `warc.paths.gz`) is read
from s3://commoncrawl/crawl-data/CRAWL/ (harvest.crawl_root=URI for a mirror) and its first
N files (`--files`), or a fraction drawn with harvest.crawl_seed (`--fraction`), harvested.
"""

from __future__ import annotations

import functools
import sys

from conceptual.jobs.arguments import JobParser, add_config, add_data_arguments
from conceptual.jobs.runner import job_main, run_data_job


@job_main
def main(argv: list[str] | None = None) -> int:
    parser = JobParser("harvest", __doc__, keys="harvest.yaml")
    archives = "web archives: files, folders, s3:// prefixes or quoted globs (WARC or WAT)"
    add_data_arguments(
        parser, "where candidates/ and stats.json go", "--input", archives, True, required=False
    )
    crawl = parser.add_argument_group("Common Crawl by name (instead of --input)")
    crawl.add_argument("--crawl", metavar="CC-MAIN-YYYY-WW", help="a crawl, e.g. CC-MAIN-2025-08")
    share = crawl.add_mutually_exclusive_group()
    share.add_argument("--files", type=int, metavar="N", help="its first N files")
    share.add_argument("--fraction", type=float, metavar="F", help="a seeded fraction of them")
    crawl.add_argument("--kind", choices=("wat", "warc"), default="wat", help="default: wat")
    add_config(parser, "HarvestConfig", "harvest.respect_opt_out=false")
    args = parser.parse_args(argv)
    if bool(args.input) == bool(args.crawl):
        parser.error("one of --input (web archives) or --crawl (a Common Crawl crawl's name)")
    if not args.crawl and (args.files is not None or args.fraction is not None):
        parser.error("--files and --fraction choose among a --crawl's files")
    if args.files is not None and args.files < 1:
        parser.error(f"--files {args.files}: at least 1")
    if args.fraction is not None and not 0 < args.fraction <= 1:
        parser.error(f"--fraction {args.fraction}: more than 0, at most 1")
    # Imported here, so that --help and argument errors answer at once.
    from conceptual import storage
    from conceptual.harvest.crawls import crawl_files
    from conceptual.harvest.stats import render
    from conceptual.pipelines.curation.harvest import CANDIDATES, HarvestConfig, archive_files, run

    if args.crawl:  # the crawl's own list: its files are not looked up one by one
        run = functools.partial(run, listed=True)

    def check(inputs: list[str], config: HarvestConfig):
        if args.crawl:  # the crawl's list of files, read now: a wrong name is said at once
            rules = config.harvest
            files = crawl_files(
                args.crawl, args.kind, rules.crawl_root, args.files, args.fraction, rules.crawl_seed
            )
            print(f"{args.crawl}: {len(files)} {args.kind.upper()} files to harvest", flush=True)
            return config, files
        archive_files(inputs)  # an input naming no archive is said before Ray starts
        return config

    def show(stats: dict, config: HarvestConfig) -> None:
        print(render(stats))
        candidates = stats["images"]["harvested"]
        print(f"candidates: {storage.join(args.output, CANDIDATES)}  ({candidates} pairs)")
        print(f"stats:      {storage.join(args.output, 'stats.json')}")

    source = args.input or []  # a crawl's files: listed by `check`
    return run_data_job("harvest", args, source, HarvestConfig, run, show, check=check)


if __name__ == "__main__":
    sys.exit(main())
