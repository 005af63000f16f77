"""Captions of image files and folders, as the caption job writes them: a folder stands for
its image files, a file that cannot be read or decoded is skipped with its reason (one bad
photo never ends the job), and each image gets the id the COCO results JSON names it by.

    files = image_files([Path("val2014/")])           # sorted, by suffix
    captioned, skipped = caption_files(captioner, files, batch=32)
    coco_results({coco_id(p): c for p, c in captioned.items()})   # conceptual.metrics
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from conceptual.models.inference import ImageCaptioner, ImageError, read_image

# What a folder's image files are named (what the image filters accept): other files, such
# as a COCO folder's annotations, are not photos.
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".gif", ".bmp", ".webp")
# A COCO-style id: the digits closing the name, alone or after an underscore
# (COCO_val2014_000000123456, 000000123456); Flickr's 1000268201_693b08cb0e is no id.
COCO_ID = re.compile(r"(?:^|_)(\d+)$")


@dataclass(frozen=True)
class Skipped:
    path: Path
    reason: str  # the image filter's reason (not_an_image, truncated...), or unreadable


def image_files(paths: Iterable[Path]) -> list[Path]:
    """The files given and the image files directly inside the folders given, each folder's
    in name order; ValueError naming a path that is neither."""
    files = []
    for path in paths:
        if path.is_dir():
            files += sorted(p for p in path.iterdir() if p.is_file() and is_image_name(p))
        elif path.is_file():
            files.append(path)
        else:
            raise ValueError(f"no such image file or folder: {path}")
    return files


def is_image_name(path: Path) -> bool:
    return path.suffix.lower() in IMAGE_SUFFIXES and not path.name.startswith(".")


def coco_id(path: Path) -> int | str:
    """The id of an image in a COCO results JSON: the integer its name ends with, as COCO
    names its photos (COCO_val2014_000000123456.jpg -> 123456), else the file's stem."""
    found = COCO_ID.search(path.stem)
    return int(found.group(1)) if found else path.stem


def batches(files: Sequence[Path], size: int) -> Iterator[Sequence[Path]]:
    for start in range(0, len(files), size):
        yield files[start : start + size]


def caption_files(
    captioner: ImageCaptioner, files: Sequence[Path], batch: int = 32
) -> tuple[dict[Path, str], list[Skipped]]:
    """Each readable file's caption, in the files' order, and the files skipped with why.
    At most `batch` decoded photos are held at once."""
    captioned: dict[Path, str] = {}
    skipped = []
    for chunk in batches(files, batch):
        images, read = [], []
        for path in chunk:
            try:
                images.append(read_image(path.read_bytes(), captioner.image_size))
                read.append(path)
            except ImageError as error:
                skipped.append(Skipped(path, error.reason))
            except OSError as error:  # a file that went away or may not be read
                skipped.append(Skipped(path, f"unreadable ({error.strerror or error})"))
        if images:
            captioned.update(zip(read, captioner.caption(images)))
    return captioned, skipped


def by_image_id(captioned: dict[Path, str]) -> tuple[dict[int | str, str], list[Path]]:
    """Captions by image id, and the files whose id an earlier file already took (a results
    JSON holds one caption per image: 000001.jpg and 1.png are both image 1)."""
    by_id: dict[int | str, str] = {}
    repeated = []
    for path, caption in captioned.items():
        if (key := coco_id(path)) in by_id:
            repeated.append(path)
        else:
            by_id[key] = caption
    return by_id, repeated
