"""Bring captioned datasets (COCO, a folder of images with a captions CSV) into the platform.

A reader turns a source into `Pair`s, one per (image, caption), the pairs of one image
together; `write_import` streams them into Parquet parts of bounded size, reading each
image's bytes once and holding at most one part in memory:

    OUTPUT/candidates/part-*.parquet  records.IMPORTED, for the curation pipeline (default)
    OUTPUT/curated/part-*.parquet     records.CURATED, for captions that are already clean
    OUTPUT/clips/part-*.parquet       records.CLIP, recorded speech of the images, when the
                                      folder has some (conceptual.speech.human)
    OUTPUT/import.json                what was imported, skipped captions counted by reason
    OUTPUT/_SUCCESS                   written last; its absence means the output is incomplete

Nothing is dropped silently: every input caption is imported or skipped with a reason.

A record's `image_url` is the image's public URL when the source has one (COCO's
`coco_url`), else its path under the dataset's folder (`val2017/000000000139.jpg`,
`images/x.jpg`; `dataset_path`), never a local absolute path: ids (a hash of `image_url` and
the caption), the voices drawn from them, and what search answers show are the same wherever
the folder lies.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import os
import posixpath
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import groupby
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image
from pydantic import Field

from conceptual import storage
from conceptual.candidates import MAX_STORED_CHARS, storable
from conceptual.config import Config
from conceptual.records import CURATED, IMPORTED, Rejection, candidate_id
from conceptual.splits import SplitConfig, assign_split, stated_split

SKIP_REASONS = (
    "missing_image",
    "unreadable_image",
    "outside_dataset",  # an image path that leaves the dataset's folder: ../, /etc/...
    "invalid_file_name",  # an image name no file can have: a NUL byte, not text
    "malformed_row",  # a captions CSV row that cannot be parsed
    "invalid_utf8",  # a captions CSV row holding bytes that are not UTF-8
    "too_long",  # a captions CSV field over MAX_STORED_CHARS
    "empty_caption",
    "duplicate_caption",
)
REPORT = "import.json"
LISTED_SKIPS = 1000  # import.json lists this many skipped captions; the counts cover all
# "captions_train2017.json" -> "train"; "captions_constrained.json" names no split.
SOURCE_SPLIT = re.compile(r"(?<![a-z])(train|val|test)")
QUOTES = {'"', "``", "''", "\u201c", "\u201d"}  # the released captions have no double quotes


class ImportSourceError(ValueError):
    """A source that cannot be imported at all (a missing folder, a bad file); the message
    names it."""


@dataclass(frozen=True)
class Pair:
    image_path: Path | None  # None: the source names no image for this caption
    image_url: str  # a stable locator of the image: its public URL or its dataset_path
    caption: str
    source_split: str | None  # "train", "val" or "test" as the source splits it, if it does
    source_id: str  # where the caption came from, for the report: "captions_val2017.json#9"
    problem: Rejection | None = None  # why the source's row cannot be imported, if it cannot
    # More columns of its curated record, for a schema beyond CURATED (records.LANGUAGE_FIELDS).
    columns: Mapping[str, Any] = field(default_factory=dict, hash=False)


class ImportConfig(Config):
    curated: bool = False  # write curated records instead of candidates
    # "source": the dataset's own split where it has one (COCO), else a hash of the image.
    split_by: Literal["source", "hash"] = "source"
    splits: SplitConfig = SplitConfig()  # fractions of hash splits
    rows_per_part: int = Field(512, ge=1)  # bounds memory: one part is buffered at a time


# Readers


def coco_pairs(annotations: Path | str, images_dir: Path | str) -> Iterator[Pair]:
    """The pairs of a COCO captions file (`captions_val2017.json`) whose photos are in
    `images_dir`. Paths are checked now; the JSON is parsed when iteration starts."""
    annotations, images_dir = existing_file(annotations), existing_dir(images_dir)
    return _coco_pairs(annotations, images_dir)


def _coco_pairs(annotations: Path, images_dir: Path) -> Iterator[Pair]:
    data = _read_coco(annotations)
    # Keep only what the pairs need: the full train2017 JSON holds 590k captions.
    files = {
        image["id"]: (image.get("file_name"), image.get("coco_url")) for image in data["images"]
    }
    captions_of: dict[Any, list[tuple[Any, str]]] = {}
    for caption in data.pop("annotations"):
        text = (caption.get("caption") or "").strip()
        captions_of.setdefault(caption["image_id"], []).append((caption.get("id"), text))
    del data
    split = _source_split(annotations.name)
    for image_id, captions in captions_of.items():
        path, url, problem = None, "", None  # an image id that the images list lacks
        if image_id in files:
            file_name, coco_url = files[image_id]
            path, problem = image_in(images_dir, file_name)
            if not problem:
                url = coco_url or dataset_path(path, absolute(images_dir).parent)
        for caption_id, text in captions:
            yield Pair(path, url, text, split, f"{annotations.name}#{caption_id}", problem)


def _read_coco(annotations: Path) -> dict:
    try:
        data = json.loads(annotations.read_bytes())
    except json.JSONDecodeError as exc:
        raise ImportSourceError(f"{annotations} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict) or not {"images", "annotations"} <= data.keys():
        raise ImportSourceError(f"{annotations} is not a COCO captions file (images, annotations)")
    return data


def coco_sources(root: Path | str) -> list[tuple[Path, Path]]:
    """(annotations, images folder) for each `captions_<split>.json` under a COCO root, in
    COCO's own layout (`annotations/captions_train2017.json` beside `train2017/`) or with the
    JSON files next to the image folders."""
    root = existing_dir(root)
    files = sorted(root.glob("annotations/captions_*.json")) or sorted(root.glob("captions_*.json"))
    if not files:
        raise ImportSourceError(f"no captions_*.json in {root} or {root / 'annotations'}")
    sources = []
    for captions_file in files:
        images_dir = root / captions_file.stem.removeprefix("captions_")
        if not images_dir.is_dir():
            raise ImportSourceError(
                f"{captions_file.name} needs the image folder {images_dir}; "
                "name the splits you have with --annotations and --images instead"
            )
        sources.append((captions_file, images_dir))
    return sources


def csv_pairs(
    folder: Path | str, images_subdir: str = "images", captions_file: str = "captions.csv"
) -> Iterator[Pair]:
    """The pairs of a folder holding `captions_file` (header `image,caption`, one row per
    caption) and the photos it names under `images_subdir`. Paths and header are checked now."""
    folder = existing_dir(folder)
    images_dir = existing_dir(folder / images_subdir)
    rows = _read_captions_csv(existing_file(folder / captions_file))
    return grouped_pairs(rows, images_dir, captions_file)


def _read_captions_csv(
    path: Path,
) -> list[tuple[int, str, str, str | None, Rejection | None]]:
    """(line number, image name, caption, its split, why the row cannot be imported) of each
    row; captions are text, small beside the images, so the whole file is read to group the
    rows by image. A row that cannot be read is kept, with its problem, to be counted. An
    optional `split` column states the image's split (splits.stated_split)."""
    # surrogateescape: undecodable bytes fail their own row, not the file.
    text = path.read_bytes().removeprefix(b"\xef\xbb\xbf").decode("utf-8", "surrogateescape")
    reader = csv.reader(io.StringIO(text, newline=""))
    header = [name.strip().lower() for name in next(reader, [])]
    if "image" not in header or "caption" not in header:
        raise ImportSourceError(f"{path} needs a header naming columns image and caption")
    image_col, caption_col = header.index("image"), header.index("caption")
    split_col = header.index("split") if "split" in header else None
    rows = []
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return rows
        except csv.Error as exc:  # a field over csv's own limit (128 KiB), a NUL byte...
            rows.append((reader.line_num, "", "", None, Rejection("malformed_row", str(exc))))
            continue
        if not any(cell.strip() for cell in row):
            continue  # a blank line holds no caption
        image, caption = _cell(row, image_col), _cell(row, caption_col)
        problem, split = _row_problem(row), None
        if split_col is not None:
            try:
                split = stated_split(_cell(row, split_col))
            except ValueError as exc:
                problem = problem or Rejection("malformed_row", str(exc))
        rows.append((reader.line_num, storable(image), storable(caption), split, problem))


