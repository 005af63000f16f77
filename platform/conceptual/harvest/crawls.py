"""Common Crawl by name: the files of a crawl to harvest (`harvest --crawl CC-MAIN-2025-08`).

Each monthly crawl lists its files in `crawl-data/CRAWL/wat.paths.gz` and `warc.paths.gz`
(gzipped text, one path a line, relative to the bucket's root: about 90,000 WAT files and as
many WARCs). The list is read with boto3 (storage.get_object) from `s3://commoncrawl`, or
from `harvest.crawl_root`, a mirror laid out the same way (a local folder too), and the files
harvested are its first `files`, or a `fraction` of them drawn with `seed` (kept in the
list's order), as cc2dataset's `wat_count` draws them: the same seed, the same files.
"""

from __future__ import annotations

import gzip
import random
import re
import zlib

from conceptual import storage
from conceptual.storage import StorageError

COMMON_CRAWL = "s3://commoncrawl"
LISTS = {"wat": "wat.paths.gz", "warc": "warc.paths.gz"}
CRAWL_NAME = re.compile(r"CC-MAIN-\d{4}-\d{2}")
CRAWLS = "https://index.commoncrawl.org/collinfo.json"  # where the crawls' names are listed


def listing(crawl: str, kind: str = "wat", root: str = COMMON_CRAWL) -> str:
    """The URI of a crawl's list of files of `kind` (wat or warc)."""
    if not CRAWL_NAME.fullmatch(crawl):
        raise StorageError(
            f"{crawl!r} is no crawl's name: CC-MAIN-YYYY-WW, e.g. CC-MAIN-2025-08 ({CRAWLS})"
        )
    if kind not in LISTS:
        raise StorageError(f"--kind {kind!r}: one of {', '.join(LISTS)}")
    return storage.join(root, "crawl-data", crawl, LISTS[kind])


def crawl_files(
    crawl: str,
    kind: str = "wat",
    root: str = COMMON_CRAWL,
    files: int | None = None,
    fraction: float | None = None,
    seed: int = 0,
) -> list[str]:
    """The URIs of the crawl's files to harvest (module docstring): all of them, the first
    `files`, or a `fraction` drawn with `seed`."""
    uri = listing(crawl, kind, root)
    try:
        data = storage.get_object(uri)
    except StorageError as exc:
        raise StorageError(f"crawl {crawl}: {exc} (is the name right? {CRAWLS})") from exc
    try:
        text = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
    except (OSError, EOFError, zlib.error) as exc:
        raise StorageError(f"{uri} does not read as gzip: {exc}") from exc
    paths = [line.strip() for line in text.decode("utf-8", "replace").splitlines()]
    paths = [p for p in paths if p]
    if not paths:
        raise StorageError(f"{uri} lists no files")
    return [storage.join(root, path) for path in chosen(paths, files, fraction, seed)]


def chosen(paths: list[str], files: int | None, fraction: float | None, seed: int) -> list[str]:
    """The first `files` of `paths`; or round(fraction x len) of them, at least one, drawn
    with `seed` and kept in their order; else all."""
    if files is not None and fraction is not None:
        raise ValueError("files or fraction, not both")
    if files is not None:
        if files < 1:
            raise ValueError(f"files={files}: at least 1")
        return paths[:files]
    if fraction is None:
        return paths
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction={fraction}: in (0, 1]")
    count = max(1, round(len(paths) * fraction))
    picked = sorted(random.Random(seed).sample(range(len(paths)), count))
    return [paths[i] for i in picked]
