"""Image-based filters (docs/spec/curation.md §1): JPEG only, both sides > 400 px, aspect ratio
<= 2, no pornography; hostile bytes become rejections, never crashes.

    filters = ImageFilters(ImageFilterConfig())
    info, rejection = filters.check_header(data)    # header only: cheap, stops most bad images
    info, image, rejection = filters.check(data)    # then the full decode and unsafe detector

Both return a record whose last field, `rejection`, is the Rejection or None (keep).

Reasons (stage "image") are metric names, so never reword one:

| reason | rejects |
|---|---|
| not_an_image | no bytes, or bytes that are none of IMAGE_FORMATS (Pillow may open no other) |
| not_jpeg | an image in another format (decided by the bytes, not a name or content type) |
| too_small | a side <= `min_side` |
| aspect_ratio | larger side / smaller side > `max_aspect` |
| too_many_pixels | width x height > `max_pixels` in the header (a decompression bomb), or over Pillow's own limit |
| implausible_size | a JPEG too small in bytes for its size in pixels (MIN_JPEG_BYTES_PER_PIXEL): a few KB claiming 7000x7000 decodes to a grey sheet, at full cost |
| too_many_scans | a JPEG of over MAX_SCANS scans: each one is another pass over every block |
| truncated | the file ends before the image data does |
| corrupt | any other decode failure (garbage scan data, bad tables, broken metadata), or a JPEG marker out of place (vision/jpeg.py) |
| unsafe | the unsafe-content detector scores >= `unsafe.threshold` |

Width and height are the stored (header) dimensions; the decoded image is RGB, turned upright
by its EXIF orientation, so its size may be the header's swapped.

The header and the pixels are read by vision/decoding.py (`probe`, `decode`: IMAGE_FORMATS,
MIN_JPEG_BYTES_PER_PIXEL and MAX_SCANS are there), which is also how serving reads an
uploaded image (conceptual.models.inference), so every guard against hostile bytes here
holds there too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from PIL import Image
from pydantic import Field

from conceptual.config import Config
from conceptual.records import Rejection
from conceptual.vision.decoding import (
    JPEG_FORMATS,
    HeaderCheck,
    ImageInfo,
    decode,
    pixel_budget,
    probe,
)
from conceptual.vision.resize import ResizeConfig
from conceptual.vision.unsafe import UnsafeConfig, UnsafeDetector, load_detector

# The reasons of the table above, in its order.
IMAGE_REASONS = (
    "not_an_image",
    "not_jpeg",
    "too_small",
    "aspect_ratio",
    "too_many_pixels",
    "implausible_size",
    "too_many_scans",
    "truncated",
    "corrupt",
    "unsafe",
)


class ImageFilterConfig(Config):
    jpeg_only: bool = True  # decided by the bytes (magic number), not name or content type
    min_side: int = Field(400, ge=0)  # both sides must be > min_side
    max_aspect: float = Field(2.0, ge=1.0)  # larger side / smaller side <= max_aspect
    # Decompression-bomb guard, checked from the header before decoding. Pillow refuses
    # images over its own Image.MAX_IMAGE_PIXELS (about 89M) whatever this says.
    max_pixels: int = Field(50_000_000, gt=0)
    unsafe: UnsafeConfig = UnsafeConfig()
    # What becomes of an image once accepted: resized, re-encoded (vision/resize.py).
    resize: ResizeConfig = ResizeConfig()


class ImageCheck(NamedTuple):
    """What a full check says of one image: its header, the decoded RGB image when kept, and
    the Rejection, or None to keep it."""

    info: ImageInfo | None
    image: Image.Image | None
    rejection: Rejection | None


class ImageFilters:
    """The image checks of one config, with its unsafe-content detector loaded once."""

    def __init__(
        self, config: ImageFilterConfig | None = None, detector: UnsafeDetector | None = None
    ):
        self.config = config or ImageFilterConfig()
        # `detector` plugs in one already built; otherwise the config names it.
        self.detector = detector if detector is not None else load_detector(self.config.unsafe)

    def check_header(self, data: bytes | None) -> HeaderCheck:
        """Format, size, aspect ratio and pixel budget, from the header alone."""
        probed = probe(data)
        if probed.info is None:
            return probed
        return HeaderCheck(probed.info, self._judge_header(probed.info))

    def _judge_header(self, info: ImageInfo) -> Rejection | None:
        config = self.config
        if config.jpeg_only and info.format not in JPEG_FORMATS:
            return Rejection("not_jpeg", f"{info.format} image")
        size = f"{info.width}x{info.height}"
        if min(info.width, info.height) <= config.min_side:
            return Rejection("too_small", f"{size}, both sides must be > {config.min_side}")
        aspect = max(info.width, info.height) / min(info.width, info.height)
        if aspect > config.max_aspect:
            return Rejection("aspect_ratio", f"{size}, ratio {aspect:.2f} > {config.max_aspect}")
        return pixel_budget(info.width, info.height, config.max_pixels)

    def check(self, data: bytes | None) -> ImageCheck:
        """Header checks first (cheap; most bad images stop there), then the full decode,
        then the unsafe-content detector."""
        return self.check_many([data])[0]

    def check_many(self, images: Sequence[bytes | None]) -> list[ImageCheck]:
        """`check` of each image, with the detector called once on all decoded images."""
        results = [self._header_then_decode(data) for data in images]
        if self.detector is not None:
            self._judge_unsafe(results)
        return results

    def _header_then_decode(self, data: bytes | None) -> ImageCheck:
        info, rejection = self.check_header(data)
        if rejection:
            return ImageCheck(info, None, rejection)
        image, rejection = decode(data, self.config.max_pixels)
        return ImageCheck(info, image, rejection)

    def _judge_unsafe(self, results: list[ImageCheck]) -> None:
        """Replace, in place, the result of each decoded image the detector finds unsafe."""
        decoded = [index for index, result in enumerate(results) if result.image is not None]
        scores = self.detector.scores([results[index].image for index in decoded])
        threshold = self.config.unsafe.threshold
        for index, score in zip(decoded, scores, strict=True):
            if score >= threshold:
                detail = f"{self.detector.name} score {score:.3f} >= {threshold}"
                results[index] = ImageCheck(results[index].info, None, Rejection("unsafe", detail))
