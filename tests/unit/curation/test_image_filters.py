"""Image filters (docs/spec/curation.md §1): good JPEGs are kept and decoded upright in RGB, every
kind of bad image gets its own stable reason, hostile bytes never raise, and the unsafe
detector is a plug-in consulted once per batch."""

from __future__ import annotations

import io
import random
import sys
import types
import warnings

import numpy as np
import pytest
import skimage.data
import torch
from PIL import Image, ImageStat
from pydantic import ValidationError

from conceptual.assets import AssetError
from conceptual.models.inference import ImageError, max_decoded_pixels, read_image
from conceptual.vision.decoding import (
    MAX_SCANS,
    MIN_JPEG_BYTES_PER_PIXEL,
    decode,
    jpeg_hazard,
    probe,
)
from conceptual.vision.images import IMAGE_REASONS, ImageFilterConfig, ImageFilters
from conceptual.vision.jpeg import JpegStructureError, count_scans
from conceptual.vision.unsafe import UnsafeConfig, load_detector

SIZE = 256  # a captioner's input side (the features job's default): what serving decodes for
REASONS = set(IMAGE_REASONS)


def picture(width: int = 640, height: int = 480, mode: str = "RGB") -> Image.Image:
    """A smooth gradient: compresses like a photo, unlike noise."""
    ramp = np.add.outer(np.arange(height), np.arange(width)) * 255 // (width + height)
    return Image.fromarray(ramp.astype(np.uint8)).convert(mode)


def encode(image: Image.Image, fmt: str = "JPEG", **options) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **options)
    return buffer.getvalue()


def jpeg(width: int = 640, height: int = 480, **options) -> bytes:
    return encode(picture(width, height), "JPEG", **options)


def segment(data: bytes, marker: int) -> int:
    """Offset of the first JPEG segment with this marker (0xC0: frame header, 0xC4: Huffman
    table, 0xDA: scan)."""
    offset = 2  # after SOI
    while data[offset + 1] != marker:
        offset += 2 + int.from_bytes(data[offset + 2 : offset + 4], "big")
    return offset


def with_header_size(data: bytes, width: int, height: int) -> bytes:
    """The JPEG with its frame header claiming another size: a decompression bomb's shape."""
    sof = segment(data, 0xC0)  # FF C0, length (2), precision (1), height (2), width (2)
    patched = bytearray(data)
    patched[sof + 5 : sof + 9] = height.to_bytes(2, "big") + width.to_bytes(2, "big")
    return bytes(patched)


