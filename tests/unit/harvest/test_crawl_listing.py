"""Common Crawl by name (issue 60, 3), without Ray: a crawl's list of WAT or WARC files read
from a mirror laid out as its bucket (a local folder), its first files or a seeded fraction
of them, and the wrong names said."""

from __future__ import annotations

import gzip

import pytest

from conceptual import storage
from conceptual.harvest.crawls import chosen, crawl_files
from conceptual.storage import StorageError


def common_crawl_mirror(root, crawl: str, kind: str, count: int) -> list[str]:
    """A folder laid out as Common Crawl's bucket: crawl-data/CRAWL/KIND.paths.gz listing
    `count` paths under crawl-data/CRAWL/segments/ (the files themselves are not needed)."""
    folder = "wat" if kind == "wat" else "warc"
    suffix = ".warc.wat.gz" if kind == "wat" else ".warc.gz"
    paths = [
        f"crawl-data/{crawl}/segments/1738.{n // 4}/{folder}/CC-MAIN-2025-{n:05d}{suffix}"
        for n in range(count)
    ]
    listing = root / "crawl-data" / crawl / f"{kind}.paths.gz"
    listing.parent.mkdir(parents=True, exist_ok=True)
    listing.write_bytes(gzip.compress(("\n".join(paths) + "\n").encode()))
    return paths


def test_a_crawl_by_name_lists_its_first_files_or_a_seeded_fraction(tmp_path):
    wats = common_crawl_mirror(tmp_path, "CC-MAIN-2025-08", "wat", 40)
    warcs = common_crawl_mirror(tmp_path, "CC-MAIN-2025-08", "warc", 40)
    root = str(tmp_path)
    first = crawl_files("CC-MAIN-2025-08", "wat", root, files=3)
    assert first == [storage.join(root, p) for p in wats[:3]]
    assert crawl_files("CC-MAIN-2025-08", "warc", root, files=2)[1].endswith(warcs[1])
    drawn = crawl_files("CC-MAIN-2025-08", "wat", root, fraction=0.25, seed=7)
    assert len(drawn) == 10 and drawn == sorted(drawn, key=lambda u: wats.index(u[len(root) + 1 :]))
    assert drawn == crawl_files("CC-MAIN-2025-08", "wat", root, fraction=0.25, seed=7)
    assert drawn != crawl_files("CC-MAIN-2025-08", "wat", root, fraction=0.25, seed=8)
    assert len(crawl_files("CC-MAIN-2025-08", "wat", root)) == 40
    assert chosen(wats, None, 0.001, 0) and len(chosen(wats, None, 1.0, 0)) == 40


def test_a_wrong_crawl_name_or_kind_is_said():
    with pytest.raises(StorageError, match="no crawl's name: CC-MAIN-YYYY-WW"):
        crawl_files("2025-08")
    with pytest.raises(StorageError, match="--kind 'wet'"):
        crawl_files("CC-MAIN-2025-08", "wet")


def test_a_crawl_the_mirror_lacks_is_said_with_its_listing(tmp_path):
    with pytest.raises(StorageError, match=r"crawl CC-MAIN-2019-01: .*wat.paths.gz does not exist"):
        crawl_files("CC-MAIN-2019-01", "wat", str(tmp_path))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "one of --input (web archives) or --crawl"),
        (["--input", "a.warc.gz", "--crawl", "CC-MAIN-2025-08"], "one of --input"),
        (["--input", "a.warc.gz", "--files", "2"], "--files and --fraction choose among a --crawl"),
        (["--crawl", "CC-MAIN-2025-08", "--files", "2", "--fraction", ".1"], "not allowed with"),
        (["--crawl", "CC-MAIN-2025-08", "--fraction", "2"], "--fraction 2.0: more than 0"),
        (["--crawl", "CC-MAIN-2025-08", "--files", "0"], "--files 0: at least 1"),
        (["--crawl", "CC-MAIN-2025-08", "--kind", "wet"], "invalid choice: 'wet'"),
    ],
)
def test_the_harvest_job_says_what_is_wrong_with_its_crawl_arguments(
    args, message, tmp_path, capsys
):
    from conceptual.jobs import harvest

    (tmp_path / "a.warc.gz").write_bytes(b"")
    args = [str(tmp_path / a) if a == "a.warc.gz" else a for a in args]
    with pytest.raises(SystemExit) as stopped:
        harvest.main([*args, "--output", str(tmp_path / "out")])
    assert stopped.value.code == 2 and message in capsys.readouterr().err