def _row_problem(row: list[str]) -> Rejection | None:
    for cell in row:
        if len(cell) > MAX_STORED_CHARS:
            return Rejection("too_long", f"a field of {len(cell)} characters > {MAX_STORED_CHARS}")
        if any("\udc80" <= ch <= "\udcff" for ch in cell):
            return Rejection("invalid_utf8", "bytes that are not UTF-8")
    return None


def _cell(row: list[str], column: int) -> str:
    return row[column].strip() if column < len(row) else ""  # a short row lacks the column


def grouped_pairs(
    rows: list[tuple[int, str, str, str | None, Rejection | None]], images_dir: Path, name: str
) -> Iterator[Pair]:
    """Pairs of rows (line number, image name, caption, its split, why the row cannot be
    imported) read from the captions file `name`, those of one image together, each image
    checked with image_in; the first split an image's rows state is the image's."""
    by_image: dict[str, list[tuple[int, str, str | None, Rejection | None]]] = {}
    for line, image, caption, split, problem in rows:
        by_image.setdefault(image, []).append((line, caption, split, problem))
    for image, captions in by_image.items():
        path, url, outside = local_image(images_dir, image) if image else (None, "", None)
        # An image's split is the first its rows state: one image, one split.
        split = next((split for _, _, split, _ in captions if split), None)
        for line, caption, _, problem in captions:
            yield Pair(path, url, caption, split, f"{name}:{line}", problem or outside)


