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
    with tracking.start_run("curation", tags={"stage": "curate"}) as run:
        lineage.log_written(str(cur))
    stats = json.loads((cur / "stats.json").read_text())
    stats.update({"mlflow_run_id": run.info.run_id, **report})
    (cur / "stats.json").write_text(json.dumps(stats))
    return str(cur), run.info.run_id


def trained_on(data: str) -> str:
    with tracking.start_run("captioning", tags={"stage": "train_captioner"}) as run:
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
    with tracking.start_run("curation", tags={"stage": "curate"}) as run:
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
    _, text = lineage_of(capsys, "--data", cur)
    assert "curation report (stats.json) without a curation funnel" in text
    (tmp_path / "cur" / "stats.json").write_text(json.dumps({"input": "many", "funnel": "x"}))
    _, text = lineage_of(capsys, "--data", cur)
    assert "curation funnel: ? in, ? kept ()" in text
