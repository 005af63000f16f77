"""Reading image bytes that may be hostile (a web page's, an upload's): the format and size
from the header alone (`probe`), and the pixels as upright RGB (`decode`), with every guard
against a decompression bomb, a JPEG too costly or pointless to decode and a decoder's
failure turned into a Rejection, never a crash or a runaway. The image filters
(vision/images.py), the resizing of kept images (vision/resize.py), the split of a photo,
the retriever's photos and serving's uploads (conceptual.models.inference) all read images
through it; the reasons it gives are the image stage's (images.py's table).
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import NamedTuple

import simplejpeg
from PIL import Image, ImageOps

from conceptual.records import Rejection
from conceptual.vision.jpeg import JpegStructureError, count_scans

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


def pixel_budget(width: int, height: int, max_pixels: int) -> Rejection | None:
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
        if rejection := pixel_budget(image.width, image.height, max_pixels):
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
