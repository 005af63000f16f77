"""The demo's images: real photographs, broken variants of them and failing URLs, so that
every image rule of the curation funnel fires and the kept set is real photos with captions
that fit them.

Photos. scikit-image bundles a few real photographs offline (CC0 or public domain). PHOTOS
holds the five that the ImageNet classifier (EfficientNet-lite0) labels in a way an honest
caption can match, with the top labels it gives:

| photo | shows | top labels |
|---|---|---|
| coffee | a cup of espresso on a saucer | espresso, tea cup, coffee mug |
| chelsea | a tabby cat's face | Egyptian Mau, tabby cat (both kinds of cat) |
| rocket | a Falcon 9 on its launch pad | drilling rig, missile, space shuttle |
| camera | a man filming with a camera on a tripod | tripod |
| motorcycle | a red motorcycle in a garage | moped, motor scooter |

The others (astronaut, coins, moon, hubble_deep_field, clock...) get labels no honest caption
shares ("bobsleigh" for the astronaut's portrait), or are not photographs.

The spec keeps images whose sides are both > 400 px; coffee (600x400) and chelsea (451x300)
are not, so photos with a side <= 400 px are upsampled (Lanczos) to a 480 px short side.

Files. `build_images(directory)` writes each photo as three good JPEGs (VIEWS: as it is,
mirrored, and zoomed into its central 85%; distinct images, so the splits can hold some out for
captioning) plus one variant per image rule (VARIANTS: a PNG, a small copy, a strip,
truncated and corrupt JPEGs, a decompression bomb, a file over the demo's size limit) and the files a crawl finds that are no photo at all
(EXTRA_FILES: an HTML page named .jpg, an empty file). `failure_urls(base_url)` adds the URLs
that fail before any image arrives (FAILURES). The build is deterministic: the same bytes
on every build with the same Pillow.

Candidates. `demo_candidates` is what the demo curates: the generated web alt-texts of
`conceptual_demo.corpus`, each given an image on the demo server by `attach_images` (the
captions do not describe those photos, so the image&text rule rejects them), plus
`fitting_candidates`, the photos with captions that fit them (FITTING_SHARE of the rows).
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
from PIL import Image
from skimage import data

from conceptual_demo import server
from conceptual_demo.corpus import DATA, apportion, generate_candidates

MIN_SIDE = 400  # the image filter's default: both sides must be > 400 px
UPSAMPLED_SIDE = 480  # the short side of photos that were too small for the filter
JPEG_QUALITY = 90
# The demo's fetch.max_bytes: above every file it serves but the "large" variants.
MAX_BYTES = 1_000_000
FETCH_TIMEOUT_S = 1.0  # the demo's fetch.timeout_s: well under server.SLOW_RESPONSE_S
FITTING_SHARE = 0.12  # of the demo's rows: photos with captions that fit them

# ---------------------------------------------------------------------------------------
# Photos and their captions.


@dataclass(frozen=True)
class Photo:
    """A real photograph and the parts of honest captions for it. Every caption is a subject
    (which names what the classifier sees), a setting and an optional context; the contexts
    carry the places, dates and names that hypernymization removes or replaces."""

    name: str
    load: Callable[[], np.ndarray]
    subjects: tuple[str, ...]
    settings: tuple[str, ...]
    contexts: tuple[str, ...]
    # The words by which a caption names this photo's subject (named_scene)
    names: tuple[str, ...]

    def captions(self) -> list[str]:
        """Every combination of the parts, in a fixed order."""
        return [
            " ".join(part for part in parts if part)
            for parts in itertools.product(self.subjects, self.settings, ("", *self.contexts))
        ]


# Each photo's loader; the parts of its captions are data/photo_captions.json's.
LOADERS: dict[str, Callable[[], np.ndarray]] = {
    "coffee": data.coffee,
    "chelsea": data.chelsea,
    "rocket": data.rocket,
    "camera": data.camera,
    "motorcycle": lambda: data.stereo_motorcycle()[0],
}
PHOTOS = tuple(
    Photo(name, LOADERS[name], **{part: tuple(words) for part, words in parts.items()})
    for name, parts in json.loads((DATA / "photo_captions.json").read_text("utf-8")).items()
)
PHOTOS_BY_NAME = {photo.name: photo for photo in PHOTOS}


def named_scene(caption: str) -> str | None:
    """The photo whose subject a caption names (by Photo.names), or None when it names none
    or two alike ("a cat next to a motorcycle")."""
    words = re.findall(r"[a-z]+", caption.lower())
    hits = {photo.name: sum(words.count(name) for name in photo.names) for photo in PHOTOS}
    best = max(hits.values())
    named = [name for name, count in hits.items() if count == best]
    return named[0] if best and len(named) == 1 else None


def load_photo(photo: Photo) -> Image.Image:
    """The photo as RGB, upsampled to a UPSAMPLED_SIDE short side if a side is <= MIN_SIDE."""
    image = Image.fromarray(photo.load()).convert("RGB")
    if min(image.size) <= MIN_SIDE:
        image = _scaled(image, UPSAMPLED_SIDE / min(image.size))
    return image


# ---------------------------------------------------------------------------------------
# Variants: two more good views of the photo (so the dataset has images to hold out), and
# one variant per image rule, each derived from the good photo.


def _scaled(image: Image.Image, factor: float) -> Image.Image:
    width, height = image.size
    return image.resize((round(width * factor), round(height * factor)), Image.LANCZOS)


def encode(image: Image.Image, fmt: str = "JPEG", **options) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **options)
    return buffer.getvalue()


def good_jpeg(image: Image.Image) -> bytes:
    return encode(image, quality=JPEG_QUALITY)


def mirrored(image: Image.Image) -> bytes:
    """The photo flipped left to right: another good photo of the same scene."""
    return good_jpeg(image.transpose(Image.FLIP_LEFT_RIGHT))


def zoomed(image: Image.Image) -> bytes:
    """The central 85% of the photo scaled back to its size: another good photo."""
    width, height = image.size
    dx, dy = round(width * 0.075), round(height * 0.075)
    return good_jpeg(image.resize(image.size, Image.LANCZOS, (dx, dy, width - dx, height - dy)))


def png(image: Image.Image) -> bytes:
    return encode(image, "PNG")


def small(image: Image.Image) -> bytes:
    """320 px long side: both sides must be > 400."""
    return good_jpeg(_scaled(image, 320 / max(image.size)))


def strip(image: Image.Image) -> bytes:
    """A 3:1 band across the middle, 1440x480: large enough, but too long for the ratio <= 2."""
    width, height = image.size
    band_height = width // 3
    top = (height - band_height) // 2
    return good_jpeg(image.crop((0, top, width, top + band_height)).resize((1440, 480)))


def truncated(image: Image.Image) -> bytes:
    """The first 60% of the JPEG: the header is whole, the scan data stops early."""
    jpeg = good_jpeg(image)
    return jpeg[: len(jpeg) * 6 // 10]


def corrupt(image: Image.Image) -> bytes:
    """The JPEG with its scan data's middle third overwritten by 0xFF bytes, which the
    decoder reads as markers where none may be: it gives up on a broken data stream."""
    jpeg = bytearray(good_jpeg(image))
    scan_start = _scan_data_offset(jpeg)
    third = (len(jpeg) - scan_start) // 3
    jpeg[scan_start + third : scan_start + 2 * third] = b"\xff" * third
    return bytes(jpeg)


def bomb(image: Image.Image) -> bytes:
    """A small JPEG whose header claims 60000x60000 px: decoding it would need 10 GB."""
    jpeg = bytearray(small(image))
    size = _segment_offset(jpeg, START_OF_FRAME) + 5  # marker, length, precision, then size
    jpeg[size : size + 4] = (60_000).to_bytes(2, "big") * 2
    return bytes(jpeg)


def large(image: Image.Image) -> bytes:
    """A copy 4000 px long at high quality: a valid photo, but over MAX_BYTES."""
    return encode(_scaled(image, 4000 / max(image.size)), quality=95)


# JPEG markers; Pillow writes baseline JPEGs, whose frame header is SOF0.
START_OF_FRAME = 0xC0
START_OF_SCAN = 0xDA


def _segment_offset(jpeg: bytes | bytearray, marker: int) -> int:
    """Where the header segment `marker` starts, found by walking the segment chain (a byte
    search could hit the same two bytes inside a table)."""
    offset = 2  # after the start-of-image marker
    while jpeg[offset] == 0xFF:
        if jpeg[offset + 1] == marker:
            return offset
        offset += 2 + int.from_bytes(jpeg[offset + 2 : offset + 4], "big")
    raise ValueError(f"no segment 0xFF{marker:02X} in the JPEG header")


def _scan_data_offset(jpeg: bytes | bytearray) -> int:
    scan = _segment_offset(jpeg, START_OF_SCAN)
    return scan + 2 + int.from_bytes(jpeg[scan + 2 : scan + 4], "big")


class Variant(NamedTuple):
    suffix: str  # of the file name
    reason: str | None  # the rejection it is made for; None for the good photo
    make: Callable[[Image.Image], bytes]


VARIANTS: dict[str, Variant] = {
    "good": Variant(".jpg", None, good_jpeg),
    "mirrored": Variant("-mirrored.jpg", None, mirrored),
    "zoomed": Variant("-zoomed.jpg", None, zoomed),
    "png": Variant(".png", "not_jpeg", png),
    "small": Variant("-small.jpg", "too_small", small),
    "strip": Variant("-strip.jpg", "aspect_ratio", strip),
    "truncated": Variant("-truncated.jpg", "truncated", truncated),
    "corrupt": Variant("-corrupt.jpg", "corrupt", corrupt),
    "bomb": Variant("-bomb.jpg", "too_many_pixels", bomb),
    "large": Variant("-large.jpg", "too_large", large),
}

VIEWS = ("good", "mirrored", "zoomed")  # the variants that are good photos
# The split of each view, stated in the candidates file rather than left to the hash: 15
# photos are too few for hashed fractions to be sure of a dev set (one run held out 3). Each
# scene is learned from its photo as it is, chosen on its mirror image and tested on its
# zoomed view: 5 photos in each split, every scene in each.
VIEW_SPLITS = {"good": "train", "mirrored": "val", "zoomed": "test"}

SOFT_404_PAGE = (
    b"<!DOCTYPE html>\n<html><head><title>Page not found</title></head>\n"
    b"<body><h1>Sorry, this photo is no longer available.</h1></body></html>\n"
)

# What a crawl finds under image URLs that is no photo: (file name, content, reason).
EXTRA_FILES: dict[str, tuple[str, bytes, str]] = {
    "soft_404": ("removed.jpg", SOFT_404_PAGE, "not_an_image"),  # an error page with a 200
    "empty": ("empty.jpg", b"", "empty"),
}

# URLs that fail before an image arrives: kind -> (URL, the fetch stage's reason). "{base}"
# is the demo server's base URL. The others reach no other machine: the scheme, the missing
# host and the private addresses are refused before connecting, nothing listens on port 1,
# and no DNS server knows a ".invalid" name (RFC 6761).
FAILURES: dict[str, tuple[str, str]] = {
    "not_found": (f"{{base}}{server.STATUS_PREFIX}404", "http_status"),
    "server_error": (f"{{base}}{server.STATUS_PREFIX}500", "http_status"),
    "redirect_loop": (f"{{base}}{server.REDIRECT_LOOP}", "too_many_redirects"),
    "slow": (f"{{base}}{server.SLOW}", "timeout"),
    "redirect_private": (f"{{base}}{server.REDIRECT_PRIVATE}", "refused_address"),
    "private_address": ("http://192.168.1.10/x.jpg", "refused_address"),
    "unknown_host": ("http://photos.demo.invalid/x.jpg", "dns"),
    "ftp": ("ftp://127.0.0.1/x.jpg", "unsupported_scheme"),
    "closed_port": ("http://127.0.0.1:1/x.jpg", "connection"),
    # no host by the URL Standard, which reads http:///x.jpg as http://x.jpg/, as browsers do
    "no_host": ("http://:80/x.jpg", "invalid_url"),
}

# Image kind -> the reason the pipeline should give ("good": none, or no_label_overlap when
# the caption does not fit).
EXPECTED_REASONS: dict[str, str | None] = {
    **{kind: variant.reason for kind, variant in VARIANTS.items()},
    **{kind: reason for kind, (_, _, reason) in EXTRA_FILES.items()},
    **{kind: reason for kind, (_, reason) in FAILURES.items()},
}


def failure_urls(base_url: str) -> dict[str, str]:
    """kind -> URL of each failure, on the server at `base_url`."""
    return {kind: url.format(base=base_url) for kind, (url, _) in FAILURES.items()}


# ---------------------------------------------------------------------------------------
# The catalogue.


@dataclass(frozen=True)
class ImageFile:
    name: str  # file name in the catalogue's directory, which is also its URL path
    kind: str  # a VARIANTS or EXTRA_FILES key
    photo: str | None  # the photo it derives from; None for EXTRA_FILES

    @property
    def reason(self) -> str | None:
        return EXPECTED_REASONS[self.kind]


@dataclass(frozen=True)
class Catalogue:
    """What build_images wrote, and the fetch.max_bytes the demo must set."""

    directory: Path
    files: tuple[ImageFile, ...]
    max_bytes: int = MAX_BYTES

    def of_kind(self, kind: str) -> list[ImageFile]:
        return [file for file in self.files if file.kind == kind]

    def views(self) -> list[ImageFile]:
        """Every good JPEG: each photo in each of its VIEWS."""
        return [file for file in self.files if file.kind in VIEWS]

    def path(self, file: ImageFile) -> Path:
        return self.directory / file.name


def build_images(directory: str | Path) -> Catalogue:
    """Write every photo's good JPEG and variants, and EXTRA_FILES, into `directory`."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    files = []
    for photo in PHOTOS:
        image = load_photo(photo)
        for kind, variant in VARIANTS.items():
            files.append(ImageFile(photo.name + variant.suffix, kind, photo.name))
            (directory / files[-1].name).write_bytes(variant.make(image))
    for kind, (name, content, _) in EXTRA_FILES.items():
        files.append(ImageFile(name, kind, None))
        (directory / name).write_bytes(content)
    return Catalogue(directory, tuple(files))


