"""Train/val/test splits by a stable hash of the image (docs/spec/curation.md §6).

Hashing the image, not the caption or the URL, keeps every caption of one image, and every
copy of one image under different URLs, in the same split: a model is never tested on a
picture it was trained on. The crawl's copies are rarely byte-identical (re-encoded,
resized), so what is hashed is a perceptual key of the decoded pixels (`perceptual_key`);
bytes that do not decode (and keys that are no image: URLs, file names) are hashed as they
are.

This changed the splits of every image from those of versions that hashed the bytes: an
image imported or curated before keeps its split only when run again with the same version.
"""

from __future__ import annotations

import hashlib

import numpy as np
from PIL import Image
from pydantic import model_validator

from conceptual.config import Config
from conceptual.vision.decoding import decode

SPLITS = ("train", "val", "test")
# Other names of a split: the released Conceptual Captions names its dev split "validation"
# (conceptual.jobs.import_conceptual keeps it so), and asking for either finds both.
ALIASES = {"val": ("val", "validation"), "validation": ("validation", "val")}

# The key's grid: 4 x 4 comparisons of neighbouring cells, 16 bits. Measured on 798
# Flickr8k photos (500 px), see `perceptual_key`.
KEY_COLUMNS, KEY_ROWS = 4, 4
KEY_DECODE_SIDE = 256  # a JPEG decodes at the coarsest scale keeping both sides >= this
KEY_MAX_PIXELS = 50_000_000  # the image filters' default: larger images never get here


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


# What a candidate file's `split` column may say, and the split each means: a user's own
# split (Karpathy's COCO split, a held-out set chosen by hand) is kept instead of the hash.
STATED = {"train": "train", "val": "val", "validation": "val", "dev": "val", "test": "test"}


def stated_split(value: str) -> str | None:
    """The split a candidate's own `split` field names ("Validation " is "val"); None for an
    empty field (the image's hash decides); ValueError for any other word."""
    word = value.strip().lower()
    if not word:
        return None
    if word not in STATED:
        raise ValueError(f"split {value[:40]!r} is none of {', '.join(STATED)}")
    return STATED[word]


def split_names(split: str) -> list[str]:
    """The names rows of `split` may carry: ["val", "validation"] for either, else [split]."""
    return list(ALIASES.get(split, (split,)))


def perceptual_key(data: bytes) -> bytes | None:
    """A difference hash of the image in `data`, or None when it does not decode: upright
    grayscale, averaged into (KEY_COLUMNS + 1) x KEY_ROWS cells, one bit per pair of
    neighbouring cells (is the right one brighter?).

    Deliberately coarse: a copy lands in its original's split only when every bit agrees,
    and a bit flips when two neighbouring cells are nearly equal, so more bits mean more
    flips. Of 798 Flickr8k photos, re-encoded at JPEG quality 60, 736 keep their key (and
    782 their split); resized to half at quality 90, 683 (776); both, 670 (774); rescaled
    to 90%, 718 (780); 141 of 150 keep it from a 4x larger copy (decoded by the JPEG draft).
    A copy whose key changed still lands in its original's split at the fractions' odds
    (0.815 at 0.9/0.05/0.05), as every copy did when the bytes were hashed; no split is
    guaranteed without a global grouping pass, which this avoids. Finer grids tell more photos apart and keep fewer keys (8 x 8: about
    half of the re-encodes, a quarter of the half-size copies); the 16 bits still separate
    unrelated photos well enough for the fractions to hold."""
    image, _ = decode(data, KEY_MAX_PIXELS, reduce_to=KEY_DECODE_SIDE)
    if image is None:
        return None
    cells = image.convert("L").resize((KEY_COLUMNS + 1, KEY_ROWS), Image.Resampling.BOX)
    gray = np.asarray(cells, dtype=np.int16)
    return np.packbits(gray[:, 1:] > gray[:, :-1]).tobytes()


def assign_split(key: bytes, config: SplitConfig) -> str:
    """The split of an image, from a hash of its perceptual key (of `key` itself when `key`
    is not a decodable image): the same in every run, shard and import."""
    return split_of_key(perceptual_key(key) or key, config)


def split_of_key(key: bytes, config: SplitConfig) -> str:
    """The split of a key that is no image (a URL, a file name), hashed as it is: what
    `assign_split` gives it, without trying to decode it first (which costs more than the
    hash, on every row of a text-only run)."""
    position = int.from_bytes(hashlib.sha1(key).digest()[:8], "big") / 2**64  # in [0, 1)
    boundary = 0.0
    for name in SPLITS:
        boundary += getattr(config, name)
        if position < boundary:
            return name
    return SPLITS[-1]  # rounding: fractions summing to 0.9999999 still cover [0, 1)


def drawn_subset(ids: list[str], fraction: float, seed: int) -> list[str]:
    """A seeded draw of round(fraction x len(ids)) of `ids` (at least one), in their order:
    the training images of a run on a part of its split (the paper's Figure 3). The draw
    sorts first, so the same ids, fraction and seed give the same subset in any order."""
    if not 0 < fraction <= 1:
        raise ValueError(f"a fraction of the images is in (0, 1], not {fraction}")
    if fraction == 1:
        return list(ids)
    count = max(1, round(fraction * len(ids)))
    chosen = np.random.default_rng(seed).permutation(sorted(ids))[:count]
    keep = set(chosen.tolist())
    return [i for i in ids if i in keep]
