"""Parsing candidate files into candidate rows, one file at a time, without Ray.

Formats (by `fmt`, or by the file's name and first line when fmt is "auto"):
- `cc_tsv`: the released Conceptual Captions format, `alt_text<TAB>image_url`, no header;
- `tsv` / `csv`: a header that names the alt-text and image URL columns (aliases below);
- `jsonl`: one JSON object a line;
- `webdataset`: tar shards (`.tar`, `.tar.gz`) of KEY.jpg/.png/.webp with KEY.txt or
  KEY.json captions, as img2dataset writes them (conceptual.shard_candidates).
Each of these but `cc_tsv` may also carry a `split` column: a row's own split (train, val or
test; empty: the hash decides) is kept instead of its image's hash (conceptual.splits).
(Parquet is read by Ray Data directly; see conceptual.pipelines.dataflow.readers.)

A row that cannot be read is not dropped: it becomes a candidate rejected at stage `read`
with a reason (`malformed_row`, `invalid_utf8`, `invalid_json`, `missing_image_url`,
`too_long`), the raw line in `alt_text` and the file and line in `detail`. A rejection keeps
at most MAX_STORED_CHARS characters of any text (see `storable`).
"""

from __future__ import annotations

import csv
import json
import posixpath
import re
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple

from conceptual.limits import LINE_BYTES
from conceptual.records import Rejection, candidate_id
from conceptual.splits import stated_split

FORMATS = ("auto", "cc_tsv", "tsv", "csv", "jsonl", "parquet", "webdataset")
ALT_TEXT_COLUMNS = ("alt_text", "caption", "text")
IMAGE_URL_COLUMNS = ("image_url", "url")
PAGE_URL_COLUMNS = ("page_url",)
# image bytes (Parquet only): conceptual.jobs.import_coco's `image`, img2dataset's `jpg`
IMAGE_COLUMNS = ("image", "jpg")
# The released Conceptual Captions: the splits its files hold, which their names say
# (Google's Train_GCC-training.tsv and Validation_GCC-1.1.0-Validation.tsv, Hugging Face's
# train-00000-of-00004.parquet), or a `split` column; and the columns of the Hugging Face
# `labeled` config (its card: labels list<string>, MIDs list<string>, confidence_scores
# list<float64>), lowercased.
RELEASED_SPLITS = ("train", "validation")
SPLIT_COLUMNS = ("split",)
LABEL_COLUMNS = ("labels", "mids", "confidence_scores")
READ_STAGE = "read"
READ_REASONS = (
    "malformed_row",
    "invalid_utf8",
    "invalid_json",
    "missing_image_url",
    "too_long",
    # a WebDataset sample (conceptual.shard_candidates): no caption; a member over the limit
    "missing_caption",
    "too_large",
)
# The longest alt-text or URL a candidate may have, and how much of a longer one (or of an
# unreadable line) its rejection keeps: a 50 MB "alt-text" is not a caption.
MAX_STORED_CHARS = 65536


class CandidateFormatError(ValueError):
    """A whole file that cannot be read as candidates (a bad header, an unknown format)."""


# Compressed files are recognised by their first bytes, whatever their names say.
COMPRESSION_MAGIC = {b"\x1f\x8b": "gzip", b"\x28\xb5\x2f\xfd": "zstd"}
COMPRESSION_SUFFIXES = (".gz", ".zst", ".zstd")


def compression_of(head: bytes) -> str | None:
    """The codec ("gzip" or "zstd") of a file that starts with `head`, or None."""
    return next(
        (codec for magic, codec in COMPRESSION_MAGIC.items() if head.startswith(magic)), None
    )


def detect_format(name: str, head: bytes) -> str:
    """The format of a file by its name, else by its (decompressed) first line."""
    stem = name.lower()
    for suffix in COMPRESSION_SUFFIXES:
        stem = stem.removesuffix(suffix)
    ext = posixpath.splitext(stem)[1]
    if ext in (".parquet", ".pq"):
        return "parquet"
    if ext == ".tar":
        return "webdataset"
    if ext in (".jsonl", ".ndjson", ".json"):
        return "jsonl"
    if ext == ".csv":
        return "csv"
    first = head.split(b"\n", 1)[0].decode("utf-8", "replace").strip().lower()
    header = [field.strip() for field in first.split("\t")]
    if any(c in header for c in ALT_TEXT_COLUMNS) and any(c in header for c in IMAGE_URL_COLUMNS):
        return "tsv"
    return "cc_tsv"