def image_in(images_dir: Path, name: Any) -> tuple[Path | None, Rejection | None]:
    """The path of an image a source names, and a problem when it leads out of the images
    folder (`../`, an absolute path, a link to elsewhere: `outside_dataset`), or names no
    file at all (a NUL byte, a lone surrogate, not text: `invalid_file_name`). A dataset may
    name only its own files, or a captions file could have any file the job can read
    imported. Every importer checks the images it opens here (and speech.human its clips)."""
    if not isinstance(name, str) or not name:
        return None, Rejection("invalid_file_name", f"{name!r} is not a file name")
    try:
        os.fsencode(name)
    except UnicodeEncodeError:
        return None, Rejection("invalid_file_name", f"{name!r} cannot be a file name")
    if "\x00" in name:
        return None, Rejection("invalid_file_name", f"{name!r} holds a NUL byte")
    path = images_dir / name
    if not path.resolve().is_relative_to(images_dir.resolve()):
        return path, Rejection("outside_dataset", f"{name!r} is not inside {images_dir}")
    return path, None


def local_image(images_dir: Path, name: Any) -> tuple[Path | None, str, Rejection | None]:
    """image_in's path and problem, with the image's `image_url` between them: its
    dataset_path under the images folder's parent ("" when there is a problem)."""
    path, problem = image_in(images_dir, name)
    url = "" if problem else dataset_path(path, absolute(images_dir).parent)
    return path, url, problem


def dataset_path(path: Path, root: Path) -> str:
    """The `image_url` of a local image without a public URL: its path under the dataset's
    folder `root` (the folder holding the images folder), POSIX, normalized:
    `val2017/000000000139.jpg`. `path` must be inside `root` (image_in checked it)."""
    try:
        return absolute(path).relative_to(root).as_posix()
    except ValueError:  # `..` after a link inside: as the file system resolves it
        return path.resolve().relative_to(root.resolve()).as_posix()


def absolute(path: Path) -> Path:
    """`path` made absolute without resolving links: "." is the folder's own name."""
    return Path(os.path.abspath(path))


