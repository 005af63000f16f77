"""Clean a split of a curated dataset by people's ratings (the paper's test set: the images
rated GOOD by 2 or more of 3 raters).

    python -m conceptual.jobs.clean_split --data CURATED --tasks TASKS [--ratings CSV]
        [--db URL] --split test --min-good 2 --output URI

TASKS is a caption_quality task set made from the data (`rating_tasks --kind
caption_quality --data CURATED`); its answers come from the rating page's database (--db, by
default SQLite in the state folder) or a CSV rater,item_id,answer, read as rating_results
reads them. The records of --split whose item at least --min-good raters answered GOOD are
kept; the others are dropped with a reason (not_rated, rated_another_caption,
fewer_good_than_min). OUTPUT gets the same curated layout: curated/ (the other splits copied
unchanged), rejected/ (what was dropped and why), stats.json (the funnel and Table 3 for each
split) and _SUCCESS; the run goes to MLflow (experiment `curation`).
"""

from __future__ import annotations

import sys

from conceptual.jobs.arguments import JobParser, add_verbose, location, output
from conceptual.jobs.rating_tasks import positive
from conceptual.jobs.runner import job_main, job_run, report_run


@job_main
def main(argv: list[str] | None = None) -> int:
    parser = JobParser("clean_split", __doc__)
    parser.add_argument("--data", required=True, type=location, help="a curated dataset")
    parser.add_argument(
        "--tasks", required=True, type=location, help="its caption_quality task set"
    )
    parser.add_argument("--ratings", type=location, help="a CSV: rater,item_id,answer")
    parser.add_argument("--db", help="the rating page's database URL (default: its SQLite)")
    parser.add_argument("--split", default="test", help="the split to clean (default: test)")
    parser.add_argument(
        "--min-good", type=positive, default=2, help="GOOD answers a caption needs (default: 2)"
    )
    parser.add_argument(
        "--output", required=True, type=output, help="where curated/, rejected/, stats.json go"
    )
    parser.add_argument("--experiment", default="curation", help="the MLflow experiment")
    add_verbose(parser)
    args = parser.parse_args(argv)
    from mlflow.exceptions import MlflowException

    from conceptual import funnel, storage
    from conceptual.pipelines.rating.clean_split import run
    from conceptual.storage import StorageError

    # no data or tasks, a task set that cannot clean it, a bad CSV
    refused = (StorageError, ValueError, MlflowException)
    with job_run("clean_split", args.verbose, refused, output=args.output) as log:
        print(f"clean_split: {args.data} ({args.split}) -> {args.output}", flush=True)
        stats, run_id = run(
            args.data,
            args.tasks,
            args.output,
            args.split,
            args.min_good,
            ratings_csv=args.ratings,
            db=args.db,
            experiment=args.experiment,
        )
    print(funnel.render(stats))
    copied = stats["clean_split"]["copied"]
    print(f"curated:  {storage.join(args.output, 'curated')}  ({stats['kept']} {args.split} "
          f"records kept, {copied} of the other splits copied)")  # fmt: skip
    if stats["input"] > stats["kept"]:
        print(f"rejected: {storage.join(args.output, 'rejected')}  "
              f"({stats['input'] - stats['kept']} records, with reasons)")  # fmt: skip
    print(f"stats:    {storage.join(args.output, 'stats.json')}")
    report_run(run_id, args.experiment, log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
