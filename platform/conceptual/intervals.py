"""Bootstrap intervals over test images, and the paired test that says whether one model
beats another or the difference is inside the noise (issue 35).

A resample draws the test set's n images n times with replacement; a metric's value on it
is computed as the metric would be on that set of images, every drawn image with all its
references (or captions, or clips). `resample_counts` gives how often each image was drawn
in each resample, so a metric that is a sum over images becomes one matrix product; the
metrics' own modules say how they use the counts (`resampled_metrics` for the caption
metrics, evaluate_retriever for recall).

    counts = resample_counts(len(images), BootstrapConfig())      # (samples, images)
    resampled = {"CIDEr": cider_over(counts), ...}                  # (samples,) each
    with_intervals(scores, resampled)   -> {"CIDEr": 0.35, "CIDEr.ci95_low": 0.29, ...}
    paired_p_value(resampled_a, resampled_b)  -> 0.41: inside the noise

The same number of images and the same seed give the same resamples, which is what makes
two models scored on one test set a paired comparison.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from pydantic import Field

from conceptual.config import Config

LEVEL = 0.95
LOW, HIGH = ".ci95_low", ".ci95_high"  # the interval's keys: the metric's key + these
NOISE_P = 0.05  # a difference with a larger p-value is inside the noise
WITHIN_NOISE = "~"  # how tables mark such a difference


class BootstrapConfig(Config):
    samples: int = Field(default=1000, ge=10)  # resamples of the test images
    seed: int = 0


def resample_counts(images: int, config: BootstrapConfig) -> np.ndarray:
    """(samples, images) int: how often each image is drawn in each resample of `images`
    draws with replacement. Depends only on `images` and the config."""
    if images < 1:
        raise ValueError("no test images to resample")
    rng = np.random.default_rng(config.seed)
    return rng.multinomial(images, np.full(images, 1 / images), size=config.samples)


def ratio_over(counts: np.ndarray, numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """Per resample, the sum of a per-image numerator over the drawn images divided by the
    sum of a per-image denominator: a mean over items grouped by image (R@k of the captions
    of the images, with numerator their hits and denominator how many there are)."""
    return (counts @ numerator) / (counts @ denominator)


def mean_over(counts: np.ndarray, per_image: np.ndarray) -> np.ndarray:
    """Per resample, the mean of a per-image score over the drawn images."""
    return ratio_over(counts, np.asarray(per_image, dtype=float), np.ones(counts.shape[1]))


def interval(resampled: np.ndarray) -> tuple[float, float]:
    """The percentile bootstrap interval at LEVEL."""
    tail = (1 - LEVEL) / 2 * 100
    low, high = np.percentile(resampled, [tail, 100 - tail])
    return float(low), float(high)


def interval_keys(name: str, resampled: np.ndarray) -> dict[str, float]:
    low, high = interval(resampled)
    return {name + LOW: low, name + HIGH: high}


def with_intervals(
    values: Mapping[str, float], resampled: Mapping[str, np.ndarray]
) -> dict[str, float]:
    """`values`, each followed by its interval where `resampled` has the metric."""
    out: dict[str, float] = {}
    for name, value in values.items():
        out[name] = value
        if name in resampled:
            out |= interval_keys(name, resampled[name])
    return out


def paired_p_value(first: np.ndarray, second: np.ndarray) -> float:
    """Two-sided paired bootstrap p-value of the difference between two models' metric over
    the same resamples: twice the share of resamples on the less frequent side of zero
    (ties count on both sides), with the Monte Carlo +1 so it is never 0. Identical models
    get 1; a model better on every resample gets 2 / (samples + 1)."""
    difference = np.asarray(first) - np.asarray(second)
    tail = min((difference <= 0).sum(), (difference >= 0).sum())
    return float(min(1.0, 2 * (tail + 1) / (len(difference) + 1)))


def _best(values: Sequence[float | None], resampled: Sequence[np.ndarray | None]) -> int | None:
    scored = [i for i, v in enumerate(values) if v is not None and resampled[i] is not None]
    return max(scored, key=lambda i: values[i]) if scored else None  # type: ignore[arg-type, return-value]


def against_best(
    values: Sequence[float | None], resampled: Sequence[np.ndarray | None]
) -> list[float | None]:
    """Each row's paired p-value against the row with the highest value (None for that row
    and for rows without a value). Higher is better for every metric compared here."""
    best = _best(values, resampled)
    return [
        None
        if best is None or i == best or values[i] is None or resampled[i] is None
        else paired_p_value(resampled[best], resampled[i])  # type: ignore[arg-type]
        for i in range(len(values))
    ]


def within_noise(p_value: float | None) -> bool:
    return p_value is not None and p_value >= NOISE_P


def p_cell(p_value: float | None) -> str:
    """A table cell for a p-value against the best: empty for the best row, a difference
    inside the noise marked WITHIN_NOISE."""
    if p_value is None:
        return ""
    mark = f" {WITHIN_NOISE}" if within_noise(p_value) else ""
    return f"{p_value:.3f}{mark}"


def interval_cell(scores: Mapping[str, float | None], name: str, digits: int = 3) -> str:
    """A table cell for a metric of `scores`: `0.347 [0.291, 0.405]` (the value and its
    interval), the bare value when it has no interval, `n/a` when it has no value."""
    value = scores.get(name)
    if value is None:
        return "n/a"
    if scores.get(name + LOW) is None:
        return f"{value:.{digits}f}"
    low, high = scores[name + LOW], scores[name + HIGH]
    return f"{value:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def error_bars(scores: Mapping[str, float | None], names: Sequence[str]) -> np.ndarray:
    """matplotlib's `yerr` for the metrics `names` of `scores`: (2, len(names)), how far each
    interval reaches below and above its value (0 without a value or an interval, or where
    a percentile interval of a few images does not reach the value)."""
    bars = np.zeros((2, len(names)))
    for i, name in enumerate(names):
        value, low, high = scores.get(name), scores.get(name + LOW), scores.get(name + HIGH)
        if value is not None and low is not None and high is not None:
            bars[:, i] = max(0.0, value - low), max(0.0, high - value)
    return bars
