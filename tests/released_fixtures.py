"""The released Conceptual Captions, built on the fly for tests (no network beyond 127.0.0.1):
released captions (../shared/data/cc_val_captions.tsv, as Google released them) paired with
real photos (coco_mini's that pass the paper's image filters) served from a folder, plus
URLs that are gone (404) and one that answers with an HTML page, in the layouts they are
published in:

- Google's TSV: `caption<TAB>url`, no header (Train_GCC-training.tsv), gzip or not;
- Hugging Face's Parquet files, with its card's schema: `unlabeled` (image_url, caption)
  and `labeled` (also labels list<string>, MIDs list<string>, confidence_scores
  list<float64>), split files named like train-00000-of-00002.parquet.

`build` writes the served folder and returns the rows; the writers take the server's URL.
In the labeled rows, every other row has a label that its caption names (the overlap rule
with the dataset's labels keeps it) and the others only labels it does not (rejected).
"""

from __future__ import annotations

import gzip
import hashlib
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

# Nouns the chosen captions name, one of which becomes a label of every other labeled row.
NOUNS = ("dog", "beach", "city", "car", "tree", "water", "house", "flower", "street", "boat")
# Labels no chosen caption names.
ELSEWHERE = ("zebra", "giraffe")
HTML = b"<!DOCTYPE html><html><head><title>Moved</title></head><body>Gone.</body></html>\n"

LABELED = pa.schema(
    [
        ("image_url", pa.string()),
        ("caption", pa.string()),
        ("labels", pa.list_(pa.string())),
        ("MIDs", pa.list_(pa.string())),
        ("confidence_scores", pa.list_(pa.float64())),
    ]
)
UNLABELED = pa.schema([("image_url", pa.string()), ("caption", pa.string())])


@dataclass
class Row:
    caption: str  # as released
    path: str  # the URL's path on the server
    kind: str  # "photo", "gone" (404) or "html"
    labels: list[str] = field(default_factory=list)

    def url(self, base: str) -> str:
        return f"{base}/{self.path}"

    @property
    def mids(self) -> list[str]:
        return [f"/m/0{hashlib.sha1(name.encode()).hexdigest()[:5]}" for name in self.labels]

    @property
    def scores(self) -> list[float]:
        return [round(0.95 - 0.1 * i, 2) for i in range(len(self.labels))]


def released_captions(real_data: Path, n: int) -> list[tuple[str, str]]:
    """(caption, the noun of NOUNS it names) of the first `n` released captions that name one
    and none of ELSEWHERE."""
    chosen = []
    with open(real_data / "cc_val_captions.tsv", encoding="utf-8") as f:
        next(f)  # this copy has a header; the released files have none
        for line in f:
            caption = line.rstrip("\n").split("\t")[0]
            words = set(re.findall(r"[a-z]+", caption))
            noun = next((noun for noun in NOUNS if noun in words), None)
            if noun and not words & set(ELSEWHERE):
                chosen.append((caption, noun))
                if len(chosen) == n:
                    break
    return chosen


def usable_photos(real_data: Path, n: int) -> list[Path]:
    """The first `n` coco_mini photos (by name) that pass the paper's image filters."""
    photos = []
    for path in sorted((real_data / "coco_mini").glob("*2017/*.jpg")):
        with Image.open(path) as image:
            small, large = sorted(image.size)
        if small > 400 and large <= 2 * small:
            photos.append(path)
            if len(photos) == n:
                break
    return photos


def build(real_data: Path, www: Path, photos: int = 16, gone: int = 3) -> list[Row]:
    """The served folder (`photos` photos and an HTML page named like a photo) and the rows:
    the photos', `gone` rows whose URLs answer 404, and the HTML page's."""
    www.mkdir(parents=True, exist_ok=True)
    captions = released_captions(real_data, photos + gone + 1)
    rows = []
    for i, (photo, (caption, noun)) in enumerate(zip(usable_photos(real_data, photos), captions)):
        shutil.copy(photo, www / photo.name)
        labels = [noun, "sky"] if i % 2 == 0 else list(ELSEWHERE)
        rows.append(Row(caption, photo.name, "photo", labels))
    for i, (caption, noun) in enumerate(captions[photos : photos + gone]):
        rows.append(Row(caption, f"gone-{i}.jpg", "gone", [noun]))
    (www / "moved.jpg").write_bytes(HTML)  # served as image/jpeg by its name
    caption, noun = captions[photos + gone]
    rows.append(Row(caption, "moved.jpg", "html", [noun]))
    return rows


def write_tsv(path: Path, rows: list[Row], base: str) -> Path:
    """Google's format; gzip-compressed when the name ends in .gz."""
    data = "".join(f"{row.caption}\t{row.url(base)}\n" for row in rows).encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


def write_parquet(path: Path, rows: list[Row], base: str, labeled: bool) -> Path:
    """A Hugging Face split file of the `labeled` or `unlabeled` config."""
    columns = {"image_url": [row.url(base) for row in rows], "caption": [r.caption for r in rows]}
    if labeled:
        columns.update(
            labels=[row.labels for row in rows],
            MIDs=[row.mids for row in rows],
            confidence_scores=[row.scores for row in rows],
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns, schema=LABELED if labeled else UNLABELED), path)
    return path
