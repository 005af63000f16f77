"""`lineage` and the reports beside the data (issue 57): the run a curation's stats.json names
is the data's writer only where the digest it recorded is the data's; nothing a report or a
run holds reaches the terminal as a control character; an output folder named `curated` is
read as the output it is; and a report without a curation funnel (a harvest's) is shown,
not a traceback. On a real MLflow (SQLite), without Ray."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_publish_lineage import curated_rows, write_curation

from conceptual import lineage, tracking
from conceptual.jobs import lineage as lineage_job

ESCAPES = "\x1b]0;owned\x07\x1b[2J\x9b\u202e"


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("CONCEPTUAL_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return tmp_path / "home"


def curation(tmp_path, name="cur", **report) -> tuple[str, str]:
    """A curation's output and its run, which recorded what it wrote; `report` changes its
    stats.json. (the output, the run id)"""
    cur = tmp_path / name
    write_curation(cur, curated_rows())
    with tracking.start_run("curation", job="curate") as run:
        lineage.log_written(str(cur))
    stats = json.loads((cur / "stats.json").read_text())
    stats.update({"mlflow_run_id": run.info.run_id, **report})
    (cur / "stats.json").write_text(json.dumps(stats))
    return str(cur), run.info.run_id


def trained_on(data: str) -> str:
    with tracking.start_run("captioning", job="train_captioner") as run:
        lineage.log_read(data)
    return run.info.run_id


def lineage_of(capsys, *argv) -> tuple[dict, str]:
    assert lineage_job.main([*argv, "--json"]) == 0
    chain = json.loads(capsys.readouterr().out)
    assert lineage_job.main(list(argv)) == 0
    return chain, capsys.readouterr().out


def test_changed_data_is_not_attributed_to_the_run_its_stats_json_names(tmp_path, home, capsys):
    cur, curated_by = curation(tmp_path)
    chain, _ = lineage_of(capsys, "--model", trained_on(cur))
    assert chain["run"]["reads"][0]["written_by"]["run_id"] == curated_by
    # The curated rows rewritten, stats.json left as it was: another run trains on them.
    path = f"{cur}/curated/p.parquet"
    pq.write_table(pq.read_table(path).slice(1), path)
    chain, text = lineage_of(capsys, "--model", trained_on(cur))
    (read,) = chain["run"]["reads"]
    assert read["written_by"] is None
    assert read["named_by_report"]["run_id"] == curated_by and read["named_by_report"]["found"]
    assert f"stats.json names run {curated_by}, which wrote digest" in text
    assert "the data changed since that run wrote it" in text


def test_a_run_from_before_lineage_tags_is_taken_at_its_report_s_word(tmp_path, home, capsys):
    cur = tmp_path / "cur"
    write_curation(cur, curated_rows())
    with tracking.start_run("curation", job="curate") as run:
        pass  # it logged no lineage.wrote tags
    stats = {**json.loads((cur / "stats.json").read_text()), "mlflow_run_id": run.info.run_id}
    (cur / "stats.json").write_text(json.dumps(stats))
    chain, _ = lineage_of(capsys, "--data", str(cur))
    assert chain["dataset"]["written_by"]["run_id"] == run.info.run_id
    # A run the store does not have: said, not a traceback.
    (cur / "stats.json").write_text(json.dumps({**stats, "mlflow_run_id": "f" * 32}))
    chain, text = lineage_of(capsys, "--data", str(cur))
    assert chain["dataset"]["written_by"] is None
    assert f"names run {'f' * 32}, which is not in the tracking store" in text


def test_no_control_character_from_a_report_reaches_the_terminal(tmp_path, home, capsys):
    cur, _ = curation(tmp_path)
    stats = json.loads((tmp_path / "cur" / "stats.json").read_text())
    stats["funnel"][0]["stage"] = f"text{ESCAPES}"
    (tmp_path / "cur" / "stats.json").write_text(json.dumps(stats))
    chain, text = lineage_of(capsys, "--data", cur)
    assert chain["dataset"]["origin"]["funnel"][0]["stage"] == f"text{ESCAPES}"  # as it is
    assert not any(c in text for c in "\x1b\x07\x9b\u202e"), repr(text)
    assert "text\\x1b]0;owned\\x07\\x1b[2J\\x9b\\u202e -1" in text


def test_an_output_folder_named_curated_is_read_as_an_output(tmp_path, home, capsys):
    """curate --output out/curated writes out/curated/curated/: lineage once took the
    output's own folder for the data part, its rejections counted as rows."""
    out, curated_by = curation(tmp_path / "out", name="curated")
    rejected = pa.table({"id": ["r1", "r2"], "stage": ["text", "text"]})
    (tmp_path / "out" / "curated" / "rejected").mkdir()
    pq.write_table(rejected, tmp_path / "out" / "curated" / "rejected" / "r.parquet")
    assert lineage.locate(out) == (out, "curated")
    assert lineage.locate(f"{out}/curated") == (out, "curated")
    chain, _ = lineage_of(capsys, "--data", out)
    dataset = chain["dataset"]
    assert (dataset["uri"], dataset["part"]) == (out, "curated")
    assert dataset["splits"] == {"test": 1, "train": 1, "val": 1}
    assert dataset["written_by"]["run_id"] == curated_by


