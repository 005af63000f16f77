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
(pipelines/train_captioner.py says how).
"""

from __future__ import annotations

import argparse
import json
import sys

from conceptual.jobs.arguments import add_common, location, report_run
from conceptual.logs import job_output, stderr


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m conceptual.jobs.train_captioner", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--features", required=True, type=location, help="a features job's output")
    parser.add_argument("--config", type=location, help="YAML file of TrainConfig keys")
    parser.add_argument(
        "--model-name", help="registered model (default: captioner, captioner-zh for language=zh)"
    )
    parser.add_argument("--no-register", action="store_true", help="train and log only")
    add_common(parser, "TrainConfig keys, e.g. model.architecture=rnn model.feature_map=1x1")
    args = parser.parse_args(argv)
    from conceptual.config import ConfigError, load
    from conceptual.models.variants import model_name
    from conceptual.pipelines.train_captioner import TrainConfig, publish, train
    from conceptual.storage import StorageError

    with job_output("train_captioner", args.verbose) as log:
        try:
            config = load(TrainConfig, args.config, args.overrides)
            result = train(args.features, config)
        except (ConfigError, StorageError, ValueError) as exc:  # ValueError: e.g. no dev split
            print(f"error: {exc}", file=stderr())
            return 2
        decision = None if args.no_register else publish(result, config, name=args.model_name)
        registered = args.model_name or model_name(config.language)
    print(json.dumps({"best": result["best"], "eval_set": result["eval_set"]}, indent=2))
    print(f"model:    {result['model_dir']}")
    if decision:
        print(f"registered: models:/{registered}/{decision['version']}")
        print(f"champion: {decision['reason']}: {decision['detail']}")
    report_run(result["run_id"], config.experiment, log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