def candidate(
    alt_text: Any,
    image_url: Any,
    page_url: Any = None,
    image: bytes | None = None,
    split: Any = None,
) -> dict[str, Any]:
    """One candidate row; `split`, the file's own split for it (splits.stated_split), keeps
    it out of the hash."""
    texts = {
        "image_url": _str_or_none(image_url),
        "page_url": _str_or_none(page_url),
        "alt_text": _str_or_none(alt_text),
    }
    row = {
        "id": candidate_id(texts["image_url"], texts["alt_text"]),
        **texts,
        "image": image or None,
        "stage": None,
        "reason": None,
        "detail": None,
    }
    if problem := unstorable(texts):
        row.update({name: storable(text) for name, text in texts.items() if text is not None})
        row.update(stage=READ_STAGE, reason=problem.reason, detail=problem.detail)
    elif not (row["image_url"] or "").strip() and row["image"] is None:
        row.update(stage=READ_STAGE, reason="missing_image_url", detail="no image URL")
    elif split is not None:
        try:
            row["split"] = stated_split(_str_or_none(split))
        except ValueError as exc:
            row.update(stage=READ_STAGE, reason="malformed_row", detail=str(exc))
    return row


def split_of_name(path: str) -> str | None:
    """The split of RELEASED_SPLITS a file's name says it holds, by the name's first word
    ("Train_GCC-training.tsv", "validation-00000-of-00001.parquet"), else by its folder's
    ("train/part-0.parquet"); None when neither says one ("train0/" is no split)."""
    folder, name = posixpath.split(path.rstrip("/"))
    for part in (name, posixpath.basename(folder)):
        word = re.match(r"([a-z]+)(?![a-z0-9])", part.lower())
        if word and word.group(1) in RELEASED_SPLITS:
            return word.group(1)
    return None


def dataset_labels(
    names: Sequence[str | None] | None,
    mids: Sequence[str | None] | None,
    scores: Sequence[float | None] | None,
) -> tuple[list[dict[str, Any]], Rejection | None]:
    """One row's labels as records.LABEL dicts (the dataset's order; `mid` set, `wnid`
    null), from the `labeled` config's three parallel lists; a Rejection when they differ in
    length, which leaves no way to tell which MID or score is whose."""
    names, mids, scores = names or [], mids or [], scores or []
    if not len(names) == len(mids) == len(scores):
        detail = (
            f"labels, MIDs and confidence_scores differ in length: "
            f"{len(names)}, {len(mids)}, {len(scores)}"
        )
        return [], Rejection("malformed_row", detail)
    labels = [
        {"wnid": None, "name": name, "score": score, "mid": mid}
        for name, mid, score in zip(names, mids, scores)
    ]
    return labels, None


def unstorable(texts: dict[str, str | None]) -> Rejection | None:
    """Why these fields cannot travel as they are: over MAX_STORED_CHARS, or holding a lone
    surrogate (JSON can escape one, "\\ud83d"; Arrow, which holds only UTF-8, refuses it)."""
    for name, text in texts.items():
        if text is None:
            continue
        if len(text) > MAX_STORED_CHARS:
            return Rejection("too_long", f"{name}: {len(text)} characters > {MAX_STORED_CHARS}")
        if not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as exc:
                return Rejection("invalid_utf8", f"{name}: {exc.reason} at character {exc.start}")
    return None


def storable(text: str) -> str:
    """What a rejection keeps of a text: its first MAX_STORED_CHARS characters, with a lone
    surrogate as U+FFFD (a pair of them, as UTF-16 pairs them, is the character it encodes)."""
    text = text[:MAX_STORED_CHARS]
    if text.isascii():
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def unreadable(raw: str, where: str, rejection: Rejection) -> dict[str, Any]:
    raw = storable(raw)
    return {
        "id": candidate_id(None, f"{where}\t{raw}"),
        "image_url": None,
        "page_url": None,
        "alt_text": raw,
        "stage": READ_STAGE,
        "reason": rejection.reason,
        "detail": f"{where}: {rejection.detail}",
    }


def parse(data: bytes, name: str, fmt: str = "auto") -> Iterator[dict[str, Any]]:
    """Candidate rows of one file's bytes. `name` is used for format detection and messages."""
    if fmt == "auto":
        fmt = detect_format(name, data[:4096])
    if fmt == "cc_tsv":
        yield from _parse_cc_tsv(data, name)
    elif fmt in ("tsv", "csv"):
        yield from parse_delimited([data], name, fmt)
    elif fmt == "jsonl":
        yield from _parse_jsonl(data, name)
    else:
        raise CandidateFormatError(f"{name}: format {fmt!r} is not a line format")


