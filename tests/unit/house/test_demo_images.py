"""The demo's images: a deterministic build, each variant broken the way it is meant to be
(by Pillow and by the image filters), captions that fit their photo and no other by the
real classifier and label matcher, and candidates that carry every image kind."""

from __future__ import annotations

import io
from collections import Counter

import pytest
from PIL import Image

from conceptual.config import load
from conceptual.vision.cnn import ImageNetClassifier
from conceptual.vision.fetch import FetchConfig
from conceptual.vision.images import ImageFilters
from conceptual.vision.labels import LabelMatcher
from conceptual_demo import server
from conceptual_demo.corpus import generate_candidates
from conceptual_demo.images import (
    EXPECTED_REASONS,
    FAILURES,
    FITTING_SHARE,
    IMAGE_SHARES,
    MIN_SIDE,
    PHOTOS,
    PHOTOS_BY_NAME,
    VIEWS,
    WELL_FORMED_KINDS,
    attach_images,
    build_images,
    demo_candidates,
    failure_urls,
    fetch_overrides,
    fitting_candidates,
)

BASE_URL = "http://127.0.0.1:8000"


@pytest.fixture(scope="module")
def catalogue(tmp_path_factory):
    return build_images(tmp_path_factory.mktemp("images"))


@pytest.fixture(scope="module")
def contents(catalogue) -> dict[str, bytes]:
    return {file.name: catalogue.path(file).read_bytes() for file in catalogue.files}


def files_of(catalogue, kind: str) -> list[tuple[str, bytes]]:
    return [(file.name, catalogue.path(file).read_bytes()) for file in catalogue.of_kind(kind)]


def test_the_build_is_deterministic(tmp_path, contents):
    again = build_images(tmp_path)
    assert {file.name: again.path(file).read_bytes() for file in again.files} == contents


def test_every_photo_has_every_variant(catalogue):
    kinds = Counter(file.kind for file in catalogue.files if file.photo)
    assert kinds == Counter({kind: len(PHOTOS) for kind in kinds})
    assert {file.kind for file in catalogue.files} | set(FAILURES) == set(EXPECTED_REASONS)


def test_good_photos_are_jpegs_that_pass_every_image_rule(catalogue):
    for name, data in files_of(catalogue, "good"):
        with Image.open(io.BytesIO(data)) as image:
            assert image.format == "JPEG", name
            assert min(image.size) > MIN_SIDE, name
            assert max(image.size) / min(image.size) <= 2, name
            image.load()


def pillow_format(data: bytes) -> str:
    with Image.open(io.BytesIO(data)) as image:
        return image.format


def pillow_size(data: bytes) -> tuple[int, int]:
    with Image.open(io.BytesIO(data)) as image:
        return image.size


def test_png_variants_are_pngs(catalogue):
    assert {pillow_format(data) for _, data in files_of(catalogue, "png")} == {"PNG"}


def test_small_variants_have_a_short_long_side(catalogue):
    assert {max(pillow_size(data)) for _, data in files_of(catalogue, "small")} == {320}


def test_strips_are_large_enough_but_three_times_longer_than_high(catalogue):
    assert {pillow_size(data) for _, data in files_of(catalogue, "strip")} == {(1440, 480)}


def test_truncated_variants_stop_in_the_scan_data(catalogue, contents):
    for name, data in files_of(catalogue, "truncated"):
        assert contents[name.replace("-truncated", "")].startswith(data)
        with Image.open(io.BytesIO(data)) as image, pytest.raises(OSError, match="truncated"):
            image.load()


def test_corrupt_variants_keep_their_header_but_do_not_decode(catalogue, contents):
    for name, data in files_of(catalogue, "corrupt"):
        good = contents[name.replace("-corrupt", "")]
        assert len(data) == len(good) and pillow_size(data) == pillow_size(good)
        with Image.open(io.BytesIO(data)) as image, pytest.raises(OSError, match="broken"):
            image.load()


def test_bombs_are_small_files_claiming_60000_by_60000_pixels(catalogue):
    for _, data in files_of(catalogue, "bomb"):
        assert len(data) < 100_000
        with pytest.raises(Image.DecompressionBombError, match="3600000000 pixels"):
            Image.open(io.BytesIO(data))


def test_only_the_large_variants_exceed_the_demo_size_limit(catalogue, contents):
    large = {name for name, _ in files_of(catalogue, "large")}
    assert {name for name, data in contents.items() if len(data) > catalogue.max_bytes} == large
    assert {pillow_format(contents[name]) for name in large} == {"JPEG"}


def test_files_that_are_no_photo(catalogue):
    [(_, page)] = files_of(catalogue, "soft_404")
    assert page.startswith(b"<!DOCTYPE html>")
    with pytest.raises(Image.UnidentifiedImageError):
        Image.open(io.BytesIO(page))
    [(_, empty)] = files_of(catalogue, "empty")
    assert empty == b""


def test_the_image_filters_give_each_file_its_reason(catalogue, contents):
    """Every file the fetch lets through: "empty" and "too_large" never reach the filters, and
    an HTML page is the filters' not_an_image as much as the fetch's."""
    filters = ImageFilters()
    for file in catalogue.files:
        if file.kind not in ("empty", "large"):
            _, _, rejection = filters.check(contents[file.name])
            assert (rejection and rejection.reason) == file.reason, file.name
    _, _, rejection = filters.check(contents[catalogue.of_kind("large")[0].name])
    assert rejection is None