def test_a_report_without_a_curation_funnel_is_shown(tmp_path, home, capsys):
    """A harvest's stats.json holds files, records and images, and no funnel: lineage once
    raised KeyError 'input' on it (issue 58)."""
    cur, _ = curation(tmp_path)
    harvest = {"files": {"read": 1}, "records": {"read": 3}, "images": {"harvested": 2}}
    (tmp_path / "cur" / "stats.json").write_text(json.dumps(harvest))
    chain, text = lineage_of(capsys, "--data", cur)
    assert chain["dataset"]["origin"]["kind"] == "harvest"  # its own kind (issue 58)
    assert (
        "harvest funnel: 1 files, 3 records read, ? html pages, ? images seen, 2 candidates" in text
    )
    (tmp_path / "cur" / "stats.json").write_text(json.dumps({"seconds": 1}))
    _, text = lineage_of(capsys, "--data", cur)
    assert "curation report (stats.json) without a curation funnel" in text
    (tmp_path / "cur" / "stats.json").write_text(json.dumps({"input": "many", "funnel": "x"}))
    _, text = lineage_of(capsys, "--data", cur)
    assert "curation funnel: ? in, ? kept ()" in text


HARVEST_STATS = {
    "files": {"read": 1, "warc": 1, "wat": 0, "unreadable": {}},
    "records": {"read": 4, "html_pages": 3, "skipped": {"not_html": 1}},
    "images": {"seen": 6, "harvested": 3, "not_harvested": {"opted_out": 2, "no_alt": 1}},
}


def harvest_output(folder) -> str:
    """A harvest's output as pipelines/curation/harvest.py writes it: candidates/ and its stats.json."""
    (folder / "candidates").mkdir(parents=True)
    candidates = pa.table({"id": ["a", "b", "c"], "alt_text": ["x", "y", "z"]})
    pq.write_table(candidates, folder / "candidates" / "part-00000.parquet")
    (folder / "stats.json").write_text(json.dumps(HARVEST_STATS))
    return str(folder)


