"""WebDataset shards as candidate rows, one shard at a time, without Ray.

A shard is a tar file (plain, or gzipped: `.tar.gz`) whose members are grouped into samples
by key, as `webdataset` groups them: a member's key is its name up to the first dot of its
last part, its extension the rest (`000000012.jpg`, `000000012.txt`, `000000012.json`), and a
sample's members come one after another. This is what img2dataset writes
(`output_format=webdataset`: KEY.jpg, KEY.txt, KEY.json with url, caption, status, key,
width, height...), what the Hugging Face `*-wds` mirrors hold and what the curation's own
shards hold (pipelines/curation/shards.py: KEY.jpg, KEY.txt, KEY.json with image_url, alt_text,
split...).

Each sample is one candidate, with its image bytes when it has one (`jpg`, `jpeg`, `png` or
`webp`: the first of them), so its image is not fetched again; it still goes through every
image check (decoding, size, JPEG-only, unsafe content). Its alt-text is the JSON's
`alt_text`, else the `.txt` member, else the JSON's `caption` or `text` (the curation's own
shards hold the curated caption in `.txt` and the alt-text it came from in the JSON: a
curation reads the alt-text); its URL the JSON's `url`/`image_url`, its page the JSON's
`page_url`, its split the JSON's `split`. Other members (`.cls`, `.npy`, ...) are not read. A sample that cannot be a candidate becomes one rejected at stage `read`
(`missing_caption`, `invalid_json`, `invalid_utf8`, `too_large` past `max_bytes`); a shard
that stops being readable part way (truncated, corrupt) gives the samples before the break
and one `malformed_row` rejection that says where it broke. A file that is no tar, or whose
first sample has no caption, is refused as a whole before any work (`check_shard`).
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
import tarfile
import zlib
from collections.abc import Iterator
from typing import IO, Any

from conceptual.candidates import (
    ALT_TEXT_COLUMNS,
    IMAGE_URL_COLUMNS,
    PAGE_URL_COLUMNS,
    SPLIT_COLUMNS,
    CandidateFormatError,
    candidate,
    unreadable,
)
from conceptual.records import Rejection, candidate_id

IMAGE_EXTENSIONS = ("jpg", "jpeg", "png", "webp")
CAPTION_EXTENSIONS = ("txt", "json")
# webdataset's base_plus_ext: the key is the name up to the first dot of its last part
_KEY = re.compile(r"^((?:.*/|)[^./][^.]*)\.([^/]*)$")
# What a shard that fails part way raises: a truncated tar (ReadError, EOFError), a broken
# gzip stream (zlib.error, OSError), a member header that does not parse (HeaderError).
BROKEN = (tarfile.TarError, EOFError, zlib.error, OSError)


class _Large(int):
    """A member not read, being over the limit: its size."""


def _members(tar: tarfile.TarFile, max_bytes: int) -> Iterator[tuple[str, dict[str, Any]]]:
    """(key, {extension: bytes or _Large}) of each sample, in the shard's order."""
    key, sample = None, {}
    for info in tar:
        if not info.isfile():
            continue
        match = _KEY.match(info.name)
        if match is None:  # no extension, or hidden (`.DS_Store`): no sample's member
            continue
        name, ext = match.group(1), match.group(2).lower()
        if name != key:
            if key is not None:
                yield key, sample
            key, sample = name, {}
        if ext not in IMAGE_EXTENSIONS + CAPTION_EXTENSIONS or ext in sample:
            continue
        if info.size > max_bytes:
            sample[ext] = _Large(info.size)
            continue
        member = tar.extractfile(info)
        sample[ext] = member.read() if member is not None else b""
    if key is not None:
        yield key, sample


def shard_rows(stream: IO[bytes], name: str, max_bytes: int) -> Iterator[dict[str, Any]]:
    """The candidate rows of one shard read from `stream` (module docstring); `name` names
    the shard in rejections."""
    read = 0
    try:
        with tarfile.open(fileobj=stream, mode="r|*") as tar:
            for key, sample in _members(tar, max_bytes):
                read += 1
                yield sample_row(sample, f"{name}:{key}", max_bytes)
            if not _rest_is_empty(tar):
                raise tarfile.ReadError("a member header that does not parse")
    except BROKEN as exc:
        why = Rejection("malformed_row", f"the shard breaks after {read} samples: {exc}")
        yield unreadable(f"{name} after sample {read}", name, why)


