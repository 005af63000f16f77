"""Apply the text transformation to lines of text, to see what curation does to them.

    python -m conceptual.jobs.hypernymize [--filters] [FILE] [--config FILE] [key=value ...]

Reads FILE (or standard input) and writes exactly one line per input line: the transformed
caption, or `REJECT<TAB>stage<TAB>reason`. Without --filters only the transformation runs,
so lowercase or odd input is transformed rather than filtered; with it the text filters run
first, exactly as in the curation pipeline (the same code: conceptual.text.curate).
"""

from __future__ import annotations

import argparse
import itertools
import sys
from typing import TextIO

from conceptual.config import ConfigError, load
from conceptual.jobs.arguments import JobParser, add_common, location
from conceptual.jobs.runner import job_main, job_run
from conceptual.pipelines.curation.curation_config import CurationConfig
from conceptual.text.curate import TextCurator

CHUNK = 512  # lines per spaCy batch; output is flushed after each chunk


def transform_stream(curator: TextCurator, lines: TextIO, out: TextIO, apply_filters: bool) -> None:
    # Lines end at "\n" only (newline="\n" on open), so the count matches `wc -l`.
    stream = (line.rstrip("\r\n") for line in lines)
    while chunk := list(itertools.islice(stream, CHUNK)):
        for outcome in curator.process(chunk, apply_filters=apply_filters):
            out.write(
                f"{outcome.caption}\n"
                if outcome.kept
                else f"REJECT\t{outcome.stage}\t{outcome.rejection.reason}\n"
            )
        out.flush()


@job_main
def main(argv: list[str] | None = None) -> int:
    parser = JobParser("hypernymize", __doc__)
    parser.add_argument("file", nargs="?", help="input file (default: standard input)")
    parser.add_argument("--filters", action="store_true", help="run the text filters first")
    parser.add_argument("--config", type=location, help="curation YAML; its `text` section applies")
    add_common(parser, "e.g. text.hypernym.min_tokens=2")
    args, extra = parser.parse_known_args(argv)
    # `FILE key=value` and `key=value` alone both work: the first non-override is the file.
    positional = ([args.file] if args.file else []) + args.overrides + extra
    overrides = [a for a in positional if "=" in a]
    try:
        files = [location(a) for a in positional if "=" not in a]
    except argparse.ArgumentTypeError as exc:
        parser.error(str(exc))
    if len(files) > 1:
        parser.error(f"one input file at most, got {files}")
    with job_run("hypernymize", args.verbose, refused=(ConfigError,)):
        curator = TextCurator(load(CurationConfig, args.config, overrides).text)
        if files:
            with open(files[0], encoding="utf-8", errors="replace", newline="\n") as lines:
                transform_stream(curator, lines, sys.stdout, args.filters)
        else:
            stdin = open(
                sys.stdin.fileno(), encoding="utf-8", errors="replace", newline="\n", closefd=False
            )
            transform_stream(curator, stdin, sys.stdout, args.filters)
    return 0


if __name__ == "__main__":
    sys.exit(main())
