"""The training benchmark (conceptual.jobs.benchmark_training) against the GPU-efficiency
targets of BENCHMARKS.md, for the spec's Transformer over 8x8 features and the RNNs:

- the input path's share of the step time spent waiting for the next batch: under 10% on
  a CPU, under 5% on a GPU;
- on a GPU: the Transformer at >= 40% MFU in bf16, each RNN's input path within 1.3x of
  its on-device figure.

Synthetic features (1,280 channels, 15-word captions). On a CPU the spec's sizes run at a
few samples/s, so the CPU run uses width 256 and 2+2 layers unless CONCEPTUAL_BENCH_FULL=1.

    .venv/bin/pytest -q -s -m benchmark tests/benchmarks/test_training_efficiency.py
"""

from __future__ import annotations

import os

import pytest
import torch

from conceptual.config import load

GPU = torch.cuda.is_available()
FULL = GPU or os.environ.get("CONCEPTUAL_BENCH_FULL") == "1"
SIZES = [] if FULL else ["model.d_model=256", "model.layers=2", "model.heads=4", "model.ffn=1024"]
BATCH = 256 if GPU else 32
STEPS = int(os.environ.get("CONCEPTUAL_BENCH_STEPS", 30 if GPU else 10))
VARIANTS = ["transformer-8x8", "rnn-1x1", "rnn-8x8"]


@pytest.mark.parametrize("name", VARIANTS)
def test_training_benchmark_meets_its_targets(ray_local, platform_home, name, record):
    from conceptual.pipelines.families.captioner.train_captioner import CaptionerTrainConfig
    from conceptual.pipelines.training.benchmark_training import benchmark

    architecture, _, feature_map = name.partition("-")
    overrides = [f"model.architecture={architecture}", f"model.feature_map={feature_map}"]
    config = load(CaptionerTrainConfig, None, [*overrides, *SIZES, f"batch_size={BATCH}"])
    on_device, input_path = benchmark(config, steps=STEPS)
    record(
        f"training_efficiency_{name}_{'cuda' if GPU else 'cpu'}", {"rows": [on_device, input_path]}
    )

    assert input_path["input_wait_share"] < (0.05 if GPU else 0.10)
    if GPU and architecture == "transformer":
        assert input_path["mfu"] >= 0.40
    if GPU and architecture == "rnn":
        assert on_device["samples_per_s"] <= 1.3 * input_path["samples_per_s"]