def test_a_harvest_is_its_own_kind_with_its_funnel_above_the_curation_s(tmp_path, home, capsys):
    """harvest, then curate --input out/harvest/candidates, then a training run: the chain
    goes back to the harvest's funnel (it was labelled a curation, and raised KeyError)."""
    harvested = harvest_output(tmp_path / "harvest")
    cur, _ = curation(tmp_path)
    with tracking.start_run("curation", job="curate") as run:
        lineage.log_read(f"{harvested}/candidates", context="source")
        lineage.log_written(cur)
    stats = {**json.loads((tmp_path / "cur" / "stats.json").read_text()), "mlflow_run_id": run.info.run_id}  # fmt: skip
    (tmp_path / "cur" / "stats.json").write_text(json.dumps(stats))
    chain, text = lineage_of(capsys, "--model", trained_on(cur))
    (read,) = chain["run"]["reads"]
    assert read["origin"]["kind"] == "curation"
    (source,) = read["written_by"]["reads"]
    assert source["path"] == f"{harvested}/candidates"
    assert source["origin"] == {"kind": "harvest", **HARVEST_STATS}
    assert "curation funnel: 5 in, 3 kept (text -1, fetch -1)" in text
    assert (
        "harvest funnel: 1 files, 4 records read (not_html -1), 3 html pages, 6 images seen "
        "(opted_out -2, no_alt -1), 3 candidates"
    ) in text
    assert text.index("curation funnel") < text.index("harvest funnel")  # the chain, backwards


def test_a_curation_of_web_archives_shows_its_harvest_first(tmp_path, home, capsys):
    """curate --input crawl/*.warc.gz: the harvest's funnel is stats.json's `harvest`."""
    cur, _ = curation(tmp_path, harvest=HARVEST_STATS)
    chain, text = lineage_of(capsys, "--data", cur)
    assert chain["dataset"]["origin"]["harvest"] == HARVEST_STATS
    lines = text.splitlines()
    harvest = next(i for i, line in enumerate(lines) if "harvest funnel: 1 files" in line)
    assert "curation funnel: 5 in, 3 kept" in lines[harvest + 1]


def test_features_beside_the_curated_records_are_named_by_their_own_path(tmp_path, home, capsys):
    """features --data out/cur --output out/cur: the two datasets share a folder, and lineage
    named both `out/cur`, the features with the curation's funnel."""
    from test_publish_lineage import write_features

    cur, curated_by = curation(tmp_path)
    write_features(tmp_path / "cur", curated_rows())
    with tracking.start_run("features", job="features") as features_run:
        lineage.log_read(cur)
        lineage.log_written(cur, part="features")  # as pipelines/features/features.py does
    with tracking.start_run("captioning", job="train_captioner") as run:
        lineage.log_read(cur, part="features")
    chain, text = lineage_of(capsys, "--model", run.info.run_id)
    (features,) = chain["run"]["reads"]
    assert features["path"] == f"{cur}/features" and features["origin"]["kind"] == "features"
    assert features["written_by"]["run_id"] == features_run.info.run_id
    (curated,) = features["written_by"]["reads"]
    assert curated["path"] == f"{cur}/curated" and curated["origin"]["kind"] == "curation"
    assert curated["written_by"]["run_id"] == curated_by
    assert f"read {cur}/features  digest" in text and f"read {cur}/curated  digest" in text


def test_no_traceback_reaches_the_user(tmp_path, home, capsys, monkeypatch):
    """What no check foresaw is one `error:` line and exit code 1; refusals stay exit 2."""
    from conceptual import lineage_chain

    cur, _ = curation(tmp_path)

    def broken(chain):
        raise KeyError("input")

    monkeypatch.setattr(lineage_chain, "render", broken)
    assert lineage_job.main(["--data", cur]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    (line,) = [x for x in err.splitlines() if x.startswith("error:")]
    assert f"lineage could not trace {cur}: KeyError: 'input'" in line
    assert lineage_job.main(["--data", str(tmp_path / "absent")]) == 2


def test_the_same_content_at_two_places_is_traced_to_the_run_that_wrote_it_here(
    tmp_path, home, capsys
):
    """Two curations of one crawl write the same records (one digest): each folder's writer
    is the run that wrote there, not the newest run of that digest."""
    cur, curated_by = curation(tmp_path)
    again, _ = curation(tmp_path, name="again")
    assert lineage.describe(cur).digest == lineage.describe(again).digest
    chain, _ = lineage_of(capsys, "--data", cur)
    assert chain["dataset"]["written_by"]["run_id"] == curated_by