def truncated(data: bytes) -> bytes:
    """The first 60% of the file, as a download cut short leaves it."""
    return data[: len(data) * 6 // 10]


def with_garbage_scan(data: bytes) -> bytes:
    """The JPEG with its entropy-coded scan data overwritten by random bytes (EOI kept)."""
    sos = segment(data, 0xDA)
    start = sos + 2 + int.from_bytes(data[sos + 2 : sos + 4], "big")
    noise = random.Random(1).randbytes(len(data) - 2 - start)
    return data[:start] + noise + data[-2:]


@pytest.fixture(scope="module")
def filters() -> ImageFilters:
    return ImageFilters()


def reason(result) -> str | None:
    rejection = result[-1]
    return rejection.reason if rejection else None


def test_a_good_jpeg_is_kept_with_its_header_size(filters):
    info, image, rejection = filters.check(jpeg(640, 480))
    assert rejection is None
    assert (info.format, info.width, info.height) == ("JPEG", 640, 480)
    assert (image.mode, image.size) == ("RGB", (640, 480))


@pytest.mark.parametrize("fmt", ["PNG", "GIF", "WEBP", "BMP"])
def test_other_formats_are_not_jpeg(filters, fmt):
    info, image, rejection = filters.check(encode(picture(), fmt))
    assert rejection.reason == "not_jpeg"
    assert info.format == fmt and image is None


def test_the_bytes_decide_the_format_not_the_file_name(filters, tmp_path):
    (tmp_path / "photo.png").write_bytes(jpeg())
    (tmp_path / "photo.jpg").write_bytes(encode(picture(), "PNG"))
    assert reason(filters.check((tmp_path / "photo.png").read_bytes())) is None
    assert reason(filters.check((tmp_path / "photo.jpg").read_bytes())) == "not_jpeg"


def test_a_multi_picture_camera_jpeg_counts_as_jpeg(filters):
    data = encode(picture(), "MPO", save_all=True, append_images=[picture()])
    info, image, rejection = filters.check(data)
    assert info.format == "MPO" and rejection is None and image.size == (640, 480)


@pytest.mark.parametrize(
    ("width", "height", "expected"),
    [
        (300, 500, "too_small"),
        (640, 400, "too_small"),  # a side of exactly 400 px: both must be > 400
        (401, 401, None),
        (1000, 401, "aspect_ratio"),
        (802, 401, None),  # exactly 2:1 passes
    ],
)
def test_size_and_aspect_ratio(filters, width, height, expected):
    info, rejection = filters.check_header(jpeg(width, height))
    assert (info.width, info.height) == (width, height)
    assert (rejection.reason if rejection else None) == expected


def test_too_small_says_the_size_and_the_rule(filters):
    _, rejection = filters.check_header(jpeg(300, 200))
    assert rejection.detail == "300x200, both sides must be > 400"


def test_a_header_claiming_a_huge_image_is_rejected_before_decoding(filters):
    bomb = with_header_size(jpeg(), 60_000, 60_000)  # 3.6 gigapixels in a few kilobytes
    assert reason(filters.check_header(bomb)) == "too_many_pixels"
    assert reason(filters.check(bomb)) == "too_many_pixels"


def test_the_pixel_budget_comes_from_the_config(filters):
    big = with_header_size(jpeg(), 8_000, 7_000)  # 56M pixels: under Pillow's own limit
    info, rejection = filters.check_header(big)
    assert rejection.reason == "too_many_pixels" and "56,000,000" in rejection.detail
    assert reason(decode(jpeg(), max_pixels=1_000)) == "too_many_pixels"


def test_pillows_bomb_warning_is_a_rejection_and_leaves_warning_filters_alone():
    bomb = with_header_size(jpeg(), 10_000, 10_000)  # over Pillow's warning limit only
    filters_before = list(warnings.filters)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert reason(decode(bomb, max_pixels=200_000_000)) == "too_many_pixels"
        assert reason(probe(bomb)) == "too_many_pixels"
    assert caught == []
    assert warnings.filters == filters_before


def test_a_truncated_jpeg(filters):
    info, image, rejection = filters.check(truncated(jpeg()))
    assert rejection.reason == "truncated" and image is None
    assert info.width == 640  # the header is intact


def test_a_jpeg_cut_inside_its_header_is_truncated(filters):
    data = jpeg()
    inside_a_huffman_table = segment(data, 0xC4) + 10
    assert reason(filters.check(data[:inside_a_huffman_table])) == "truncated"


def test_garbage_scan_data_is_corrupt(filters):
    assert reason(filters.check(with_garbage_scan(jpeg()))) == "corrupt"


@pytest.mark.parametrize("data", [b"", None, random.Random(0).randbytes(5_000)])
def test_no_image_at_all(filters, data):
    info, image, rejection = filters.check(data)
    assert info is None and image is None and rejection.reason == "not_an_image"


@pytest.mark.parametrize("mode", ["CMYK", "L"])
def test_cmyk_and_grayscale_jpegs_decode_to_rgb(filters, mode):
    data = encode(picture(mode=mode), "JPEG")
    info, image, rejection = filters.check(data)
    assert rejection is None and image.mode == "RGB"
    assert (info.width, info.height) == (640, 480)


def test_exif_orientation_turns_the_decoded_image_upright(filters):
    exif = Image.Exif()
    exif[0x0112] = 6  # Orientation: rotate 90 degrees clockwise to view
    info, image, rejection = filters.check(encode(picture(), "JPEG", exif=exif))
    assert rejection is None
    assert (info.width, info.height) == (640, 480)  # as stored
    assert image.size == (480, 640)  # as seen


def test_hostile_bytes_never_raise(filters):
    """Byte flips in a JPEG end as keep or a known reason: half of them in the headers and
    tables (frame size, Huffman and quantization tables), half anywhere (mostly scan data)."""
    data = jpeg()
    rng = random.Random(7)
    for attempt in range(200):
        mutated = bytearray(data)
        region = segment(data, 0xDA) if attempt % 2 else len(data)
        for _ in range(rng.randint(1, 6)):
            mutated[rng.randrange(region)] = rng.randrange(256)
        assert reason(filters.check(bytes(mutated))) in REASONS | {None}


def test_real_photos():
    filters = ImageFilters()
    astronaut = encode(Image.fromarray(skimage.data.astronaut()), "JPEG")  # 512x512
    chelsea = encode(Image.fromarray(skimage.data.chelsea()), "JPEG")  # 451x300
    assert reason(filters.check(astronaut)) is None
    assert reason(filters.check(chelsea)) == "too_small"


def test_config_is_typed_and_strict():
    config = ImageFilterConfig.model_validate({"min_side": 200, "unsafe": {"threshold": 0.8}})
    assert reason(ImageFilters(config).check(jpeg(300, 250))) is None
    with pytest.raises(ValidationError):
        ImageFilterConfig.model_validate({"min_sides": 200})
    with pytest.raises(ValidationError):
        UnsafeConfig(threshold=1.5)


# --- the unsafe-content detector plug-in -----------------------------------------------------


class BrightnessDetector:
    """A test double of the detector interface: the brighter the image, the "less safe"."""

    name = "brightness"

    def __init__(self):
        self.batch_sizes: list[int] = []

    def scores(self, images):
        self.batch_sizes.append(len(images))
        return [ImageStat.Stat(image.convert("L")).mean[0] / 255 for image in images]


def flat_jpeg(value: int) -> bytes:
    return encode(Image.new("RGB", (640, 480), (value, value, value)), "JPEG")


def test_no_detector_by_default(filters):
    assert filters.detector is None
    assert load_detector(UnsafeConfig()) is None


def test_an_image_scoring_at_the_threshold_is_unsafe():
    detector = BrightnessDetector()
    score = detector.scores([Image.open(io.BytesIO(flat_jpeg(128))).convert("RGB")])[0]
    config = ImageFilterConfig(unsafe=UnsafeConfig(threshold=score))
    filters = ImageFilters(config, detector=detector)
    assert filters.detector.name == "brightness"
    info, image, rejection = filters.check(flat_jpeg(128))
    assert rejection.reason == "unsafe" and "brightness score" in rejection.detail
    assert image is None and info.width == 640
    assert reason(filters.check(flat_jpeg(120))) is None


def test_check_many_calls_the_detector_once_on_the_decoded_images():
    detector = BrightnessDetector()
    filters = ImageFilters(detector=detector)
    batch = [flat_jpeg(230), flat_jpeg(20), encode(picture(), "PNG"), None, truncated(jpeg())]
    results = filters.check_many(batch)
    assert [reason(result) for result in results] == [
        "unsafe",
        None,
        "not_jpeg",
        "not_an_image",
        "truncated",
    ]
    assert detector.batch_sizes == [2]


def test_nudenet_missing_says_how_to_install_and_warns_of_its_licence(monkeypatch):
    monkeypatch.setitem(sys.modules, "nudenet", None)  # import fails, installed or not
    with pytest.raises(AssetError, match="AGPL") as error:
        load_detector(UnsafeConfig(detector="nudenet"))
    assert "pip install 'conceptual[unsafe]'" in str(error.value)


def test_nudenet_adapter_scores_explicit_classes_of_bgr_images(monkeypatch):
    seen = []

    class FakeNudeDetector:  # nudenet 3.x's interface, as its wheel defines it
        def detect_batch(self, images, batch_size=4):
            seen.extend(images)
            return [
                [
                    {"class": "FACE_FEMALE", "score": 0.95},
                    {"class": "BUTTOCKS_EXPOSED", "score": 0.6},
                    {"class": "FEMALE_BREAST_COVERED", "score": 0.9},
                ],
                [{"class": "MALE_BREAST_EXPOSED", "score": 0.9}],  # a bare chest: not explicit
            ]

    monkeypatch.setitem(
        sys.modules, "nudenet", types.SimpleNamespace(NudeDetector=FakeNudeDetector)
    )
    detector = load_detector(UnsafeConfig(detector="nudenet"))
    red = Image.new("RGB", (8, 4), (255, 0, 0))
    assert detector.name == "nudenet"
    assert detector.scores([red, red]) == [0.6, 0.0]
    assert seen[0].shape == (4, 8, 3) and seen[0][0, 0].tolist() == [0, 0, 255]  # BGR
    assert detector.scores([]) == []


# A user's image-profanity classifier as a module of its own, loading the weights it is given:
# a logistic regression on an image's mean colour (torch). The test trains it to flag red
# images, the stand-in for "offensive" that a test can make.
PROFANITY_PLUGIN = """
import numpy as np
import torch

def features(images):
    x = [np.asarray(i.convert("RGB").resize((8, 8)), np.float32).mean((0, 1)) / 255 for i in images]
    return torch.tensor(np.stack(x))

class ColourScreen:
    name = "colour-screen"

    def __init__(self, model):
        self.model = model

    def scores(self, images):
        with torch.no_grad():
            return torch.sigmoid(self.model(features(images))).squeeze(1).tolist()

def build(weights):
    model = torch.nn.Linear(3, 1)
    model.load_state_dict(torch.load(weights, weights_only=True))
    return ColourScreen(model.eval())
"""


def train_colour_screen(path) -> None:
    """The classifier's weights, trained here on red (offensive) against blue and green."""
    torch.manual_seed(0)
    colours = [(230, 20, 20), (200, 40, 30), (20, 20, 230), (40, 200, 40)]
    x = torch.tensor(colours, dtype=torch.float32) / 255
    y = torch.tensor([[1.0], [1.0], [0.0], [0.0]])
    model = torch.nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=2.0)
    for _ in range(300):
        optimizer.zero_grad()
        torch.nn.functional.binary_cross_entropy_with_logits(model(x), y).backward()
        optimizer.step()
    torch.save(model.state_dict(), path)