def _lines(data: bytes, name: str) -> Iterator[tuple[str, str, Rejection | None]]:
    """(where, text, problem) for each non-blank line; undecodable bytes become U+FFFD and a
    problem, so the caller can reject the row while keeping what it said."""
    for number, raw in enumerate(data.split(b"\n"), start=1):
        raw = raw.removesuffix(b"\r")
        if not raw.strip():
            continue  # blank lines (a trailing newline) are not candidates
        try:
            yield f"{name}:{number}", raw.decode("utf-8"), None
        except UnicodeDecodeError as exc:
            problem = Rejection("invalid_utf8", f"{exc.reason} at byte {exc.start}")
            yield f"{name}:{number}", raw.decode("utf-8", "replace"), problem


def _parse_cc_tsv(data: bytes, name: str) -> Iterator[dict[str, Any]]:
    for where, text, problem in _lines(data, name):
        fields = text.split("\t")
        if problem is None and len(fields) != 2:
            problem = Rejection(
                "malformed_row", f"expected 2 tab-separated fields, got {len(fields)}"
            )
        yield unreadable(text, where, problem) if problem else candidate(fields[0], fields[1])


class LongLine(NamedTuple):
    """A line over the row budget's `line_bytes` (conceptual/limits.py), skipped as it
    streamed past."""

    head: bytes  # its first bytes, for the rejection to show
    size: int  # its length in bytes, without the newline
    limit: int

    def rejection(self, where: str) -> dict[str, Any]:
        why = Rejection("too_long", f"a line of {self.size} bytes, over {self.limit}")
        return unreadable(self.head.decode("utf-8", "replace"), where, why)


class RecordTooLong(Exception):
    """A CSV record ran past the line budget (raised through the csv reader, which then
    cannot go on)."""


class _Feed:
    """The lines a csv reader reads, numbered from 1. The lines of the record being read are
    held (never more than `limit` bytes: past it the feed raises RecordTooLong), so that a
    record that fails over several lines can be read again from its second line: a quote
    left open and a quoted field that runs on look the same to the reader."""

    def __init__(self, pieces: Iterable[bytes | LongLine], limit: int):
        self.lines = _numbered_lines(pieces)
        self.again: deque[tuple[int, int, str | LongLine]] = deque()
        self.limit = limit
        self.next_record()

    def next_record(self) -> None:
        self.record: list[tuple[int, int, str | LongLine]] = []
        self.size = 0

    def read_again(self) -> None:
        """The record's lines but its first, read next."""
        self.again.extendleft(reversed(self.record[1:]))

    def __iter__(self) -> Iterator[str]:
        while item := (self.again.popleft() if self.again else next(self.lines, None)):
            self.record.append(item)
            self.size += item[1]
            if self.size > self.limit:
                raise RecordTooLong(f"a record of over {self.limit} bytes")
            yield item[2]


def _numbered_lines(
    pieces: Iterable[bytes | LongLine],
) -> Iterator[tuple[int, int, str | LongLine]]:
    """(number, bytes, text) of each line of `pieces` (whole lines, or a LongLine), split
    where csv ends a line (LF, CR or CRLF); surrogateescape keeps undecodable bytes visible
    per row instead of failing the file."""
    number = 0
    for piece in pieces:
        for line in [piece] if isinstance(piece, LongLine) else piece.splitlines(keepends=True):
            number += 1
            if isinstance(line, LongLine):
                yield number, line.size, line
            else:
                yield number, len(line), line.decode("utf-8", "surrogateescape")