def existing_file(path: Path | str) -> Path:
    """`path` (a ~ expanded); an ImportSourceError where no such file is."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise ImportSourceError(f"no such file: {path}")
    return path


def existing_dir(path: Path | str) -> Path:
    """`path` (a ~ expanded); an ImportSourceError where no such folder is."""
    path = Path(path).expanduser()
    if not path.is_dir():
        raise ImportSourceError(f"no such folder: {path}")
    return path


def _source_split(annotations_name: str) -> str | None:
    match = SOURCE_SPLIT.search(annotations_name)
    return match.group(1) if match else None


# Captions


@functools.cache
def _tokenizer():
    # spaCy's rule-based English tokenizer, the one behind the hypernymizer's output, needs
    # no model download; imported here so that candidate imports never pay for spaCy.
    import spacy

    return spacy.blank("en").tokenizer


def released_style(caption: str) -> str:
    """A caption in the style of Conceptual Captions' released captions: lowercase tokens
    joined by spaces, punctuation split off ("it 's", "t - shirt", "nails ? right"), double
    quotes and a final full stop dropped: "A man riding a horse." -> "a man riding a horse"."""
    words = [t.text.lower() for t in _tokenizer()(caption) if not t.is_space]
    words = [w for w in words if w not in QUOTES]
    if words and words[-1] == ".":
        words.pop()
    return " ".join(words)


# Writing


@dataclass
class ImportReport:
    """What an import took in and what it made of it; becomes OUTPUT/import.json."""

    output: str
    images: int = 0
    captions: int = 0
    splits: dict[str, Counter] = field(default_factory=dict)
    skipped: Counter = field(default_factory=lambda: Counter(dict.fromkeys(SKIP_REASONS, 0)))
    skipped_listed: list[dict[str, str]] = field(default_factory=list)

    def skip(self, pair: Pair, rejection: Rejection) -> None:
        self.skipped[rejection.reason] += 1
        if len(self.skipped_listed) < LISTED_SKIPS:
            self.skipped_listed.append(
                {
                    "source_id": pair.source_id,
                    "image": str(pair.image_path or ""),
                    "reason": rejection.reason,
                    "detail": rejection.detail,
                }
            )

    def counts(self) -> dict[str, int]:
        skipped = sum(self.skipped.values())
        return {
            "input_captions": self.captions + skipped,
            "images": self.images,
            "captions": self.captions,
            "skipped": skipped,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "output": self.output,
            **self.counts(),
            "splits": {
                name: {"images": n["images"], "captions": n["captions"]}
                for name, n in sorted(self.splits.items())
            },
            "skipped_by_reason": dict(self.skipped),
            "skipped_captions": self.skipped_listed,
        }


class PartWriter:
    """Rows to `part-00000.parquet`, `part-00001.parquet`, ... under a folder, at most
    `rows_per_part` rows each, one part buffered at a time."""

    def __init__(self, uri: str, schema: pa.Schema, rows_per_part: int):
        self.uri, self.schema, self.rows_per_part = uri, schema, rows_per_part
        self.rows: list[dict[str, Any]] = []
        self.parts = 0

    def add(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        if len(self.rows) >= self.rows_per_part:
            self.flush()

    def flush(self) -> None:
        if not self.rows:
            return
        fs, path = storage.resolve(storage.join(self.uri, f"part-{self.parts:05d}.parquet"))
        fs.create_dir(posixpath.dirname(path), recursive=True)
        pq.write_table(pa.Table.from_pylist(self.rows, schema=self.schema), path, filesystem=fs)
        self.rows, self.parts = [], self.parts + 1


def read_photo_file(pair: Pair) -> tuple[bytes, tuple[int, int]] | Rejection:
    """The image's bytes and (width, height) from its header, or why it cannot be had."""
    if pair.image_path is None:
        return Rejection("missing_image", f"the source names no image for {pair.source_id}")
    try:
        data = pair.image_path.read_bytes()
    except FileNotFoundError:
        return Rejection("missing_image", f"no file {pair.image_path}")
    except OSError as exc:
        return Rejection("unreadable_image", f"{pair.image_path}: {exc.strerror or exc}")
    try:
        with Image.open(io.BytesIO(data)) as image:  # reads the header only, decodes nothing
            return data, image.size
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
        return Rejection("unreadable_image", f"{pair.image_path}: {exc}")


def caption_rejection(caption: str, seen: set[str]) -> Rejection | None:
    """Why a caption (raw, or in the released style for curated imports) cannot be imported
    for an image whose captions so far are `seen`: a repeat would repeat the record's id."""
    if not caption:
        return Rejection("empty_caption", "no words in the caption")
    if caption in seen:
        return Rejection("duplicate_caption", "the image already has this caption")
    return None


