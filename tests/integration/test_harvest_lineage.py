"""From a crawl to what was published and trained, back again (issue 58): a tiny WARC
(tests/web_archives.py) is harvested, curated from the harvest's candidates and from the
WARC itself, published, and read by a training run; `lineage` on each output, in text and
--json, goes back to the harvest's funnel (records, pages, candidates, reasons), never a
traceback. Text-only curations (with_images=false): a training run stands in as the jobs
log one (conceptual.lineage), since features need fetched images."""

from __future__ import annotations

import json

import pytest
from web_archives import response, write_archive  # tests/web_archives.py

from conceptual import lineage, tracking
from conceptual.config import load
from conceptual.jobs import lineage as lineage_job
from conceptual.jobs import publish_dataset
from conceptual.pipelines.curation import curation
from conceptual.pipelines.curation import harvest as harvesting
from conceptual.pipelines.curation.curation_config import CurationConfig

pytestmark = [pytest.mark.integration]

ALTS = [
    "A brown dog runs along the beach",
    "A red kite flies over a green field",
    "A small boat sails across the lake",
    "An old bridge crosses the quiet river",
]


@pytest.fixture(scope="module")
def crawl(tmp_path_factory):
    """Pages with captioned images, one page that opts out (noimageindex), a stylesheet."""
    tmp = tmp_path_factory.mktemp("harvest-lineage")
    pages = [
        response(f"http://site.test/p{i}.html", f'<img src="/{i}.jpg" alt="{alt}">'.encode())
        for i, alt in enumerate(ALTS)
    ]
    opted = b'<meta name="robots" content="noimageindex"><img src="/x.jpg" alt="a cat asleep">'
    pages.append(response("http://site.test/private.html", opted))
    pages.append(response("http://site.test/s.css", b"p {}", content_type="text/css"))
    return write_archive(tmp / "site.warc.gz", pages), tmp


def lineage_of(capsys, *argv) -> tuple[dict, str]:
    """The chain as --json and as text; neither may hold a traceback."""
    assert lineage_job.main([*argv, "--json"]) == 0
    chain = json.loads(capsys.readouterr().out)
    assert lineage_job.main(list(argv)) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    return chain, captured.out


HARVEST_LINE = (
    "harvest funnel: 1 files, 6 records read (not_html -1), 5 html pages, 5 images seen "
    "(opted_out -1), 4 candidates"
)


def test_lineage_goes_back_to_the_harvest_s_funnel(crawl, ray_local, capsys):
    warc, tmp = crawl
    harvested, _ = harvesting.run([str(warc)], str(tmp / "harvest"), harvesting.HarvestConfig())
    assert harvested["images"]["not_harvested"] == {"opted_out": 1}
    config = load(CurationConfig, overrides=["with_images=false", "entity_frequency.enabled=false"])  # fmt: skip
    cur = str(tmp / "cur")
    stats, _ = curation.run(str(tmp / "harvest" / "candidates"), cur, config)
    assert stats["kept"], stats["rejected"]
    direct = str(tmp / "direct")  # curate --input site.warc.gz: harvested into direct/harvest/
    curation.run([str(warc)], direct, config)
    hf = tmp / "hf"
    assert publish_dataset.main(["--data", cur, "--output", str(hf)]) == 0
    with tracking.start_run("captioning", job="train_captioner") as trained:
        lineage.log_read(cur)
    capsys.readouterr()

    # The published folder: publish <- the curation <- the harvest, each with its funnel.
    chain, text = lineage_of(capsys, "--data", str(hf))
    (read,) = chain["dataset"]["written_by"]["reads"]
    assert read["path"] == f"{cur}/curated" and read["origin"]["kind"] == "curation"
    (source,) = read["written_by"]["reads"]
    assert source["path"] == str(tmp / "harvest" / "candidates")
    assert source["origin"]["kind"] == "harvest"
    assert source["written_by"]["job"] == "harvest"
    assert f"curation funnel: 4 in, {stats['kept']} kept" in text and HARVEST_LINE in text
    # The curated data, and the training run that read it.
    for target in (["--data", cur], ["--model", trained.info.run_id]):
        _, text = lineage_of(capsys, *target)
        assert HARVEST_LINE in text and "curation funnel: 4 in" in text
    # A curation of the WARC itself: its harvest's funnel, then its own.
    chain, text = lineage_of(capsys, "--data", direct)
    assert chain["dataset"]["origin"]["harvest"]["images"]["harvested"] == 4
    assert text.index(HARVEST_LINE) < text.index("curation funnel: 4 in")

    card = (hf / "README.md").read_text()
    assert "Opt-outs honoured: 1 images of pages" in card and "entity-frequency" not in card
    assert str(tmp) not in card
