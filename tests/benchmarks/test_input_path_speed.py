"""The training input path alone (conceptual.jobs.benchmark_training --input-only): today's
default (data.shuffle=window, the first epoch kept) and the window shuffle alone
(data.keep=never, read again every epoch) against the path before issue 50
(data.shuffle=batch_buffer: Ray Data's local shuffle buffer, read again every epoch), side
by side in one run, for 1x1 and 8x8 features at batches of 256 and 1,024. Goal: the default
at least 3x the samples/s of the batch buffer with 8x8 features.

Made-up features (1,280 channels, 15-word captions) in blocks of 32 rows, 4,096 rows an
epoch (CONCEPTUAL_BENCH_ROWS), a first epoch then 3 timed ones.

    .venv/bin/pytest -q -s -m benchmark tests/benchmarks/test_input_path_speed.py
"""

from __future__ import annotations

import os

import pytest

from conceptual.config import load

ROWS = int(os.environ.get("CONCEPTUAL_BENCH_ROWS", 4096))
EPOCHS = 3


@pytest.mark.parametrize("feature_map", ["1x1", "8x8"])
@pytest.mark.parametrize("batch_size", [256, 1024])
def test_input_path_against_the_batch_buffer(
    ray_local, platform_home, feature_map, batch_size, record
):
    from conceptual.pipelines.families.captioner.train_captioner import CaptionerTrainConfig
    from conceptual.pipelines.training.benchmark_training import input_only

    paths = {
        "batch_buffer": ["data.shuffle=batch_buffer"],
        "window, read every epoch": ["data.keep=never"],
        "default": [],
    }
    rows = {}
    for name, keys in paths.items():
        overrides = [f"model.feature_map={feature_map}", f"batch_size={batch_size}", *keys]
        row = input_only(
            load(CaptionerTrainConfig, None, overrides), batches=ROWS // batch_size, epochs=EPOCHS
        )
        rows[name] = {"path": name, **row}
    baseline = rows["batch_buffer"]["samples_per_s"]
    ratios = {name: round(row["samples_per_s"] / baseline, 2) for name, row in rows.items()}
    record(
        f"input_path_{feature_map}_{batch_size}", {"rows": list(rows.values()), "ratios": ratios}
    )
    ratio = ratios["default"]

    if feature_map == "8x8":
        assert ratio >= 3
