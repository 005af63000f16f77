"""A real crawl, harvested (issue 47, 3): a small site of Flickr8k-mini photos served on
127.0.0.1, crawled by GNU wget's own WARC writer, harvested from S3, and a WAT of the same
pages in Common Crawl's JSON layout (tests/web_archives.py) harvested from a local glob:
the same pairs come out of both. Then `curate`, fetching the images, accounts for every
candidate once, and its kept records carry their page."""

from __future__ import annotations

import csv
import html
import json
import shutil
import subprocess

import pyarrow.parquet as pq
import pytest
from PIL import Image
from web_archives import write_wat  # tests/web_archives.py

from conceptual import storage
from conceptual.config import load
from conceptual.pipelines.curation import curation
from conceptual.pipelines.curation import harvest as harvesting
from conceptual.pipelines.curation.curation_config import CurationConfig
from conceptual_demo.server import serve_directory

pytestmark = [pytest.mark.integration, pytest.mark.realdata]

PHOTOS = 8
OPTED_OUT = 7  # the page that says noimageindex
S3_CRAWL = "s3://conceptual/harvest-crawl"


def build_site(real_data, site) -> dict[int, tuple[str, str]]:
    """Pages p0..p7, one photo each with its first caption as alt-text (HTML-escaped), an
    image without alt, the same image twice, a fake image in a script; some pages through
    a <base href>; p7 opted out; index.html links them all and a page that is not there.
    Returns {page: (photo file, alt-text)} of the captioned photos."""
    source = real_data / "flickr8k_mini"
    first: dict[str, str] = {}
    for row in csv.DictReader(open(source / "captions.csv", encoding="utf-8")):
        first.setdefault(row["image"], " ".join(row["caption"].replace(" .", "").split()))
    names = sorted(first)[:PHOTOS]
    (site / "img").mkdir(parents=True)
    links, captioned = ['<a href="missing.html">gone</a>'], {}
    for i, name in enumerate(names):
        with Image.open(source / "images" / name) as image:
            image = image.convert("RGB")
            scale = 640 / min(image.size)
            size = (round(image.width * scale), round(image.height * scale))
            image.resize(size).save(site / "img" / name, quality=90)
        alt = html.escape(first[name])
        head = '<base href="/img/">' if i % 2 else ""
        src = name if i % 2 else f"img/{name}"
        if i == OPTED_OUT:
            head += '<meta name="robots" content="noimageindex, nofollow">'
        else:
            captioned[i] = (name, first[name])
        (site / f"p{i}.html").write_text(
            f"<html lang='en'><head>{head}<script>var t = '<img src=\"fake.jpg\" alt=\"fake\">';"
            f'</script></head><body><img src="{src}" alt="{alt}"><img src="{src}">'
            f'<img src="{src}" alt="{alt}"></body></html>'
        )
        links.append(f'<a href="p{i}.html">{i}</a>')
    (site / "index.html").write_text("<html><body>" + "".join(links) + "</body></html>")
    return captioned


@pytest.fixture(scope="module")
def crawl(real_data, ray_local, tmp_path_factory):
    """The site served, crawled into crawl.warc.gz (copied to S3) and its WAT; the server
    stays up for curate's fetches."""
    if shutil.which("wget") is None:
        pytest.skip("wget is not installed (Debian package wget)")
    tmp = tmp_path_factory.mktemp("harvest-crawl")
    captioned = build_site(real_data, tmp / "site")
    with serve_directory(tmp / "site") as server:
        subprocess.run(
            [
                "wget",
                "-q",
                "--recursive",
                "--level=1",
                "--no-parent",
                "--no-directories",  # as the README writes it: no mirror left beside the WARC
                "--delete-after",
                "--warc-file=crawl",
                f"{server.url}/index.html",
            ],  # fmt: skip
            cwd=tmp,
            timeout=120,
            check=False,  # wget exits 8 for the page that is not there
        )
        warc = tmp / "crawl.warc.gz"
        assert warc.is_file(), "wget wrote no WARC"
        storage.write_bytes(f"{S3_CRAWL}/crawl.warc.gz", warc.read_bytes())
        (tmp / "wat").mkdir()
        write_wat(warc, tmp / "wat" / "crawl.wat.gz")
        yield {"tmp": tmp, "url": server.url, "captioned": captioned}


@pytest.fixture(scope="module")
def harvested(crawl):
    config = harvesting.HarvestConfig()
    tmp = crawl["tmp"]
    from_warc, _ = harvesting.run([f"{S3_CRAWL}/"], str(tmp / "from-warc"), config)
    from_wat, _ = harvesting.run([str(tmp / "wat" / "*.wat.gz")], str(tmp / "from-wat"), config)
    return {"warc": from_warc, "wat": from_wat}


def rows_under(folder) -> list[dict]:
    return [r for path in sorted(folder.rglob("*.parquet")) for r in pq.read_table(path).to_pylist()]  # fmt: skip


