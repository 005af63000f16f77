"""Run the stages in order as one resumable job: curate, features, train, register, evaluate
and, when listed, speech, train_retriever and index.

    python -m conceptual.jobs.pipeline --config FILE [key=value ...]

The config names the input and output, the stages to run (in that order, each with the
stages it reads: pipelines/pipeline.py's table) and holds each stage's section
(configs/pipeline.yaml shows them). A stage that finished before with the same inputs and
config is skipped, so a rerun after a failure continues where it stopped. Every stage's
MLflow run is a child of one pipeline run. Each stage says what it did as it ends; every
stage's result goes to OUTPUT/summary.json.
"""

from __future__ import annotations

import sys

from conceptual.jobs.arguments import JobParser, add_config
from conceptual.jobs.runner import job_main, job_run, report_run


@job_main
def main(argv: list[str] | None = None) -> int:
    parser = JobParser("pipeline", __doc__, keys="pipeline.yaml")
    parser.writes_output()
    add_config(parser, "PipelineConfig", "input=URI output=URI train.epochs=5 stages=[curate]")
    args = parser.parse_args(argv)
    from conceptual.candidates import CandidateFormatError
    from conceptual.config import ConfigError, load
    from conceptual.paths import user_path
    from conceptual.pipelines.pipeline import PipelineConfig, PipelineStopped, check_steps, run
    from conceptual.runtime import init_ray, require_shared
    from conceptual.storage import StorageError, claim_output, refuse_overlap

    refused = (ConfigError, CandidateFormatError, StorageError, ValueError)
    with job_run("pipeline", args.verbose, refused, failed=(PipelineStopped,)) as log:
        config = load(PipelineConfig, args.config, args.overrides)
        if config.input and config.output:
            config = config.model_copy(
                update={"input": user_path(config.input), "output": user_path(config.output)}
            )
        check_steps(config)  # before Ray starts
        # Each stage clears and rewrites its folder under output: not the input's.
        refuse_overlap({"output": config.output}, {"input": config.input})
        if config.output:
            claim_output(config.output, parser.prog, args.into_existing)
        init_ray()
        require_shared({"input": config.input, "output": config.output})
        result = run(config)
    print(f"\nsummary:  {result['summary']}  (every stage's result)")
    report_run(result["run_id"], config.experiment, log, "pipeline run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
