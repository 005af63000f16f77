"""Common Crawl by name (issue 60, 3): `harvest --crawl CC-MAIN-2025-08 [--files N |
--fraction F] [--kind wat|warc]` on a local Ray, against moto's S3 on 127.0.0.1 holding a
bucket laid out as Common Crawl's (crawl-data/CRAWL/wat.paths.gz and warc.paths.gz, and the
files they list), the listing read with boto3."""

from __future__ import annotations

import gzip

import pyarrow.parquet as pq
import pytest
from web_archives import response, warcinfo, write_archive, write_wat  # tests/web_archives.py

from conceptual import storage

pytestmark = pytest.mark.integration

BASE = "s3://conceptual/harvest-by-crawl"


CRAWL = "CC-MAIN-2025-08"


@pytest.fixture(scope="module")
def common_crawl(s3_endpoint, tmp_path_factory):
    """A bucket named `commoncrawl` on the endpoint, laid out as Common Crawl's: a crawl's
    wat.paths.gz and warc.paths.gz listing its files, relative to the bucket."""
    import boto3

    boto3.client("s3", endpoint_url=s3_endpoint).create_bucket(Bucket="commoncrawl")
    tmp = tmp_path_factory.mktemp("common-crawl")
    listed: dict[str, list[str]] = {"wat": [], "warc": []}
    for n in range(3):
        segment = f"crawl-data/{CRAWL}/segments/1738.{n}"
        warc = write_archive(
            tmp / f"{n}.warc.gz",
            [warcinfo(), response(f"http://site{n}.example/",
                                  f'<img src="/{n}.jpg" alt="a photo from file {n}">'.encode())],
        )  # fmt: skip
        wat = write_wat(warc, tmp / f"{n}.wat.gz")
        for kind, path in (("warc", warc), ("wat", wat)):
            key = f"{segment}/{kind}/CC-MAIN-2025{n:05d}.warc{'.wat' if kind == 'wat' else ''}.gz"
            storage.write_bytes(f"s3://commoncrawl/{key}", path.read_bytes())
            listed[kind].append(key)
    for kind, keys in listed.items():
        listing = gzip.compress("".join(f"{k}\n" for k in keys).encode())
        storage.write_bytes(f"s3://commoncrawl/crawl-data/{CRAWL}/{kind}.paths.gz", listing)
    return listed


def harvested_alts(out: str) -> list[str]:
    fs, _ = storage.resolve(out)
    alts = []
    for path in storage.list_files(f"{out}/candidates"):
        with fs.open_input_file(path) as f:
            alts += pq.read_table(f, columns=["alt_text"])["alt_text"].to_pylist()
    return sorted(alts)


def test_harvest_a_crawl_by_name_its_first_files(common_crawl, ray_local, capsys):
    from conceptual.jobs import harvest

    out = f"{BASE}/crawl-wat"
    assert harvest.main(["--crawl", CRAWL, "--files", "2", "--output", out]) == 0
    assert f"{CRAWL}: 2 WAT files to harvest" in capsys.readouterr().out
    stats = storage.read_json(f"{out}/stats.json")
    assert stats["files"]["read"] == stats["files"]["wat"] == 2
    assert harvested_alts(out) == ["a photo from file 0", "a photo from file 1"]


def test_harvest_a_seeded_fraction_of_a_crawls_warcs(common_crawl, ray_local):
    from conceptual.harvest.crawls import chosen
    from conceptual.jobs import harvest

    out = f"{BASE}/crawl-warc"
    args = ["--crawl", CRAWL, "--kind", "warc", "--fraction", "0.34", "--output", out]
    assert harvest.main([*args, "harvest.crawl_seed=3"]) == 0
    (picked,) = chosen(common_crawl["warc"], None, 0.34, 3)
    n = common_crawl["warc"].index(picked)
    assert storage.read_json(f"{out}/stats.json")["files"]["warc"] == 1
    assert harvested_alts(out) == [f"a photo from file {n}"]


def test_a_crawl_the_bucket_lacks_is_said(common_crawl, ray_local, capsys):
    from conceptual.jobs import harvest

    code = harvest.main(["--crawl", "CC-MAIN-2019-04", "--output", f"{BASE}/none"])
    assert code == 2
    err = capsys.readouterr().err
    assert "crawl CC-MAIN-2019-04: s3://commoncrawl/crawl-data/CC-MAIN-2019-04/wat.paths.gz" in err
    assert "does not exist" in err
