"""Train the four-view fluency classifier of Chinese translations, register it as `fluency-zh`,
and make it the champion if it beats the current one on the same dev labels.

    python -m conceptual.jobs.train_fluency --cn DIR [--config FILE] [--no-register]
        [key=value ...]

DIR is the Flickr8k-CN folder: the labels are Baidu's and Google's translations of the test
captions judged against the human translations (flickr8kzhmtest; chrF >= threshold, see
conceptual.text.fluency), split by photo into train, dev and test. Overrides use the
config's keys (pipelines/train_fluency.py), e.g. epochs=4 threshold=0.45 model.hidden=256.
The run lands in MLflow (experiment `fluency`) with the held-out precision and recall of
the four-view score, of each view alone and of sentence length; the best checkpoint by dev
AUC is logged under the run's model/ (runs:/<run id>/model) and becomes a version of
`fluency-zh`, and `champion` moves to it only when it beats the champion's dev AUC on the
same labels.
"""

from __future__ import annotations

import argparse
import json
import sys

from conceptual.jobs.arguments import add_common, location, report_run
from conceptual.logs import job_output, stderr


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m conceptual.jobs.train_fluency", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--cn", required=True, type=location, help="the Flickr8k-CN folder")
    parser.add_argument("--config", type=location, help="YAML file of FluencyTrainConfig keys")
    parser.add_argument("--model-name", help="registered model (default: fluency-zh)")
    parser.add_argument("--no-register", action="store_true", help="train and log only")
    add_common(parser, "FluencyTrainConfig keys, e.g. epochs=4 threshold=0.45")
    args = parser.parse_args(argv)
    from conceptual.config import ConfigError, load
    from conceptual.pipelines.train_fluency import (
        MODEL_NAME,
        FluencyTrainConfig,
        held_out_markdown,
        publish,
        train,
    )

    with job_output("train_fluency", args.verbose) as log:
        try:
            config = load(FluencyTrainConfig, args.config, args.overrides)
            result = train(args.cn, config)
        except (ConfigError, ValueError) as exc:  # a missing folder or file, no labels
            print(f"error: {exc}", file=stderr())
            return 2
        decision = None if args.no_register else publish(result, args.model_name or MODEL_NAME)
    best = {k: v for k, v in result["best"].items() if "." not in k}  # the views' are logged
    print(json.dumps({"best": best, "eval_set": result["eval_set"]}, indent=2))
    print(held_out_markdown(result["held_out"]))
    print(f"model:    {result['model_dir']}")
    if decision:
        print(f"registered: {decision['version']} ({decision['reason']}: {decision['detail']})")
    report_run(result["run_id"], config.experiment, log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
