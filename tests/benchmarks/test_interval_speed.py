"""What the 95% intervals cost (conceptual.intervals, conceptual.resampled_metrics): the COCO
caption metrics of real Flickr8k-mini captions scored as a test set of N images, plainly
and with 1,000 bootstrap resamples recomputed per resample, timed side by side in one run.
Each image's "generated" caption is a reference of another image drawn at random (a weak
captioner); its other four captions are the references.

    CONCEPTUAL_REAL_DATA=../shared/data .venv/bin/pytest -q -s -m benchmark \
        tests/benchmarks/test_interval_speed.py
"""

from __future__ import annotations

import csv
import time
from collections import defaultdict

import numpy as np
import pytest

from conceptual.intervals import BootstrapConfig, resample_counts
from conceptual.metrics import caption_scores, java_metric_unavailable

SIZES = (80, 798)  # a test split of Flickr8k-mini, and the whole of it


def captions(real_data) -> dict[str, list[str]]:
    by_image = defaultdict(list)
    with open(real_data / "flickr8k_mini" / "captions.csv", newline="") as f:
        for row in csv.DictReader(f):
            by_image[row["image"]].append(row["caption"])
    return dict(sorted(by_image.items()))


def timed(*args) -> float:
    """Seconds caption_scores takes over `args`."""
    started = time.perf_counter()
    caption_scores(*args)
    return time.perf_counter() - started


def test_interval_cost(real_data, record):
    by_image = captions(real_data)
    rng = np.random.default_rng(0)
    metrics = ["BLEU-4", "ROUGE-L", "CIDEr"]
    if java_metric_unavailable("METEOR") is None:
        metrics.append("METEOR")
    results = {}
    for size in SIZES:
        keys = list(by_image)[:size]
        hypotheses = {k: by_image[keys[rng.integers(size)]][0] for k in keys}
        references = {k: by_image[k][1:] for k in keys}
        counts = resample_counts(size, BootstrapConfig())
        for metric in metrics:
            plain = timed(hypotheses, references, [metric])
            boot = timed(hypotheses, references, [metric], counts)
            results[f"{size} images {metric}"] = {
                "plain_s": round(plain, 3),
                "with_1000_resamples_s": round(boot, 3),
                "ratio": round(boot / plain, 2),
            }
    record("interval_speed", results)
    for figures in results.values():
        assert figures["with_1000_resamples_s"] < 60
    with pytest.raises(ValueError, match="no test images"):
        resample_counts(0, BootstrapConfig())
