"""Trace a model or a dataset back to the crawl it came from.

    python -m conceptual.jobs.lineage --model MODEL_URI | RUN_ID | DATASET_URI  [--json]
        [--no-verify]

MODEL_URI: models:/captioner@champion, models:/captioner/3 or runs:/<run id>/model. Prints
the chain: the model version, the run that trained it, the datasets it read (digests, rows
per split and what each was read for), the runs that wrote them (features, curation,
harvest), back to the raw inputs and their funnel (stats.json: a curation's; a harvest's
files, records, pages and candidates) or import counts (import.json). Each dataset's files
are hashed again: one that changed since the run read it is reported as changed
(--no-verify skips reading them). --json prints the chain as JSON. What lineage cannot
read is one `error:` line (exit 1), never a traceback.
"""

from __future__ import annotations

import json
import logging
import sys

from conceptual.config import ConfigError
from conceptual.jobs.arguments import JobParser, add_verbose, location
from conceptual.jobs.runner import job_main, job_run
from conceptual.storage import StorageError

# What job_run says as the user's to fix (exit code 2; an unreachable tracking server is a
# StorageError), as for every job.
REFUSED = (ConfigError, StorageError, ValueError)


@job_main
def main(argv: list[str] | None = None) -> int:
    parser = JobParser("lineage", __doc__)
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument(
        "--model", help="a model URI (models:/..., runs:/...), a run id, or a dataset's URI"
    )
    what.add_argument("--data", type=location, help="a dataset: a job's output folder")
    parser.add_argument("--json", action="store_true", help="print the chain as JSON")
    parser.add_argument(
        "--no-verify", action="store_true", help="do not hash the datasets' files again"
    )
    add_verbose(parser)
    args = parser.parse_args(argv)
    # What no check foresaw (a report or a run in a shape lineage does not know) is said in
    # one `error:` line with exit code 1, never a traceback; its traceback is in the log.
    with job_run("lineage", args.verbose, failed=(Untraceable,)) as log:
        target = args.model or args.data
        try:
            shown = traced(target, args.json, verify=not args.no_verify)
        except REFUSED:
            raise
        except Exception as exc:
            logging.getLogger(__name__).exception("lineage of %s", target)
            where = f" (the traceback is in {log})" if log else ""
            raise Untraceable(
                f"lineage could not trace {target}: {type(exc).__name__}: {exc}{where}"
            ) from None
    print(shown)
    return 0


class Untraceable(Exception):
    """A failure of lineage itself, said as one line."""


def traced(target: str, as_json: bool, verify: bool) -> str:
    """The chain behind `target` as text, or as JSON."""
    from conceptual import lineage_chain
    from conceptual.paths import user_path

    if not target.startswith(("models:/", "runs:/")) and not lineage_chain.RUN_ID.fullmatch(target):
        target = user_path(target)  # a dataset's folder, named as --data names it
    chain = lineage_chain.trace(target, verify=verify)
    return json.dumps(chain, indent=2) if as_json else lineage_chain.render(chain)


if __name__ == "__main__":
    sys.exit(main())
