"""Resizing and re-encoding the images a curation keeps (`image.resize.*`), after the image
filters accepted them: what img2dataset calls `image_size` and `resize_mode`, for the
platform's own records and shards.

    resized = resize_image(data, ResizeConfig(short_side=256), max_pixels)

Modes (img2dataset's names):
- `keep_ratio`: the shorter side becomes `short_side`, the aspect ratio is kept;
- `center_crop`: as keep_ratio, then the centre square of `short_side` x `short_side`.

An image whose shorter side is already `short_side` or less is left as it is unless `upscale`
(img2dataset upscales by default, `resize_only_if_bigger=False`; here a small photo stays
small: upscaling adds bytes, not detail). A JPEG decodes at the coarsest scale libjpeg offers
that keeps the shorter side >= `short_side` (vision/decoding.py `decode`), then Pillow's Lanczos
filter brings it to size (img2dataset: OpenCV's area filter down, Lanczos up). A resized
image, and with `reencode` every image, is encoded as a baseline JPEG at `quality` (95:
img2dataset's default), upright (its EXIF orientation applied) and without metadata; an image
left as it is keeps its bytes.
"""

from __future__ import annotations

import io
from typing import Literal, NamedTuple

from PIL import Image
from pydantic import Field

from conceptual.config import Config
from conceptual.vision.decoding import decode


class ResizeConfig(Config):
    short_side: int | None = Field(None, gt=0)  # None: images are kept as fetched
    mode: Literal["keep_ratio", "center_crop"] = "keep_ratio"
    upscale: bool = False  # also enlarge images whose shorter side is below short_side
    reencode: bool = False  # re-encode every kept image, resized or not
    quality: int = Field(95, ge=1, le=100)  # JPEG quality of what is encoded

    @property
    def enabled(self) -> bool:
        return self.short_side is not None or self.reencode


class Resized(NamedTuple):
    """The image's bytes (the input's when nothing was to do), its width and height, and
    whether they are new."""

    data: bytes
    width: int
    height: int
    changed: bool


def target_size(width: int, height: int, config: ResizeConfig) -> tuple[int, int] | None:
    """The size `keep_ratio` scales to (before any centre crop), or None to keep it."""
    side = config.short_side
    if (
        side is None
        or min(width, height) == side
        or (min(width, height) < side and not config.upscale)
    ):
        return None
    scale = side / min(width, height)
    if width <= height:
        return side, max(1, round(height * scale))
    return max(1, round(width * scale)), side


def resize_image(data: bytes, config: ResizeConfig, max_pixels: int) -> Resized | None:
    """The image resized and/or re-encoded as `config` says (`changed` False, and the bytes
    as they came, when there is nothing to do); None when it does not decode (it passed the
    image filters, so that should not happen)."""
    image, _ = decode(data, max_pixels, reduce_to=config.short_side)
    if image is None:
        return None
    size = target_size(image.width, image.height, config)
    side = config.short_side
    crop = (
        config.mode == "center_crop"
        and side is not None
        and (size is not None or min(image.size) == side)
        and image.width != image.height
    )
    if size is None and not crop and not config.reencode:
        # Not decoded at a reduced scale either: that happens only where a side is over
        # twice short_side, and then the image is resized.
        return Resized(data, image.width, image.height, False)
    if size is not None:
        image = image.resize(size, Image.Resampling.LANCZOS, reducing_gap=3.0)
    if crop:
        left, top = (image.width - side) // 2, (image.height - side) // 2
        image = image.crop((left, top, left + side, top + side))
    out = io.BytesIO()
    image.save(out, "JPEG", quality=config.quality)
    return Resized(out.getvalue(), image.width, image.height, True)