def _rest_is_empty(tar: tarfile.TarFile) -> bool:
    """Whether only zeros follow where the tar stopped: tarfile ends its members quietly at
    a header that does not parse (a member corrupt in the middle of the shard) as it does at
    the end-of-archive blocks."""
    while block := tar.fileobj.read(1 << 20):
        if block.strip(b"\0"):
            return False
    return True


def sample_row(sample: dict[str, Any], where: str, max_bytes: int) -> dict[str, Any]:
    """One sample as a candidate, or as one rejected at stage `read` saying why."""
    meta: dict[str, Any] = {}
    if "json" in sample:
        raw = sample["json"]
        if isinstance(raw, _Large):
            return _rejected(where, "too_large", f"its JSON is {raw} bytes, over {max_bytes}")
        try:
            parsed = json.loads(raw)
        except (ValueError, RecursionError) as exc:  # bad JSON, bad UTF-8, [[[[...
            return _rejected(where, "invalid_json", str(exc)[:500])
        if not isinstance(parsed, dict):
            return _rejected(where, "invalid_json", f"a JSON {type(parsed).__name__}, no object")
        meta = {str(k).lower(): v for k, v in parsed.items()}
    alt_text = _first(meta, ALT_TEXT_COLUMNS)
    if "txt" in sample and meta.get("alt_text") is None:
        raw = sample["txt"]
        if isinstance(raw, _Large):
            return _rejected(where, "too_large", f"its caption is {raw} bytes, over {max_bytes}")
        try:
            alt_text = raw.decode("utf-8").strip()
        except UnicodeDecodeError as exc:
            return _rejected(where, "invalid_utf8", f"{exc.reason} at byte {exc.start}")
    if alt_text is None:
        found = ", ".join(f".{ext}" for ext in sample) or "nothing"
        return _rejected(where, "missing_caption", f"no .txt and no caption in .json ({found})")
    image = next((sample[ext] for ext in IMAGE_EXTENSIONS if ext in sample), None)
    if isinstance(image, _Large):
        return _rejected(where, "too_large", f"its image is {image} bytes, over {max_bytes}")
    url = _first(meta, IMAGE_URL_COLUMNS)
    row = candidate(
        alt_text, url, _first(meta, PAGE_URL_COLUMNS), image, _first(meta, SPLIT_COLUMNS)
    )
    if url is None and image is not None and row["reason"] is None:
        # no URL to tell it by: its image is what it is (two such samples with the same
        # caption are not one candidate unless their images are the same)
        row["id"] = candidate_id(hashlib.sha1(image).hexdigest(), row["alt_text"])
    return row


def _rejected(where: str, reason: str, detail: str) -> dict[str, Any]:
    return unreadable(where, where, Rejection(reason, detail))


def _first(meta: dict[str, Any], names: tuple[str, ...]) -> Any:
    value = next((meta[n] for n in names if meta.get(n) is not None), None)
    return value if value is None or isinstance(value, str) else str(value)


def check_shard(stream: IO[bytes], name: str) -> None:
    """Fail fast, before any work is scheduled, on a file that is no tar, holds no sample,
    or whose first sample has no caption (a WebDataset of images alone is no candidates).
    Reads only the first sample's members."""
    try:
        with tarfile.open(fileobj=stream, mode="r|*") as tar:
            first = next(_members(tar, 1 << 62), None)
    except BROKEN as exc:
        raise CandidateFormatError(f"{name} is not a tar file (a WebDataset shard): {exc}") from exc
    if first is None:
        raise CandidateFormatError(f"{name}: a tar file with no samples (KEY.jpg, KEY.txt...)")
    key, sample = first
    has_caption = "txt" in sample or (
        "json" in sample and _json_caption(sample["json"]) is not None
    )
    if not has_caption:
        found = ", ".join(f"{posixpath.basename(key)}.{ext}" for ext in sample) or "no members"
        raise CandidateFormatError(
            f"{name}: its first sample has no caption ({found}): a WebDataset shard of "
            "candidates needs KEY.txt, or KEY.json with a caption, beside each KEY.jpg "
            "(img2dataset writes them with save_caption and a caption_col)"
        )


def _json_caption(raw: bytes) -> str | None:
    try:
        meta = json.loads(raw)
    except (ValueError, RecursionError):
        return "unreadable: rejected per sample"  # the sample's own problem, not the file's
    if not isinstance(meta, dict):
        return None
    return _first({str(k).lower(): v for k, v in meta.items()}, ALT_TEXT_COLUMNS)
