"""Training speed on this machine: samples/s, tokens/s, achieved TFLOP/s, MFU, the share of the
step time spent waiting for input, peak memory; one JSON line per variant, logged to MLflow.

    python -m conceptual.jobs.benchmark_training [--features URI] [--steps N] [--warmup N]
        [--peak-tflops F] [--config FILE] [key=value ...]
    python -m conceptual.jobs.benchmark_training --input-only [--epochs N] [--steps N]
        [--features URI] [key=value ...]

The keys are train_captioner's (configs/train_captioner.yaml), e.g. model.architecture=rnn
model.feature_map=1x1 batch_size=256 grad_accumulation=2 compile=false. With --features
the batches are read from a features job's output through the training input path; without
it, features and 15-word captions are made up (1,280 channels, 8x8). On a CPU, MFU is
against a float32 matmul rate measured on it; on a GPU against its dense bf16 peak (a table
by name, or --peak-tflops).

--input-only times the training input path alone (data.* keys; data.shuffle=batch_buffer is
the path before issue 50), its batches delivered to a step that does nothing: a first
epoch, then --epochs more (--steps batches each on made-up features), one JSON line with
samples_per_s and gb_per_s of those later epochs.
"""

from __future__ import annotations

import json
import sys

from conceptual.jobs.arguments import JobParser, add_config, location
from conceptual.jobs.runner import job_main, job_run


@job_main
def main(argv: list[str] | None = None) -> int:
    parser = JobParser("benchmark_training", __doc__, keys="train_captioner.yaml")
    parser.add_argument("--features", type=location, help="a features job's output")
    parser.add_argument("--steps", type=int, default=10, help="timed steps per variant")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    parser.add_argument("--peak-tflops", type=float, help="the device's peak, TFLOP/s")
    parser.add_argument(
        "--input-only", action="store_true", help="time the input path alone, no step"
    )
    parser.add_argument("--epochs", type=int, default=3, help="timed epochs (--input-only)")
    add_config(parser, "CaptionerTrainConfig", "model.architecture=rnn batch_size=256")
    args = parser.parse_args(argv)
    import mlflow

    from conceptual import tracking
    from conceptual.config import load
    from conceptual.pipelines.families.captioner.train_captioner import CaptionerTrainConfig
    from conceptual.pipelines.training.benchmark_training import benchmark, input_only

    with job_run("benchmark_training", args.verbose):
        config = load(CaptionerTrainConfig, args.config, args.overrides)
        if args.input_only:
            rows = [input_only(config, args.features, args.steps, args.epochs)]
        else:
            rows = benchmark(config, args.features, args.steps, args.warmup, args.peak_tflops)
        with tracking.start_run("training-benchmark", job="benchmark_training"):
            tracking.log_config(config)
            tracking.log_params(
                {
                    "features_uri": args.features or "synthetic",
                    "steps": args.steps,
                    "input_only": args.input_only,
                }
            )
            for row in rows:
                figures = {k: v for k, v in row.items() if isinstance(v, float)}
                mlflow.log_metrics(
                    {tracking.metric_key(row["variant"], k): v for k, v in figures.items()}
                )
    for row in rows:
        print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
