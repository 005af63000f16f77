"""Image-based filters (spec/curation.md §1): JPEG only, both sides > 400 px, aspect ratio
<= 2, no pornography; hostile bytes become rejections, never crashes.

    filters = ImageFilters(ImageFilterConfig())
    info, rejection = filters.check_header(data)    # header only: cheap, stops most bad images
    info, image, rejection = filters.check(data)    # then the full decode and unsafe detector

Reasons (stage "image") are metric names, so never reword one:

| reason | rejects |
|---|---|
| not_an_image | no bytes, or bytes Pillow cannot identify as any image format |
| not_jpeg | an image in another format (decided by the bytes, not a name or content type) |
| too_small | a side <= `min_side` |
| aspect_ratio | larger side / smaller side > `max_aspect` |
| too_many_pixels | width x height > `max_pixels` in the header (a decompression bomb), or over Pillow's own limit |
| truncated | the file ends before the image data does |
| corrupt | any other decode failure (garbage scan data, bad tables, broken metadata) |
| unsafe | the unsafe-content detector scores >= `unsafe.threshold` |

Width and height are the stored (header) dimensions; the decoded image is RGB, turned upright
by its EXIF orientation, so its size may be the header's swapped.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from PIL import Image, ImageOps
from pydantic import Field

from conceptual.config import Config
from conceptual.records import Rejection
from conceptual.vision.unsafe import UnsafeConfig, UnsafeDetector, load_detector

# Pillow names camera JPEGs that carry extra pictures (previews, stereo pairs) "MPO"; the
# first picture is an ordinary JPEG and browsers show it as one.
JPEG_FORMATS = frozenset({"JPEG", "MPO"})


class ImageFilterConfig(Config):
    jpeg_only: bool = True  # decided by the bytes (magic number), not name or content type
    min_side: int = Field(400, ge=0)  # both sides must be > min_side
    max_aspect: float = Field(2.0, ge=1.0)  # larger side / smaller side <= max_aspect
    # Decompression-bomb guard, checked from the header before decoding. Pillow refuses
    # images over its own Image.MAX_IMAGE_PIXELS (about 89M) whatever this says.
    max_pixels: int = Field(50_000_000, gt=0)
    unsafe: UnsafeConfig = UnsafeConfig()


@dataclass(frozen=True)
class ImageInfo:
    format: str | None  # Pillow's name: "JPEG", "PNG", ...
    width: int
    height: int


# What a full check says of one image: its header, the decoded RGB image when kept, and the
# rejection otherwise.
ImageCheck = tuple[ImageInfo | None, Image.Image | None, Rejection | None]


@contextmanager
def _bomb_warning_as_error() -> Iterator[None]:
    """Pillow only warns about images over MAX_IMAGE_PIXELS; here that is a rejection. Scoped
    to this block, so the process's warning filters stay as they were."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        yield


def _open(data: bytes | None) -> tuple[Image.Image | None, Rejection | None]:
    """Pillow's lazy open: identifies the format from the bytes and parses the header;
    pixels are decoded only on load()."""
    if not data:
        return None, Rejection("not_an_image", "no bytes")
    try:
        with _bomb_warning_as_error():
            return Image.open(io.BytesIO(data)), None
    except Image.UnidentifiedImageError:
        return None, Rejection("not_an_image", f"Pillow cannot identify {len(data)} bytes")
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        return None, Rejection("too_many_pixels", str(exc))
    except Exception as exc:  # a hostile header can break a format plugin in any way
        return None, _failure(exc)


def _failure(exc: Exception) -> Rejection:
    """Pillow says "image file is truncated" (in the pixel data) or "Truncated File Read" (in
    the header) when the file ends too soon; every other failure is corruption."""
    truncated = isinstance(exc, OSError) and "truncated" in str(exc).lower()
    return Rejection("truncated" if truncated else "corrupt", f"{type(exc).__name__}: {exc}")


def _pixel_budget(width: int, height: int, max_pixels: int) -> Rejection | None:
    if width * height > max_pixels:
        return Rejection(
            "too_many_pixels", f"{width}x{height} = {width * height:,} pixels > {max_pixels:,}"
        )
    return None


def probe(data: bytes | None) -> tuple[ImageInfo | None, Rejection | None]:
    """Format and stored size from the header alone; no pixel is decoded."""
    image, rejection = _open(data)
    if image is None:
        return None, rejection
    with image:
        return ImageInfo(image.format, image.width, image.height), None


def decode(data: bytes | None, max_pixels: int) -> tuple[Image.Image | None, Rejection | None]:
    """The whole image as upright RGB, unless the header says it is over `max_pixels` or it
    does not decode. Never raises on bad bytes."""
    image, rejection = _open(data)
    if image is None:
        return None, rejection
    with image:
        if rejection := _pixel_budget(image.width, image.height, max_pixels):
            return None, rejection
        try:
            image.load()
            rgb = image.convert("RGB")  # a copy, which outlives the file-backed image
            ImageOps.exif_transpose(rgb, in_place=True)
            return rgb, None
        except Exception as exc:  # decoders and metadata parsers fail in many ways
            return None, _failure(exc)


class ImageFilters:
    """The image checks of one config, with its unsafe-content detector loaded once."""

    def __init__(
        self, config: ImageFilterConfig | None = None, detector: UnsafeDetector | None = None
    ):
        self.config = config or ImageFilterConfig()
        # `detector` plugs in one already built; otherwise the config names it.
        self.detector = detector if detector is not None else load_detector(self.config.unsafe)

    @property
    def detector_name(self) -> str:
        """Which detector judged images: "none" when none ran."""
        return self.detector.name if self.detector is not None else "none"

    def check_header(self, data: bytes | None) -> tuple[ImageInfo | None, Rejection | None]:
        """Format, size, aspect ratio and pixel budget, from the header alone."""
        info, rejection = probe(data)
        if info is None:
            return None, rejection
        return info, self._judge_header(info)

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
        return _pixel_budget(info.width, info.height, config.max_pixels)

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
            return info, None, rejection
        image, rejection = decode(data, self.config.max_pixels)
        return info, image, rejection

    def _judge_unsafe(self, results: list[ImageCheck]) -> None:
        """Replace, in place, the result of each decoded image the detector finds unsafe."""
        decoded = [index for index, (_, image, _) in enumerate(results) if image is not None]
        scores = self.detector.scores([results[index][1] for index in decoded])
        threshold = self.config.unsafe.threshold
        for index, score in zip(decoded, scores, strict=True):
            if score >= threshold:
                detail = f"{self.detector.name} score {score:.3f} >= {threshold}"
                results[index] = (results[index][0], None, Rejection("unsafe", detail))
