"""Train a dual encoder for image<->speech or image<->text retrieval, register it, and make it
the champion if it beats the current one on the same dev set.

    python -m conceptual.jobs.train_retriever --features URI [--speech URI] [--config FILE]
        modality=speech|text loss=mms|triplet [key=value ...]

FEATURES is a features job's output (the images and their captions); SPEECH, for
modality=speech, any output holding clips of those captions (a synthesize_speech output, or
an import that carried recorded speech). Overrides use the config's keys
(configs/train_retriever.yaml lists them all), e.g. batch_size=24 epochs=4 workers=2
model.embed_dim=1536. The run lands in MLflow (experiment `retrieval`); the best checkpoint
by dev mean R@10 (both directions) becomes a version of `retriever-speech` or
`retriever-text`, and `champion` moves to it only when it beats the champion's on the same
dev set.
"""

from __future__ import annotations

import argparse
import json
import sys

from conceptual.jobs.arguments import add_common, location, report_run
from conceptual.logs import job_output, stderr


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m conceptual.jobs.train_retriever", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--features", required=True, type=location, help="a features job's output")
    parser.add_argument("--speech", type=location, help="clips of the captions (modality=speech)")
    parser.add_argument("--config", type=location, help="YAML file of RetrieverTrainConfig keys")
    parser.add_argument("--model-name", help="registered model (default: retriever-<modality>)")
    parser.add_argument("--no-register", action="store_true", help="train and log only")
    add_common(parser, "RetrieverTrainConfig keys, e.g. modality=text loss=triplet epochs=4")
    args = parser.parse_args(argv)
    from conceptual.config import ConfigError, load
    from conceptual.pipelines.train_retriever import RetrieverTrainConfig, publish, train
    from conceptual.storage import StorageError

    with job_output("train_retriever", args.verbose) as log:
        try:
            config = load(RetrieverTrainConfig, args.config, args.overrides)
            result = train(args.features, config, args.speech)
        except (ConfigError, StorageError, ValueError) as exc:  # ValueError: e.g. no dev split
            print(f"error: {exc}", file=stderr())
            return 2
        decision = None if args.no_register else publish(result, config, name=args.model_name)
    print(json.dumps({"best": result["best"], "eval_set": result["eval_set"]}, indent=2))
    print(f"model:    {result['model_dir']}")
    if decision:
        print(f"registered: {decision['version']} ({decision['reason']}: {decision['detail']})")
    report_run(result["run_id"], config.experiment, log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
