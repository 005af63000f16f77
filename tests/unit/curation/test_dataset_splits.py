import io

import numpy as np
import pytest
from PIL import Image
from skimage import data

from conceptual.splits import SplitConfig, assign_split, perceptual_key, split_of_key


def test_same_image_same_split():
    config = SplitConfig()
    assert {assign_split(b"jpeg bytes", config) for _ in range(5)} == {
        assign_split(b"jpeg bytes", config)
    }


def test_fractions_are_respected():
    config = SplitConfig(train=0.8, val=0.1, test=0.1)
    counts = {"train": 0, "val": 0, "test": 0}
    for i in range(20000):
        counts[assign_split(i.to_bytes(4, "big"), config)] += 1
    assert counts["train"] / 20000 == pytest.approx(0.8, abs=0.015)
    assert counts["val"] / 20000 == pytest.approx(0.1, abs=0.01)
    assert counts["test"] / 20000 == pytest.approx(0.1, abs=0.01)


def test_a_zero_fraction_is_never_chosen():
    config = SplitConfig(train=1.0, val=0.0, test=0.0)
    assert {assign_split(i.to_bytes(4, "big"), config) for i in range(1000)} == {"train"}


@pytest.mark.parametrize("fractions", [{"train": 0.9, "val": 0.2}, {"train": -0.1, "val": 1.1}])
def test_fractions_must_sum_to_one(fractions):
    with pytest.raises(ValueError):
        SplitConfig(**fractions)


# --- copies of one photo -------------------------------------------------------------------


def _jpeg(image: Image.Image, quality: int) -> bytes:
    out = io.BytesIO()
    image.save(out, "JPEG", quality=quality)
    return out.getvalue()


@pytest.mark.parametrize("name", ["coffee", "chelsea", "rocket"])
def test_a_reencoded_or_resized_copy_keeps_its_split(name):
    photo = Image.fromarray(getattr(data, name)()).convert("RGB")
    original = _jpeg(photo, 95)
    half = photo.resize((photo.width // 2, photo.height // 2), Image.Resampling.LANCZOS)
    copies = [_jpeg(photo, 60), _jpeg(half, 85), _jpeg(half, 60)]
    assert {perceptual_key(copy) for copy in copies} == {perceptual_key(original)}
    assert {assign_split(copy, SplitConfig()) for copy in copies} == {
        assign_split(original, SplitConfig())
    }


def test_bytes_that_do_not_decode_are_hashed_as_they_are():
    assert perceptual_key(b"\xff\xd8 not really a JPEG") is None
    assert perceptual_key(b"http://img.test/a.jpg") is None


def test_a_key_that_is_no_image_gets_the_split_assign_split_gives_it():
    # Text-only runs split by URL, and the fluency job by file name, without a decode.
    config = SplitConfig(train=0.5, val=0.25, test=0.25)
    keys = [f"https://img.test/{i}.jpg".encode() for i in range(300)] + [b"1000268201_693b.jpg"]
    splits = [split_of_key(key, config) for key in keys]
    assert splits == [assign_split(key, config) for key in keys]
    assert set(splits) == {"train", "val", "test"}


def test_different_images_follow_the_fractions():
    config = SplitConfig(train=0.8, val=0.1, test=0.1)
    rng = np.random.default_rng(0)
    counts = {"train": 0, "val": 0, "test": 0}
    for _ in range(1000):
        pixels = rng.integers(0, 256, (24, 32, 3), dtype=np.uint8)
        counts[assign_split(_jpeg(Image.fromarray(pixels), 90), config)] += 1
    assert counts["train"] / 1000 == pytest.approx(0.8, abs=0.04)
    assert counts["val"] / 1000 == pytest.approx(0.1, abs=0.03)
    assert counts["test"] / 1000 == pytest.approx(0.1, abs=0.03)
