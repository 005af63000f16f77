"""Issue 19's GPU figures in one process, for a GPU machine that has torch, Ray and MLflow's
client but no test fixtures (no moto, no MLflow database): the rows of
conceptual.jobs.benchmark_training (`benchmark()`, the same call the job and
test_training_efficiency.py make, without the job's MLflow logging) and the decoding
latencies of test_captioner_speed.py (`decode_latency`), one JSON line each, printed as
they finish.

    python tests/benchmarks/gpu_figures.py decode train:transformer-8x8:256:true ...

`decode` times greedy and beam-4 decoding of every variant (float32, and under bf16
autocast), `decode-copy` the Transformers' as the caption job and serving decode on a GPU
(the bf16 copy, eager and compiled: issue 50's < 20 ms an image at batch 1 and < 0.2 ms at
batch 256 for beam 4), `profile-decode` profiles beam-4 decoding;
`train:<variant>:<batch>[:key=value ...]` runs the benchmark at the spec's sizes
(CaptionerTrainConfig's keys, and steps=N).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent))

from test_captioner_speed import decode_latency, vocabulary  # noqa: E402

from conceptual.config import load  # noqa: E402
from conceptual.models.variants import VARIANTS  # noqa: E402
from conceptual.pipelines.families.captioner.train_captioner import CaptionerTrainConfig  # noqa: E402
from conceptual.pipelines.training.benchmark_training import benchmark  # noqa: E402

STEPS = int(os.environ.get("CONCEPTUAL_BENCH_STEPS", 20))


def decoding() -> list[dict]:
    vocab, device = vocabulary(), torch.device("cuda")
    rows = []
    for precision in ("float32", "bf16 autocast"):
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision != "float32"):
            for name in VARIANTS:
                rows.append(
                    {"decode": name, "precision": precision, **decode_latency(name, vocab, device)}
                )
    return rows


def decoding_copy() -> list[dict]:
    vocab, device = vocabulary(), torch.device("cuda")
    return [
        {
            "decode": name,
            "precision": "bf16 copy" + (", compiled" if compiled else ""),
            **decode_latency(name, vocab, device, torch.bfloat16, compiled),
        }
        for name in VARIANTS
        if name.startswith("transformer")
        for compiled in (False, True)
    ]


def training(variant: str, batch: str, *keys: str) -> list[dict]:
    """`keys`: CaptionerTrainConfig's key=value, and steps=N."""
    architecture, _, feature_map = variant.partition("-")
    steps = int(dict(k.split("=") for k in keys).get("steps", STEPS))
    keys = [
        f"model.architecture={architecture}",
        f"model.feature_map={feature_map}",
        f"batch_size={batch}",
        *(k for k in keys if not k.startswith("steps=")),
    ]
    return benchmark(load(CaptionerTrainConfig, None, keys), steps=steps, warmup=3)


def profiled_decoding() -> list[dict]:
    """Where beam-4 decoding of the spec's transformer-8x8 spends its time (float32)."""
    from test_captioner_speed import batch, model_for
    from torch.profiler import ProfilerActivity, profile

    from conceptual.models.decoding import beam_search

    vocab, device = vocabulary(), torch.device("cuda")
    model, _ = model_for("transformer-8x8", vocab, device)
    model.eval()
    features = batch(np.random.default_rng(1), vocab, 256, "8x8")["features"].to(device)
    rows = []
    for size in (1, 256):
        beam_search(model, features[:size])
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            beam_search(model, features[:size])
        events = prof.key_averages()
        print(f"beam4 batch {size}:\n" + events.table(sort_by="self_cuda_time_total", row_limit=12))
        rows.append(
            {
                "profile": f"beam4 batch {size}",
                "cuda_ms": round(sum(e.self_device_time_total for e in events) / 1e3, 1),
                "kernels": sum(e.count for e in events if e.self_device_time_total > 0),
            }
        )
    return rows


DECODING = {"decode": decoding, "decode-copy": decoding_copy, "profile-decode": profiled_decoding}


def main(specs: list[str]) -> None:
    for spec in specs:
        started = time.perf_counter()
        try:
            if spec in DECODING:
                rows = DECODING[spec]()
            else:
                rows = training(*spec.split(":")[1:])
        except Exception:  # one failing variant must not lose the others' figures
            traceback.print_exc()
            rows = [{"spec": spec, "failed": traceback.format_exc(limit=3)}]
        for row in rows:
            print(
                json.dumps(
                    {"spec": spec, "wall_s": round(time.perf_counter() - started, 1), **row}
                ),
                flush=True,
            )


if __name__ == "__main__":
    main(sys.argv[1:])
