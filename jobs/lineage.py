"""Trace a model or a dataset back to the crawl it came from.

    python -m conceptual.jobs.lineage --model MODEL_URI | RUN_ID | DATASET_URI  [--json]
        [--no-verify]

MODEL_URI: models:/captioner@champion, models:/captioner/3 or runs:/<run id>/model. Prints
the chain: the model version, the run that trained it, the datasets it read (digests, rows
per split and what each was read for), the runs that wrote them (features, curation), back
to the raw inputs and their funnel (stats.json) or import counts (import.json). Each
dataset's files are hashed again: one that changed since the run read it is reported as
changed (--no-verify skips reading them). --json prints the chain as JSON.
"""

from __future__ import annotations

import json
import sys

from conceptual.jobs.arguments import JobParser, add_verbose, location
from conceptual.jobs.runner import job_main, job_run


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
    with job_run("lineage", args.verbose):
        from conceptual import lineage_chain
        from conceptual.paths import user_path

        target = args.model or args.data
        if not target.startswith(("models:/", "runs:/")) and not lineage_chain.RUN_ID.fullmatch(
            target
        ):
            target = user_path(target)  # a dataset's folder, named as --data names it
        chain = lineage_chain.trace(target, verify=not args.no_verify)
    print(json.dumps(chain, indent=2) if args.json else lineage_chain.render(chain))
    return 0


if __name__ == "__main__":
    sys.exit(main())
