"""Choose a curation by the model it trains: the same candidates curated under each variant's
curation config, a model of one family trained on each with the same seed and budget, every
model scored on one fixed held-out set.

    python -m conceptual.jobs.ablate --config FILE [key=value ...]

The config (configs/ablate.yaml lists every key; examples/ablate_flickr8k.yaml is a whole
ablation) names the candidates (input), the held-out features (eval_features: photos never
among the candidates), the output, the family (contrastive), its training keys (train: the
seed and the budget), and the variants, each `name: curation overrides`
(`no-overlap: overlap.enabled=false`). Every variant is checked before anything runs. Each
is a child run of one comparison run in the `experiment`, with its funnel, its curation,
features, training and evaluation runs below it; the table (mean R@10 with its 95% bootstrap
interval over the held-out images and a paired p-value against the best) goes to that run
and to OUTPUT/ablation.json, ablation.md and ablation.png. A rerun skips the curation and
features a variant already made with the same inputs and config (OUTPUT/variants/<name>/).
"""

from __future__ import annotations

import sys

from conceptual.jobs.arguments import JobParser, add_config
from conceptual.jobs.runner import job_main, job_run, report_run


@job_main
def main(argv: list[str] | None = None) -> int:
    parser = JobParser("ablate", __doc__, keys="ablate.yaml")
    parser.writes_output()
    add_config(parser, "AblateConfig", "input=URI eval_features=URI output=URI train.epochs=5")
    args = parser.parse_args(argv)
    from conceptual.candidates import CandidateFormatError
    from conceptual.config import ConfigError, load
    from conceptual.paths import user_path
    from conceptual.pipelines.ablation import AblateConfig, Planned, run
    from conceptual.pipelines.pipeline import PipelineStopped
    from conceptual.runtime import init_ray, require_shared
    from conceptual.storage import StorageError, claim_output, refuse_overlap

    refused = (ConfigError, CandidateFormatError, StorageError, ValueError)
    with job_run("ablate", args.verbose, refused, failed=(PipelineStopped,)) as log:
        config = load(AblateConfig, args.config, args.overrides)
        paths = ("input", "eval_features", "output")
        config = config.model_copy(
            update={k: user_path(getattr(config, k)) for k in paths if getattr(config, k)}
        )
        Planned(config)  # every variant checked before Ray starts
        refuse_overlap(
            {"output": config.output},
            {"input": config.input, "eval_features": config.eval_features},
        )
        claim_output(config.output, parser.prog, args.into_existing)
        init_ray()
        require_shared({k: getattr(config, k) for k in paths})
        result = run(config)
    print(f"\n{result['table']}")
    print(f"ablation: {config.output}/ablation.json  (every variant's row and funnel)")
    report_run(result["run_id"], config.experiment, log, "comparison run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
