"""Train a captioner on a features dataset, register it, and make it the champion if it
beats the current one on the same evaluation set.

    python -m conceptual.jobs.train_captioner --features URI [--config FILE] [key=value ...]

FEATURES is a features job's output (conceptual.jobs.features). Overrides use the config's
keys (configs/train_captioner.yaml lists them all), e.g. model.architecture=rnn
model.feature_map=1x1 epochs=20 workers=2 optimizer=adamw lr=0.001.
The run lands in MLflow (experiment `captioning`); the best checkpoint by dev CIDEr becomes
a version of the registered model `captioner`, tagged with its variant, and the alias
`champion` moves to it only when its dev CIDEr beats the champion's on the same dev set.
Chinese: language=zh on features of Chinese captions registers `captioner-zh`, and
fluency=only|rejection|weighted lets the translations' fluency scores steer training
(pipelines/families/captioner/train_captioner.py says how).
"""

from __future__ import annotations

import sys

from conceptual.jobs.arguments import JobParser, location, training_parser
from conceptual.jobs.runner import family_job, run_training_job
from conceptual.pipelines.families import FAMILIES, Family


def add_data(parser: JobParser) -> None:
    """What a captioner trains on (compare_captioners' variants too)."""
    parser.add_argument("--features", required=True, type=location, help="a features job's output")


@family_job
def job(family: Family, name: str, argv: list[str] | None = None) -> int:
    """The job `name` of `family` (conceptual.pipelines.families)."""
    args = training_parser(family, name, __doc__, add_data).parse_args(argv)
    return run_training_job(args, family, args.features)


main = job(FAMILIES["captioner"], "train_captioner")


if __name__ == "__main__":
    sys.exit(main())