@pytest.fixture(scope="module")
def labels_by_photo(catalogue) -> dict[str, list[dict]]:
    """Top labels of each photo, the same for each of its views (each view must be labelled
    so that its photo's captions match)."""
    filters = ImageFilters()
    views = catalogue.views()
    images = [filters.check(catalogue.path(file).read_bytes())[1] for file in views]
    labels_of = dict(zip(views, ImageNetClassifier().classify(images, top_k=5)))
    by_photo = {}
    for file, labels in labels_of.items():
        by_photo.setdefault(file.photo, []).append(labels)
    return by_photo


@pytest.fixture(scope="module")
def matcher() -> LabelMatcher:
    return LabelMatcher()


@pytest.mark.parametrize("photo", PHOTOS_BY_NAME)
def test_every_caption_of_a_photo_fits_it(photo, labels_by_photo, matcher):
    rejected = [
        caption
        for caption in PHOTOS_BY_NAME[photo].captions()
        for labels in labels_by_photo[photo]
        if matcher.match(caption, labels)[1]
    ]
    assert rejected == []


@pytest.mark.parametrize("photo", PHOTOS_BY_NAME)
def test_the_captions_of_other_photos_do_not_fit(photo, labels_by_photo, matcher):
    kept = [
        caption
        for other in PHOTOS
        if other.name != photo
        for caption in other.captions()
        for labels in labels_by_photo[photo]
        if matcher.match(caption, labels)[1] is None
    ]
    assert kept == []


def test_captions_are_varied_and_stock_photo_shaped():
    for photo in PHOTOS:
        captions = photo.captions()
        assert len(set(captions)) == len(captions) >= 100
        assert all(caption[0].isupper() and "  " not in caption for caption in captions)


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return generate_candidates(2000, seed=3)


def test_attached_rows_keep_their_text_and_get_a_demo_image(rows, catalogue):
    attached = attach_images(rows, catalogue, BASE_URL, seed=3)
    assert attached == attach_images(rows, catalogue, BASE_URL, seed=3)
    failures = set(failure_urls(BASE_URL).values())
    for row, new in zip(rows, attached, strict=True):
        assert {**new, "image_url": row["image_url"]} == {**row, "image_kind": new["image_kind"]}
        assert new["image_url"].startswith(f"{BASE_URL}/") or new["image_url"] in failures


def test_well_formed_rows_get_every_image_kind_in_its_share(rows, catalogue):
    attached = attach_images(rows, catalogue, BASE_URL, seed=3)
    well_formed = [row for row in attached if row["kind"] in WELL_FORMED_KINDS]
    counts = Counter(row["image_kind"] for row in well_formed)
    assert set(counts) == set(IMAGE_SHARES)
    total = sum(IMAGE_SHARES.values())
    for kind, share in IMAGE_SHARES.items():
        assert counts[kind] == pytest.approx(len(well_formed) * share / total, abs=1)
    junk = [row for row in attached if row["kind"] not in WELL_FORMED_KINDS]
    assert {row["image_kind"] for row in junk} == {"good"}


def test_fitting_candidates_pair_each_photo_with_its_own_captions(catalogue):
    fitting = fitting_candidates(catalogue, BASE_URL, 300, seed=1)
    assert len({(row["image_url"], row["alt_text"]) for row in fitting}) == 300
    per_file = Counter(row["image_url"] for row in fitting)
    files = len(PHOTOS) * len(VIEWS)
    assert len(per_file) == files and set(per_file.values()) == {300 // files}
    photo_of = {f"{BASE_URL}/{file.name}": file.photo for file in catalogue.views()}
    for row in fitting:
        assert row["alt_text"] in PHOTOS_BY_NAME[photo_of[row["image_url"]]].captions()
    every_pair = fitting_candidates(catalogue, BASE_URL, 100_000)
    assert len({(row["image_url"], row["alt_text"]) for row in every_pair}) == len(every_pair)
    assert len(every_pair) == 125 * files


@pytest.mark.parametrize("n", [0, 1, 1000, 6000])
def test_demo_candidates_mix_fitting_pairs_into_the_web_rows(catalogue, n):
    candidates = demo_candidates(catalogue, BASE_URL, n, seed=2)
    assert candidates == demo_candidates(catalogue, BASE_URL, n, seed=2)
    fitting = Counter(row["kind"] for row in candidates)["fitting"]
    assert len(candidates) == n
    assert fitting == min(round(n * FITTING_SHARE), 125 * len(PHOTOS) * len(VIEWS))


def test_fetch_overrides_make_a_config_that_fits_the_server(catalogue):
    overrides = [item.removeprefix("fetch.") for item in fetch_overrides(catalogue)]
    config = load(FetchConfig, overrides=overrides)
    assert config.allow_hosts == ["127.0.0.1"]
    assert config.timeout_s < server.SLOW_RESPONSE_S
    assert config.max_bytes == catalogue.max_bytes
