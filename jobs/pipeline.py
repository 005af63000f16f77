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

from conceptual.jobs.arguments import config_job


def parts() -> tuple:
    from conceptual.pipelines.pipeline import PipelineConfig, check_steps, run

    return PipelineConfig, check_steps, run


def show(result: dict, _config) -> None:
    print(f"\nsummary:  {result['summary']}  (every step's result)")


main = config_job(
    "pipeline", __doc__, "input=URI output=URI train.epochs=5 steps=[curate]", ("input",),
    parts, show, "pipeline run",
)  # fmt: skip

if __name__ == "__main__":
    sys.exit(main())
