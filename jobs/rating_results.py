"""Compute the papers' human tables from a task set's ratings and log them to MLflow.

    python -m conceptual.jobs.rating_results --tasks URI [--ratings FILE.csv] [--db URL]
        [--run RUN_ID]

The ratings are the rating page's answers to the task set (its database: --db, by default
SQLite in the state folder) or a CSV with columns rater,item_id,answer (a crowdsourcing
export; answers as tasks.json's `answers` says). Ratings of unknown items, answers that are
no answer and a rater's second answer to an item are counted and left out. The tables
(GOOD by 1+/2+/all raters, human R@1/5 beside the automatic ones, relevance and fluency
per approach), agreement (fleiss_kappa, Krippendorff's alpha for 1-5 scales) and items per
rater go to --run, or by default to a new run linked to the run the tasks came from.
"""

from __future__ import annotations

import sys

from conceptual.jobs.arguments import JobParser, add_verbose, location
from conceptual.jobs.runner import job_main, job_run, report_run


@job_main
def main(argv: list[str] | None = None) -> int:
    parser = JobParser("rating_results", __doc__)
    parser.add_argument("--tasks", required=True, type=location, help="a rating_tasks output")
    parser.add_argument("--ratings", type=location, help="a CSV: rater,item_id,answer")
    parser.add_argument("--db", help="the rating page's database URL (default: its SQLite)")
    parser.add_argument("--run", help="the MLflow run to log to (default: a new linked one)")
    add_verbose(parser)
    args = parser.parse_args(argv)
    from mlflow.exceptions import MlflowException

    from conceptual.pipelines.rating.rating_results import ratings, results, text_table
    from conceptual.rating.tasks import read_task_set
    from conceptual.storage import StorageError

    refused = (StorageError, ValueError, MlflowException)  # no tasks, bad CSV, run
    with job_run("rating_results", args.verbose, refused) as log:
        tasks = read_task_set(args.tasks)
        rows = ratings(tasks, args.ratings, args.db)
        tables, run_id, experiment = results(tasks, args.tasks, rows, args.run)
    for name, table in tables.tables.items():
        if table:
            print(f"{name}:\n{text_table(table)}\n")
    agreement = {k: v for k, v in tables.metrics.items() if "kappa" in k or "alpha" in k}
    print(
        "agreement: "
        + ", ".join(f"{k} {'n/a' if v is None else f'{v:.3f}'}" for k, v in agreement.items())
    )
    report_run(run_id, experiment, log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
