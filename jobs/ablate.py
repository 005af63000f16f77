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

from conceptual.jobs.arguments import config_job


def parts() -> tuple:
    from conceptual.pipelines.curation.ablation import AblateConfig, Planned, run

    return AblateConfig, Planned, run


def show(result: dict, config) -> None:
    print(f"\n{result['table']}")
    print(f"ablation: {config.output}/ablation.json  (every variant's row and funnel)")


main = config_job(
    "ablate", __doc__, "input=URI eval_features=URI output=URI train.epochs=5",
    ("input", "eval_features"), parts, show, "comparison run",
)  # fmt: skip

if __name__ == "__main__":
    sys.exit(main())
