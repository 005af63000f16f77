"""Run the steps in order as one resumable job: curate, features, train, register, evaluate
and, when listed, speech, train_retriever and index.

    python -m conceptual.jobs.pipeline --config FILE [key=value ...]

The config names the input and output, the steps to run (in that order, each with the
steps it reads: pipelines/pipeline.py's table) and holds each step's section
(configs/pipeline.yaml shows them). A step that finished before with the same inputs and
config is skipped, so a rerun after a failure continues where it stopped. Every step's
MLflow run is a child of one pipeline run. Each step says what it did as it ends; every
step's result goes to OUTPUT/summary.json.
"""

from __future__ import annotations

import sys

from conceptual.jobs.arguments import JobParser, add_config
from conceptual.jobs.runner import job_main, run_config_job


@job_main
def main(argv: list[str] | None = None) -> int:
    parser = JobParser("pipeline", __doc__, keys="pipeline.yaml")
    parser.writes_output()
    add_config(parser, "PipelineConfig", "input=URI output=URI train.epochs=5 steps=[curate]")
    args = parser.parse_args(argv)
    from conceptual.pipelines.pipeline import PipelineConfig, check_steps, run

    def show(result: dict, _config: PipelineConfig) -> None:
        print(f"\nsummary:  {result['summary']}  (every step's result)")

    return run_config_job(
        "pipeline", parser.prog, args, PipelineConfig, ("input",), check_steps, run, show,
        "pipeline run",
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