def parse_delimited(
    pieces: Iterable[bytes | LongLine], name: str, fmt: str, line_bytes: int = LINE_BYTES
) -> Iterator[dict[str, Any]]:
    """Candidate rows of a TSV or CSV file given as a stream of pieces of whole lines (a
    line over `line_bytes` as a LongLine). A quoted CSV field may hold line breaks, so a
    record may run over pieces; one that fails over several lines, or runs over
    `line_bytes`, loses only its first line (`malformed_row`, `too_long`), and reading starts
    again on the next."""
    delimiter = "\t" if fmt == "tsv" else ","
    quoting = csv.QUOTE_MINIMAL if fmt == "csv" else csv.QUOTE_NONE
    feed = _Feed(pieces, line_bytes)

    def records() -> Iterator[list[str]]:
        return csv.reader(iter(feed), delimiter=delimiter, quoting=quoting, strict=True)

    reader = records()
    try:
        header = [h.strip().lower() for h in next(reader)]
    except StopIteration:
        return
    except (csv.Error, RecordTooLong) as exc:
        raise CandidateFormatError(f"{name}: unreadable header: {exc}") from exc
    columns = header_columns(header, name)
    while True:
        feed.next_record()
        reason, problem = "malformed_row", None
        try:
            fields = next(reader)
        except StopIteration:
            return
        except RecordTooLong as exc:
            fields, reason, problem = None, "too_long", str(exc)
        except csv.Error as exc:
            fields, problem = None, str(exc)
        else:
            if len(fields) != len(header) and any(f.strip() for f in fields):
                problem = f"expected {len(header)} fields, got {len(fields)}"
        number, _, line = feed.record[0]
        where = f"{name}:{number}"
        if problem and (len(feed.record) > 1 or reason == "too_long"):
            if len(feed.record) > 1:
                problem += f": a quote opened on this line runs over {len(feed.record)} lines"
            fields = None
            feed.read_again()
            reader = records()  # the one that raised cannot go on
        if isinstance(line, LongLine):
            yield line.rejection(where)
            continue
        if fields is None:
            yield unreadable(line.rstrip("\r\n"), where, Rejection(reason, problem))
            continue
        if not any(f.strip() for f in fields):
            continue
        raw = delimiter.join(fields)
        if any("\udc80" <= ch <= "\udcff" for ch in raw):
            safe = raw.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
            yield unreadable(safe, where, Rejection("invalid_utf8", "bytes that are not UTF-8"))
            continue
        if problem:
            yield unreadable(raw, where, Rejection("malformed_row", problem))
            continue
        yield candidate(**{name: fields[i] for name, i in columns.items() if i is not None})


def header_columns(header: list[str], name: str) -> dict[str, int | None]:
    """Where the alt-text, image URL, page URL and split are in a header (lowercased names)."""
    columns = {
        "alt_text": column_index(header, ALT_TEXT_COLUMNS),
        "image_url": column_index(header, IMAGE_URL_COLUMNS),
        "page_url": column_index(header, PAGE_URL_COLUMNS),
        "split": column_index(header, SPLIT_COLUMNS),
    }
    if columns["alt_text"] is None or columns["image_url"] is None:
        raise CandidateFormatError(
            f"{name}: columns {header} must include an alt-text column ({', '.join(ALT_TEXT_COLUMNS)}) "
            f"and an image URL column ({', '.join(IMAGE_URL_COLUMNS)})"
        )
    return columns


def check_header(head: bytes, name: str, fmt: str) -> None:
    """Fail fast, before any work is scheduled, on a file whose header cannot be used."""
    if fmt in ("tsv", "csv"):
        first = head.split(b"\n", 1)[0].decode("utf-8", "replace")
        header = next(csv.reader([first], delimiter="\t" if fmt == "tsv" else ","), [])
        header_columns([h.strip().lower() for h in header], name)


def _parse_jsonl(data: bytes, name: str) -> Iterator[dict[str, Any]]:
    for where, text, problem in _lines(data, name):
        if problem:
            yield unreadable(text, where, problem)
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError as exc:
            yield unreadable(text, where, Rejection("invalid_json", exc.msg))
            continue
        except (ValueError, RecursionError) as exc:  # an integer of 5,000 digits, [[[[...
            yield unreadable(text, where, Rejection("invalid_json", str(exc)))
            continue
        if not isinstance(record, dict):
            yield unreadable(
                text,
                where,
                Rejection("malformed_row", f"expected a JSON object, got {type(record).__name__}"),
            )
            continue
        lowered = {str(k).lower(): v for k, v in record.items()}
        yield candidate(
            _first(lowered, ALT_TEXT_COLUMNS),
            _first(lowered, IMAGE_URL_COLUMNS),
            _first(lowered, PAGE_URL_COLUMNS),
            split=_first(lowered, SPLIT_COLUMNS),
        )


def column_index(header: list[str], names: tuple[str, ...]) -> int | None:
    """Where the first of `names` is in a header (lowercased names), if any is."""
    return next((header.index(n) for n in names if n in header), None)


def _first(record: dict[str, Any], names: tuple[str, ...]) -> Any:
    return next((record[n] for n in names if n in record), None)


def _str_or_none(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else str(value)
