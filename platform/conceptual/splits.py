"""Train/val/test splits by a stable hash of the image (docs/spec/curation.md §6).

Hashing the image's bytes, not the caption or the URL, keeps every caption of one image,
and every copy of one image under different URLs, in the same split: a model is never
tested on a picture it was trained on.
"""

from __future__ import annotations

import hashlib

from pydantic import model_validator

from conceptual.config import Config

SPLITS = ("train", "val", "test")


class SplitConfig(Config):
    train: float = 0.9
    val: float = 0.05
    test: float = 0.05

    @model_validator(mode="after")
    def _fractions(self) -> SplitConfig:
        fractions = [getattr(self, name) for name in SPLITS]
        if any(f < 0 for f in fractions) or abs(sum(fractions) - 1) > 1e-6:
            raise ValueError(f"split fractions must be >= 0 and sum to 1, got {fractions}")
        return self


def assign_split(key: bytes, config: SplitConfig) -> str:
    """The split of an image, from a hash of `key` (its bytes): the same in every run."""
    position = int.from_bytes(hashlib.sha1(key).digest()[:8], "big") / 2**64  # in [0, 1)
    boundary = 0.0
    for name in SPLITS:
        boundary += getattr(config, name)
        if position < boundary:
            return name
    return SPLITS[-1]  # rounding: fractions summing to 0.9999999 still cover [0, 1)
