"""Train the four captioner variants on one features dataset and compare them.

    python -m conceptual.jobs.compare_captioners --features URI
        [--variants rnn-1x1,rnn-8x8,transformer-1x1,transformer-8x8] [--no-register]
        [--config FILE] [key=value ...]

Every variant trains with the same TrainConfig (overrides as for train_captioner, e.g.
epochs=20 workers=2; experiment=NAME keeps the comparison in an experiment of its own) as a
child of one comparison run, whose artifacts are the comparison table (comparison.json,
comparison.md) and plot (comparison.png). Each model is registered and the champion rule
applied, so the best variant becomes the champion if it beats the current one.
"""

from __future__ import annotations

import argparse
import sys

from conceptual import registry
from conceptual.config import ConfigError, load
from conceptual.pipelines.compare_captioners import VARIANTS, compare, markdown_table
from conceptual.pipelines.train_captioner import TrainConfig
from conceptual.storage import StorageError
from conceptual.tracking import tracking_uri


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m conceptual.jobs.compare_captioners", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--features", required=True, help="a features job's output")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated")
    parser.add_argument("--config", help="YAML file of TrainConfig keys")
    parser.add_argument("--model-name", default=registry.MODEL_NAME, help="registered model")
    parser.add_argument("--no-register", action="store_true", help="train and compare only")
    parser.add_argument("overrides", nargs="*", metavar="key=value")
    args = parser.parse_args(argv)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    try:
        config = load(TrainConfig, args.config, args.overrides)
        result = compare(args.features, config, variants, not args.no_register, args.model_name)
    except (ConfigError, StorageError, ValueError) as exc:  # ValueError: e.g. no dev split
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(markdown_table(result["rows"]))
    for row in result["rows"]:
        if row["version"] is not None:
            print(
                f"{row['variant']}: models:/{args.model_name}/{row['version']} ({row['champion']})"
            )
    print(f"mlflow: comparison run {result['run_id']} in {config.experiment!r} at {tracking_uri()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