def test_wget_warc_and_its_wat_give_the_same_pairs(crawl, harvested):
    tmp, url = crawl["tmp"], crawl["url"]
    expected = {
        (alt, f"{url}/img/{name}", f"{url}/p{i}.html")
        for i, (name, alt) in crawl["captioned"].items()
    }
    for output in ("from-warc", "from-wat"):
        rows = rows_under(tmp / output / "candidates")
        assert {(r["alt_text"], r["image_url"], r["page_url"]) for r in rows} == expected, output
        assert len(rows) == len(expected)
        assert all(r["source"] and r["record_offset"] is not None for r in rows)
    warc_stats, wat_stats = harvested["warc"], harvested["wat"]
    assert (warc_stats["files"]["warc"], wat_stats["files"]["wat"]) == (1, 1)
    for stats in (warc_stats, wat_stats):
        images = stats["images"]
        assert images["harvested"] == len(expected)
        assert images["not_harvested"] == {
            "no_alt": PHOTOS - 1,
            "duplicate_in_page": PHOTOS - 1,
            "opted_out": 3,
        }
        assert stats["records"]["html_pages"] == PHOTOS + 1  # and the index
        assert stats["records"]["skipped"]["not_2xx"] == 2  # missing.html, robots.txt
        # wget's requests (and in the WAT their metadata, and its warcinfo): not responses
        assert set(stats["records"]["skipped"]) == {"not_2xx", "not_response"}
    assert rows_under(tmp / "from-warc" / "candidates")[0]["lang"] == "en"
    assert storage.exists(str(tmp / "from-warc" / storage.SUCCESS))


def test_curate_accounts_for_every_harvested_candidate(crawl, harvested):
    tmp = crawl["tmp"]
    candidates = {r["id"]: r for r in rows_under(tmp / "from-warc" / "candidates")}
    config = load(
        CurationConfig,
        overrides=["fetch.allow_hosts=[127.0.0.1]", "entity_frequency.more_than=0"],
    )
    stats, _ = curation.run(str(tmp / "from-warc" / "candidates"), str(tmp / "curated"), config)
    kept = rows_under(tmp / "curated" / "curated")
    rejected = rows_under(tmp / "curated" / "rejected")
    ids = [r["id"] for r in kept + rejected]
    assert sorted(ids) == sorted(candidates) and stats["input"] == len(candidates)
    assert kept, stats["rejected"]
    for record in kept + rejected:
        assert record["page_url"] == candidates[record["id"]]["page_url"]


def test_curate_harvests_web_archives_first(crawl):
    """`curate --input crawl.warc.gz`: the harvest as its first step, into OUTPUT/harvest/,
    its funnel at the top of the curation's stats."""
    tmp = crawl["tmp"]
    config = load(CurationConfig, overrides=["with_images=false", "entity_frequency.enabled=false"])  # fmt: skip
    stats, _ = curation.run([str(tmp / "crawl.warc.gz")], str(tmp / "direct"), config)
    harvested = stats["harvest"]["images"]["harvested"]
    assert harvested == len(crawl["captioned"]) == stats["input"]
    assert len(rows_under(tmp / "direct" / "harvest" / "candidates")) == harvested
    saved = storage.read_json(str(tmp / "direct" / "stats.json"))
    assert saved["harvest"]["records"] == stats["harvest"]["records"]
    kept = rows_under(tmp / "direct" / "curated")
    assert kept and all(r["page_url"].startswith(crawl["url"]) for r in kept)


@pytest.mark.slow  # the pipeline's curate stage is curate's own harvest, tested above
def test_the_pipeline_job_harvests_a_web_archive_input(crawl, capsys):
    """The pipeline job's curate stage, given a WARC as its input, harvests it first and
    says so above the curation's funnel."""
    from conceptual.pipelines import pipeline

    tmp = crawl["tmp"]
    overrides = [f"input={tmp / 'crawl.warc.gz'}", f"output={tmp / 'walk'}", "steps=[curate]"]
    overrides += ["curate.with_images=false", "curate.entity_frequency.enabled=false"]
    result = pipeline.run(load(pipeline.PipelineConfig, overrides=overrides))
    assert result["steps"]["curate"]["result"]["input"] == len(crawl["captioned"])
    out = capsys.readouterr().out
    assert out.index("candidates harvested") < out.index("kept ")
    assert storage.exists(str(tmp / "walk" / "curated" / "harvest" / "candidates"))


def test_the_readme_crawl_path_keeps_candidates_in_one_run(crawl, harvested, repo, capsys):
    """The README's crawl path as written: wget leaves only its WARC, and `pipeline --config
    examples/pipeline_crawl.yaml input=out/harvest/candidates` keeps candidates of a site
    served on this machine, at a port of its own, in its first run (without the config: kept
    0 for refused_port, then kept 0 for rare_type). Its curate stage: the stages after it
    are the pipeline job's tests'."""
    from conceptual.jobs import pipeline as pipeline_job

    tmp = crawl["tmp"]
    assert not list(tmp.glob("127.0.0.1*")), "wget left a mirror of the site"
    argv = [
        "--config",
        str(repo / "examples" / "pipeline_crawl.yaml"),
        f"input={tmp / 'from-warc' / 'candidates'}",
        f"output={tmp / 'crawl-walk'}",
        "steps=[curate]",
    ]
    assert pipeline_job.main(argv) == 0
    out = capsys.readouterr().out
    stats = storage.read_json(str(tmp / "crawl-walk" / "curated" / "stats.json"))
    assert stats["kept"] and "nothing kept" not in out, out
    assert "refused" not in json.dumps(stats["rejected"]) and "rare_type" not in out
