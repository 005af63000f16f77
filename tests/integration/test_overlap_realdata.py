"""The image&text filter on real photos: COCO's own captions should mostly pass, captions of
other photos mostly not. Classifies the 159 coco_mini photos once (about 10 s on CPU)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from PIL import Image

from conceptual.vision.cnn import CnnConfig, ImageNetClassifier
from conceptual.vision.labels import LabelMatcher

pytestmark = [pytest.mark.integration, pytest.mark.realdata]

# Measured with the default OverlapConfig: true captions kept 0.59, shuffled 0.055 (some
# coco_mini photos show the same kind of scene: pizza, tables, baseball).
MIN_TRUE_KEPT = 0.55
MAX_SHUFFLED_KEPT = 0.12


def coco_photos(root: Path) -> list[tuple[Path, list[str]]]:
    """(photo path, its human captions) for every coco_mini photo."""
    photos = []
    for split in ("train2017", "val2017"):
        index = json.loads((root / f"captions_{split}.json").read_text())
        captions: dict[int, list[str]] = {}
        for annotation in index["annotations"]:
            captions.setdefault(annotation["image_id"], []).append(annotation["caption"])
        photos += [
            (root / split / image["file_name"], captions[image["id"]]) for image in index["images"]
        ]
    return photos


def derangement(n: int, seed: int = 0) -> list[int]:
    """A shuffle of range(n) that moves every element."""
    rng = random.Random(seed)
    while True:
        order = rng.sample(range(n), n)
        if all(i != j for i, j in enumerate(order)):
            return order


def kept_rate(matcher: LabelMatcher, pairs) -> float:
    results = [matcher.match(caption, labels)[1] is None for caption, labels in pairs]
    return sum(results) / len(results)


def test_true_captions_overlap_their_labels_far_more_than_shuffled_ones(real_data):
    photos = coco_photos(real_data / "coco_mini")
    assert len(photos) == 159
    images = [Image.open(path) for path, _ in photos]
    labels = ImageNetClassifier(CnnConfig(device="cpu")).classify(images, top_k=5)
    matcher = LabelMatcher()
    captions = [photo_captions for _, photo_captions in photos]

    true = kept_rate(matcher, [(c, labels[i]) for i, cs in enumerate(captions) for c in cs])
    others = derangement(len(photos))
    shuffled = kept_rate(
        matcher, [(c, labels[i]) for i, j in enumerate(others) for c in captions[j]]
    )
    print(
        f"\ncoco_mini overlap: true captions kept {true:.3f}, shuffled captions kept {shuffled:.3f}"
    )
    assert true >= MIN_TRUE_KEPT
    assert shuffled <= MAX_SHUFFLED_KEPT
