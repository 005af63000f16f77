"""The captioner's image augmentation (features `crops=N`): by default the paper's (section
5.2: random crops of 50-100% of the photo, colours distorted), `augmentation=crop_only` the
platform's earlier crops (60-100%, colours kept); reproducible by seed."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import skimage.data
from PIL import Image

from conceptual.pipelines.features.features import FeaturesConfig
from conceptual.vision.cnn import (
    AUGMENTATIONS,
    FeatureExtractor,
    centre_crop,
    image_views,
    random_crop,
    to_pixels,
)

COFFEE = Image.fromarray(skimage.data.coffee())  # 600 x 400


def area_share(box, size) -> float:
    left, top, right, bottom = box
    return (right - left) * (bottom - top) / (size[0] * size[1])


@pytest.mark.parametrize("name, low, high", [("paper", 0.5, 1.0), ("crop_only", 0.6, 1.0)])
def test_crops_cover_their_share_of_the_photo(name, low, high):
    size = (640, 480)
    shares = []
    for index in range(50):
        centre, *crops = image_views(size, index, 4, seed=0, augmentation=AUGMENTATIONS[name])
        assert centre == centre_crop(*size)  # the first view stays the plain centre square
        for crop in crops:
            left, top, right, bottom = crop.box
            assert 0 <= left < right <= size[0] and 0 <= top < bottom <= size[1]
            shares.append(area_share(crop.box, size))
            assert (crop.colour is None) == (name == "crop_only")
    assert low - 1e-9 <= min(shares) and max(shares) <= high + 1e-9
    assert min(shares) < low + 0.05 and max(shares) > high - 0.05  # the range is used


def test_colour_distortion_changes_pixels_reproducibly_by_seed():
    def pixels(seed: int, colour: bool = True) -> np.ndarray:
        views = image_views(COFFEE.size, 0, 3, seed, AUGMENTATIONS["paper"])
        if not colour:
            views = [dataclasses.replace(view, colour=None) for view in views]
        return to_pixels([COFFEE] * len(views), 64, views)

    first = pixels(seed=0)
    assert np.array_equal(first, pixels(seed=0))
    assert not np.array_equal(first, pixels(seed=1))
    uncoloured = pixels(seed=0, colour=False)
    assert np.array_equal(first[0], uncoloured[0])  # the centre crop is never distorted
    for view in range(1, 4):  # the same crops, their colours distorted
        assert np.abs(first[view].astype(int) - uncoloured[view]).mean() > 1


def test_crop_only_draws_the_crops_the_same_seed_always_gave():
    rng = np.random.default_rng((7, 3))  # what features drew for image 3 under seed 7
    before = [centre_crop(*COFFEE.size), *(random_crop(*COFFEE.size, rng) for _ in range(4))]
    assert image_views(COFFEE.size, 3, 4, 7, AUGMENTATIONS["crop_only"]) == before


def test_features_augment_the_paper_way_by_default():
    assert FeaturesConfig().augmentation == "paper"
    extractor = FeatureExtractor(image_size=64)
    by_name = {
        name: extractor.extract([COFFEE], crops=2, seed=0, augmentation=name)[0]
        for name in AUGMENTATIONS
    }
    (paper_centre, _), *paper_crops = by_name["paper"]
    (plain_centre, _), *plain_crops = by_name["crop_only"]
    assert len(paper_crops) == len(plain_crops) == 2
    assert np.allclose(paper_centre, plain_centre)  # the centre view is the same either way
    assert not np.allclose(paper_crops[0][0], plain_crops[0][0])