def test_a_classifier_plugs_in_by_module_and_factory(tmp_path, monkeypatch):
    """unsafe.detector=module:factory with unsafe.weights: the image stage's plug-in point
    for a profanity classifier (the paper screens for more than pornography)."""
    (tmp_path / "screening.py").write_text(PROFANITY_PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    train_colour_screen(tmp_path / "screen.pt")
    unsafe = UnsafeConfig(detector="screening:build", weights=str(tmp_path / "screen.pt"))
    filters = ImageFilters(ImageFilterConfig(unsafe=unsafe))
    assert filters.detector.name == "colour-screen"

    def coloured(rgb) -> bytes:
        return encode(Image.new("RGB", (640, 480), rgb), "JPEG")

    results = filters.check_many([coloured((220, 30, 25)), coloured((30, 30, 220))])
    assert [reason(result) for result in results] == ["unsafe", None]
    assert "colour-screen score" in results[0].rejection.detail


def test_a_plugin_that_is_not_there_or_not_a_detector_is_named(tmp_path, monkeypatch):
    with pytest.raises(AssetError, match="'no_such_module:build' cannot be loaded"):
        load_detector(UnsafeConfig(detector="no_such_module:build"))
    (tmp_path / "not_a_detector.py").write_text("def build():\n    return 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(AssetError, match="returned int, not a detector"):
        load_detector(UnsafeConfig(detector="not_a_detector:build"))
    with pytest.raises(ValueError, match="module:factory"):
        UnsafeConfig(detector="profanity")
    with pytest.raises(ValueError, match="takes none"):
        UnsafeConfig(detector="nudenet", weights="/m/w.pt")


# --- hostile JPEGs: refused before decoding, in curation and in serving alike ----------------


def scans_of(data: bytes) -> list[bytes]:
    """Each scan of a JPEG: its SOS segment and entropy-coded data, up to the next scan or
    EOI. (0xFF 0xDA never occurs inside scan data, where 0xFF is followed by 0x00 or RSTn.)"""
    starts, offset = [], 0
    while (offset := data.find(b"\xff\xda", offset)) >= 0:
        starts.append(offset)
        offset += 2
    return [data[a:b] for a, b in zip(starts, starts[1:] + [len(data) - 2])]


def scan_bomb(times: int) -> bytes:
    """A progressive JPEG with its smallest scan repeated `times` more: every repeat is one
    more pass of the decoder over every block (3,000 of them took 29 s at 4000x4000)."""
    data = jpeg(800, 600, progressive=True)
    return data[:-2] + min(scans_of(data), key=len) * times + data[-2:]


def test_a_small_file_claiming_a_huge_size_is_implausible(filters):
    """A few KB claiming 7000x7000 (49M pixels, under the pixel budget): libjpeg fills the
    missing scan data with grey and Pillow decodes 147 MB of it without complaint."""
    bomb = with_header_size(jpeg(), 7000, 7000)
    assert len(bomb) < 20_000
    info, image, rejection = filters.check(bomb)
    assert rejection.reason == "implausible_size" and image is None
    assert "bytes per pixel" in rejection.detail
    with pytest.raises(ImageError, match="implausible_size"):
        read_image(bomb, SIZE)


def test_the_sparsest_jpeg_of_real_content_is_plausible(filters):
    """A flat grey picture with optimized tables is the fewest bytes a JPEG of real content
    takes (about 2 bits per 8x8 block); it stays above the floor."""
    flat = encode(Image.new("L", (2000, 2000), 128), "JPEG", optimize=True)
    assert len(flat) / 2000**2 < 2.5 * MIN_JPEG_BYTES_PER_PIXEL
    assert jpeg_hazard(flat, 2000, 2000) is None


@pytest.mark.realdata
def test_real_photos_are_far_above_the_plausibility_floor(real_data):
    """How the floor was chosen: the sparsest real photo takes over 40x its bytes per pixel."""
    photos = sorted((real_data / "flickr8k_mini").rglob("*.jpg"))
    photos += sorted((real_data / "coco_mini").rglob("*.jpg"))
    assert photos
    sparsest = min(
        len(data) / (info.width * info.height)
        for data in (path.read_bytes() for path in photos)
        for info in [probe(data)[0]]
    )
    assert sparsest > 40 * MIN_JPEG_BYTES_PER_PIXEL


def test_a_progressive_jpeg_is_kept(filters):
    data = jpeg(800, 600, progressive=True)
    assert count_scans(data) == len(scans_of(data)) == 10  # libjpeg's default script
    assert reason(filters.check(data)) is None


def test_a_scan_bomb_is_refused_before_decoding(filters):
    bomb = scan_bomb(MAX_SCANS)
    assert count_scans(bomb) == MAX_SCANS + 10
    assert reason(filters.check(bomb)) == "too_many_scans"
    with pytest.raises(ImageError, match="too_many_scans"):
        read_image(bomb, SIZE)


def test_scans_are_counted_by_walking_segments_not_by_searching_bytes(filters):
    """A comment full of 0xFF 0xDA is a comment: only real SOS segments count."""
    data = encode(picture(), "JPEG", comment=b"\xff\xda" * 1000)
    assert count_scans(data) == 1
    assert reason(filters.check(data)) is None


def test_restart_markers_out_of_turn_are_corrupt(filters):
    """Pillow decodes it (libjpeg only warns, and Pillow hides libjpeg's warnings)."""
    data = encode(picture(), "JPEG", restart_marker_blocks=16)
    first = data.index(b"\xff\xd0")
    damaged = data[:first] + b"\xff\xd3" + data[first + 2 :]  # RST3 where RST0 belongs
    Image.open(io.BytesIO(damaged)).load()
    assert reason(filters.check(data)) is None
    assert reason(filters.check(damaged)) == "corrupt"


def test_random_bytes_over_the_scan_data_are_corrupt_when_they_hold_a_marker(filters):
    """256 random bytes over the middle of a real photo's scan data, holding an RST marker
    where none belongs: libjpeg warns and decodes garbage, and Pillow keeps it. (Random
    bytes without 0xFF leave no trace in the file's structure: only the entropy decoder
    notices, and Pillow does not say.)"""
    photo = encode(Image.fromarray(skimage.data.astronaut()), "JPEG")
    sos = segment(photo, 0xDA)
    middle = (sos + 2 + int.from_bytes(photo[sos + 2 : sos + 4], "big") + len(photo)) // 2
    damaged = photo[:middle] + random.Random(9).randbytes(256) + photo[middle + 256 :]
    Image.open(io.BytesIO(damaged)).load()
    assert reason(filters.check(photo)) is None
    assert reason(filters.check(damaged)) == "corrupt"


def test_random_bytes_without_a_marker_are_corrupt_too(filters):
    """Random bytes (no 0xFF) over the scan data leave the file's structure intact; Pillow
    decodes them silently, libjpeg warns, and the strict decode turns the warning into
    `corrupt`."""
    photo = encode(Image.fromarray(skimage.data.astronaut()), "JPEG")
    sos = segment(photo, 0xDA)
    middle = (sos + 2 + int.from_bytes(photo[sos + 2 : sos + 4], "big") + len(photo)) // 2
    rng = random.Random(3)
    kept_by_pillow = caught = 0
    for _ in range(20):
        noise = bytes(rng.randrange(0xFF) for _ in range(64))  # never 0xFF: no marker
        damaged = photo[:middle] + noise + photo[middle + 64 :]
        Image.open(io.BytesIO(damaged)).load()  # Pillow says nothing
        kept_by_pillow += 1
        caught += reason(filters.check(damaged)) == "corrupt"
    assert kept_by_pillow == 20 and caught >= 15


def test_the_jpeg_walk_never_raises_anything_else():
    data = jpeg(progressive=True)
    rng = random.Random(11)
    for _ in range(300):
        mutated = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            mutated[rng.randrange(len(data))] = rng.choice([0xFF, 0xDA, 0xD9, 0xDD, 0xD0, 0x00])
        try:
            count_scans(bytes(mutated))
        except JpegStructureError:
            pass


EPS = b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 640 480\nshowpage\n"


@pytest.mark.parametrize("data", [EPS, encode(picture(), "ICO"), encode(picture(), "PCX")])
def test_only_web_image_formats_are_opened(filters, data):
    """Formats Pillow knows but the web does not use (EPS runs Ghostscript) are not images."""
    assert reason(filters.check(data)) == "not_an_image"
    with pytest.raises(ImageError, match="not_an_image"):
        read_image(data, SIZE)


def test_serving_decodes_a_jpeg_at_the_scale_the_model_needs():
    """1/8 scale keeps a 4000x3000 photo's short side >= 256 px: 500x375, 1/64 of the
    pixels; a model of 512 px input needs 1/4. A picture already near that size decodes
    whole, as do other formats."""
    assert read_image(jpeg(4000, 3000), SIZE).size == (500, 375)
    assert read_image(jpeg(4000, 3000), 512).size == (1000, 750)
    assert read_image(jpeg(640, 480), SIZE).size == (640, 480)
    assert read_image(encode(picture(900, 700), "PNG"), SIZE).size == (900, 700)


def test_serving_bounds_the_pixels_it_decodes():
    """The budget counts decoded pixels: a JPEG of 4200x4200 decodes at 1/8, a PNG of that
    size (17.6M pixels, a few KB) would decode whole and is refused."""
    side = 4200
    assert side**2 > max_decoded_pixels(SIZE)
    assert read_image(jpeg(side, side), SIZE).size == (side // 8, side // 8)
    with pytest.raises(ImageError, match="too_many_pixels"):
        read_image(encode(Image.new("L", (side, side)), "PNG"), SIZE)