def write_captioned_folder(folder: str | Path, captions_per_photo: int) -> Catalogue:
    """The good photos (each scene in its three VIEWS) with captions that fit them, in the
    layout import_captions reads (captions.csv, images/), each photo's split stated
    (VIEW_SPLITS); returns the catalogue."""
    folder = Path(folder)
    catalogue = build_images(folder / "images")
    with open(folder / "captions.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["image", "caption", "split"])
        for file in catalogue.views():
            for caption in PHOTOS_BY_NAME[file.photo].captions()[:captions_per_photo]:
                writer.writerow([file.name, caption, VIEW_SPLITS[file.kind]])
    for file in catalogue.files:
        if file.kind not in VIEWS:
            catalogue.path(file).unlink()
    return catalogue


def fetch_overrides(catalogue: Catalogue) -> list[str]:
    """The curation config overrides the demo's server needs: fetching from 127.0.0.1 (a
    private address, refused by default) as from many hosts, a timeout well under the server's slow reply, one
    retry, and the size limit the "large" variants exceed."""
    return [
        "fetch.allow_hosts=[127.0.0.1]",
        # The one local server stands for the many hosts of a crawl: no per-host cap below
        # the thread pool.
        "fetch.per_host=16",
        f"fetch.timeout_s={FETCH_TIMEOUT_S:g}",
        "fetch.retries=1",
        f"fetch.max_bytes={catalogue.max_bytes}",
    ]


# ---------------------------------------------------------------------------------------
# Candidates.

# Rows whose alt-text is meant to pass the text filters: only these reach the image stages,
# so they get the broken images; the junk rows get good photos.
WELL_FORMED_KINDS = frozenset({"descriptive", "named_entities", "boilerplate_wrapped"})

# Percent of the well-formed rows that get each kind of image. "slow" stays rare: each one
# costs the fetch its timeout on every try.
IMAGE_SHARES: dict[str, float] = {
    "good": 72.3,
    "png": 3.0, "small": 3.0, "strip": 3.0, "truncated": 2.0, "corrupt": 2.0, "bomb": 1.5,
    "large": 1.0, "soft_404": 2.0, "empty": 1.5,
    "not_found": 2.5, "server_error": 1.0, "redirect_loop": 1.0, "slow": 0.2,
    "redirect_private": 0.5, "private_address": 0.5, "unknown_host": 1.5, "ftp": 0.5,
    "closed_port": 0.5, "no_host": 0.5,
}  # fmt: skip


def _urls_by_kind(catalogue: Catalogue, base_url: str) -> dict[str, list[str]]:
    urls = {kind: [url] for kind, url in failure_urls(base_url).items()}
    for file in catalogue.files:
        urls.setdefault(file.kind, []).append(f"{base_url}/{file.name}")
    return urls


def attach_images(
    rows: list[dict], catalogue: Catalogue, base_url: str, seed: int = 0
) -> list[dict]:
    """Copies of generated candidate rows with an image on the demo server instead of their
    made-up URL, and its kind as "image_kind". The well-formed rows get IMAGE_SHARES of
    each image kind exactly (a photo's variant is of a random photo); the others get good
    photos. The captions were not written for the photos, so a good photo's row is what
    the image&text rule rejects."""
    rng = random.Random(seed)
    urls = _urls_by_kind(catalogue, base_url)
    well_formed = [i for i, row in enumerate(rows) if row["kind"] in WELL_FORMED_KINDS]
    counts = apportion(len(well_formed), IMAGE_SHARES)
    kinds = ["good"] * len(rows)
    shuffled = [kind for kind, count in counts.items() for _ in range(count)]
    rng.shuffle(shuffled)
    for i, kind in zip(well_formed, shuffled, strict=True):
        kinds[i] = kind
    return [
        {**row, "image_url": rng.choice(urls[kind]), "image_kind": kind}
        for row, kind in zip(rows, kinds, strict=True)
    ]


def fitting_candidates(catalogue: Catalogue, base_url: str, n: int, seed: int = 0) -> list[dict]:
    """Up to n rows pairing a good photo (any of its views) with a caption written for it,
    the image files in turn. No pair comes twice, so there are at most len(PHOTOS) x
    len(VIEWS) x 125 rows (the fewest captions a photo has)."""
    rng = random.Random(seed)
    captions_per_photo = []
    for file in catalogue.views():
        captions = PHOTOS_BY_NAME[file.photo].captions()
        rng.shuffle(captions)
        captions_per_photo.append([(file, caption) for caption in captions])
    pairs = [pair for turn in zip(*captions_per_photo) for pair in turn]
    return [
        {
            "image_url": f"{base_url}/{file.name}",
            "page_url": f"{base_url}/",
            "alt_text": caption,
            "kind": "fitting",
            "image_kind": "good",
        }
        for file, caption in pairs[:n]
    ]


def demo_candidates(catalogue: Catalogue, base_url: str, n: int, seed: int = 0) -> list[dict]:
    """The demo's n rows, shuffled: FITTING_SHARE of fitting pairs (fewer above about 5,000
    rows, when the pairs run out), and generated web alt-texts with images attached; a row
    whose image is a good view carries that view's split (VIEW_SPLITS)."""
    fitting = fitting_candidates(catalogue, base_url, round(n * FITTING_SHARE), seed)
    rows = attach_images(generate_candidates(n - len(fitting), seed), catalogue, base_url, seed)
    rows += fitting
    random.Random(seed).shuffle(rows)
    splits = {f"{base_url}/{file.name}": VIEW_SPLITS[file.kind] for file in catalogue.views()}
    return [{**row, "split": splits.get(row["image_url"])} for row in rows]
