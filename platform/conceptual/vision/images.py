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

`decode` is also how serving reads an uploaded image (conceptual.models.inference), so every
guard against hostile bytes here holds there too.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import NamedTuple

import simplejpeg
from PIL import Image, ImageOps
from pydantic import Field

from conceptual.config import Config
from conceptual.records import Rejection
from conceptual.vision.jpeg import JpegStructureError, count_scans
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
# Pillow names camera JPEGs that carry extra pictures (previews, stereo pairs) "MPO"; the
# first picture is an ordinary JPEG and browsers show it as one.
JPEG_FORMATS = frozenset({"JPEG", "MPO"})
# The only formats Pillow may open: those the fetcher accepts (vision/fetch.py). Pillow
# would otherwise try every plugin it has, EPS included, which runs Ghostscript. ("JPEG"
# opens MPO files too.)
IMAGE_FORMATS = ("JPEG", "PNG", "GIF", "WEBP", "BMP", "TIFF")
# The fewest bytes per pixel a JPEG of real content takes. The sparsest of 1,037 real photos
# (COCO and Flickr8k samples in ../shared/data) take 0.093 bytes per pixel; even a flat grey
# 7000x7000 JPEG, Huffman tables optimized, takes 0.0039 (libjpeg must spend about 2 bits on
# each 8x8 block). 0.002 is half that and 46x below the sparsest photo: only a file whose
# scan data stops early, which libjpeg fills with grey, comes lower (the 5 KB 7000x7000 one:
# 0.0001).
MIN_JPEG_BYTES_PER_PIXEL = 0.002
# Progressive JPEGs take about 10 scans (libjpeg's default script; 6 in grayscale), and
# encoders that tune their scripts stay within a few dozen. Each scan is another pass over
# every block: 10 ms at 4000x4000, where 3,000 scans of 31 bytes (192 KB in all) took 29 s
# of CPU. 100, 10x libjpeg's script, bounds that to about a second; libjpeg-turbo's own
# tools stop at 1000 when asked to limit scans (-maxscans), a bound for batch use.
MAX_SCANS = 100


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


@dataclass(frozen=True)
class ImageInfo:
    format: str | None  # Pillow's name: "JPEG", "PNG", ...
    width: int
    height: int


class HeaderCheck(NamedTuple):
    """What the header says of one image: its format and size when it has a readable header,
    and the Rejection, or None to go on."""

    info: ImageInfo | None
    rejection: Rejection | None


class ImageCheck(NamedTuple):
    """What a full check says of one image: its header, the decoded RGB image when kept, and
    the Rejection, or None to keep it."""

    info: ImageInfo | None
    image: Image.Image | None
    rejection: Rejection | None


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
            return Image.open(io.BytesIO(data), formats=IMAGE_FORMATS), None
    except Image.UnidentifiedImageError:
        return None, Rejection("not_an_image", f"{len(data)} bytes of none of {IMAGE_FORMATS}")
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


def jpeg_hazard(data: bytes, width: int, height: int) -> Rejection | None:
    """What makes a JPEG unsafe or pointless to decode, found before decoding: too few bytes
    for its pixels, too many scans, or a marker out of place."""
    bytes_per_pixel = len(data) / max(1, width * height)
    if bytes_per_pixel < MIN_JPEG_BYTES_PER_PIXEL:
        return Rejection(
            "implausible_size",
            f"{len(data):,} bytes for {width}x{height}: {bytes_per_pixel:.5f} bytes per pixel"
            f" < {MIN_JPEG_BYTES_PER_PIXEL}",
        )
    try:
        scans = count_scans(data, stop_after=MAX_SCANS)
    except JpegStructureError as exc:
        return Rejection("corrupt", f"{type(exc).__name__}: {exc}")
    if scans > MAX_SCANS:
        return Rejection("too_many_scans", f"over {MAX_SCANS} scans")
    return None


def probe(data: bytes | None) -> HeaderCheck:
    """Format and stored size from the header alone; no pixel is decoded."""
    image, rejection = _open(data)
    if image is None:
        return HeaderCheck(None, rejection)
    with image:
        return HeaderCheck(ImageInfo(image.format, image.width, image.height), None)


def decode(
    data: bytes | None, max_pixels: int, reduce_to: int | None = None
) -> tuple[Image.Image | None, Rejection | None]:
    """The image as upright RGB, unless it is over `max_pixels`, a JPEG hazard, or does not
    decode. Never raises on bad bytes.

    With `reduce_to`, a JPEG decodes at the coarsest scale libjpeg offers (1/2, 1/4, 1/8)
    that keeps both sides >= `reduce_to` (Image.draft), as the features job decodes: a model
    that sees 256 px needs no more, and the decode takes up to 64x less memory and time.
    `max_pixels` then bounds the pixels decoded, not the header's."""
    image, rejection = _open(data)
    if image is None:
        return None, rejection
    with image:
        if image.format in JPEG_FORMATS:
            if rejection := jpeg_hazard(data, image.width, image.height):
                return None, rejection
            if reduce_to:
                image.draft("RGB", (reduce_to, reduce_to))
        if rejection := _pixel_budget(image.width, image.height, max_pixels):
            return None, rejection
        try:
            image.load()
            rgb = image.convert("RGB")  # a copy, which outlives the file-backed image
            ImageOps.exif_transpose(rgb, in_place=True)
        except Exception as exc:  # decoders and metadata parsers fail in many ways
            return None, _failure(exc)
        if image.format in JPEG_FORMATS and (rejection := libjpeg_warning(data)):
            return None, rejection
        return rgb, None


def libjpeg_warning(data: bytes) -> Rejection | None:
    """`corrupt` when libjpeg warns about the scan data (random bytes over it, say): Pillow
    silences libjpeg's warnings and shows whatever it decoded, so the same bytes are decoded
    again, at 1/8 scale (about 2 ms), by libjpeg-turbo in strict mode, where a warning is an
    error. Runs after Pillow's decode, which names truncation (`truncated`) first."""
    try:
        simplejpeg.decode_jpeg(data, strict=True, min_factor=8)
    except (ValueError, RuntimeError) as exc:
        return Rejection("corrupt", f"libjpeg: {exc}")
    return None


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