def write_import(
    pairs: Iterable[Pair],
    output_uri: str,
    config: ImportConfig | None = None,
    then: Callable[[str], dict[str, Any]] | None = None,
    *,
    caption_style: Callable[[str], str] = released_style,
    curated_schema: pa.Schema = CURATED,
    sections: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Write the pairs under `output_uri` (layout in the module docstring); return the
    content of import.json. Pairs of one image must come together, as the readers yield them.
    `then(output_uri)` runs after the records are written (attaching recorded speech,
    conceptual.speech.human); its result goes into import.json under "speech".
    For another language: `caption_style` makes a curated caption of a source's text,
    `curated_schema` holds the pairs' `columns` too, and `sections` are what the reader
    counted itself, added to import.json."""
    config = config or ImportConfig()
    kind, schema = ("curated", curated_schema) if config.curated else ("candidates", IMPORTED)
    # A previous run's marker goes first: from here on, the output is visibly incomplete.
    storage.delete(storage.join(output_uri, storage.SUCCESS))
    for stale in ("candidates", "curated", "clips", REPORT):
        storage.delete(storage.join(output_uri, stale))

    parts = PartWriter(storage.join(output_uri, kind), schema, config.rows_per_part)
    report = ImportReport(output=storage.join(output_uri, kind))
    for _, image_pairs in groupby(pairs, key=lambda pair: pair.image_path):
        _import_image(list(image_pairs), config, parts, report, caption_style)
    parts.flush()

    result = report.to_json() | dict(sections or {})
    if then is not None:
        result["speech"] = then(output_uri)
    storage.write_json(storage.join(output_uri, REPORT), result)
    storage.write_json(storage.join(output_uri, storage.SUCCESS), report.counts())
    return result


def _import_image(
    pairs: list[Pair],
    config: ImportConfig,
    parts: PartWriter,
    report: ImportReport,
    style: Callable[[str], str] = released_style,
) -> None:
    for pair in pairs:
        if pair.problem:
            report.skip(pair, pair.problem)
    pairs = [pair for pair in pairs if not pair.problem]
    if not pairs:
        return
    image = read_photo_file(pairs[0])
    if isinstance(image, Rejection):
        for pair in pairs:
            report.skip(pair, image)
        return
    data, (width, height) = image
    split = pairs[0].source_split if config.split_by == "source" else None
    split = split or assign_split(data, config.splits)
    seen: set[str] = set()
    for pair in pairs:
        caption = style(pair.caption) if config.curated else pair.caption
        rejection = caption_rejection(caption, seen)
        if rejection:
            report.skip(pair, rejection)
            continue
        seen.add(caption)
        if config.curated:
            parts.add(curated_row(pair, data, caption, (width, height), split))
            report.splits.setdefault(split, Counter())["captions"] += 1
        else:  # the source's own split, for the curation to keep; else its hash decides
            stated = pair.source_split if config.split_by == "source" else None
            parts.add(candidate_row(pair, data) | {"split": stated})
        report.captions += 1
    if seen:
        report.images += 1
        if config.curated:
            report.splits[split]["images"] += 1


def candidate_row(pair: Pair, image: bytes) -> dict[str, Any]:
    return {
        "id": candidate_id(pair.image_url, pair.caption),
        "image_url": pair.image_url,
        "page_url": None,
        "alt_text": pair.caption,
        "image": image,
    }


def curated_row(
    pair: Pair, image: bytes, caption: str, size: tuple[int, int], split: str
) -> dict[str, Any]:
    """A curated record of a caption that needs no curation: nothing replaced, no labels."""
    width, height = size
    return candidate_row(pair, image) | {
        "caption": caption,
        "entities": [],
        "types": [],
        "labels": [],
        "matched": [],
        "width": width,
        "height": height,
        "split": split,
        **pair.columns,
    }


def summary(report: dict[str, Any]) -> str:
    """A few lines for people: where the import went and what it counted."""
    lines = [
        f"imported: {report['output']}  ({report['images']} images, "
        f"{report['captions']} captions of {report['input_captions']})"
    ]
    for name, counts in report["splits"].items():
        lines.append(f"  {name}: {counts['images']} images, {counts['captions']} captions")
    skipped = ", ".join(f"{r} {n}" for r, n in report["skipped_by_reason"].items() if n)
    lines.append(f"skipped:  {report['skipped']} captions{f' ({skipped})' if skipped else ''}")
    return "\n".join(lines)
