"""Copies of a photo as the web makes them, for the near-duplicate tests and benchmark
(pipelines/curation/near_duplicates.py): re-encoded at three JPEG qualities, resized, cropped 10%,
mirrored. Each is new bytes, so the exact deduplication sees a new image."""

from __future__ import annotations

import io

from PIL import Image, ImageOps

QUALITIES = (90, 70, 50)
# what each copy is called, in the order `copies` makes them
KINDS = (*(f"jpeg{q}" for q in QUALITIES), "resized", "cropped", "mirrored")


def jpeg(image: Image.Image, quality: int = 90) -> bytes:
    out = io.BytesIO()
    image.convert("RGB").save(out, "JPEG", quality=quality)
    return out.getvalue()


def copies(photo: bytes, resize: float = 0.6) -> dict[str, bytes]:
    """{kind: JPEG bytes} of the photo's copies (KINDS): cropped keeps the middle 90% of
    each side."""
    with Image.open(io.BytesIO(photo)) as opened:
        image = opened.convert("RGB")
    width, height = image.size
    dx, dy = round(width * 0.05), round(height * 0.05)
    made = {f"jpeg{q}": jpeg(image, q) for q in QUALITIES}
    made["resized"] = jpeg(image.resize((round(width * resize), round(height * resize))))
    made["cropped"] = jpeg(image.crop((dx, dy, width - dx, height - dy)))
    made["mirrored"] = jpeg(ImageOps.mirror(image))
    return made
