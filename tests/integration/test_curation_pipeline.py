"""The curation pipeline on a local Ray, reading and writing through an S3 API endpoint on
127.0.0.1, tracked in MLflow: outputs, accounting and the incomplete-output marker.

These runs are text-only (with_images=false): the generated corpus points at web hosts that
tests must not reach. The whole funnel, images included, is in test_full_funnel.py."""

from __future__ import annotations

import json

import mlflow
import pyarrow.parquet as pq
import pytest

from conceptual import storage
from conceptual.candidates import CandidateFormatError
from conceptual.pipelines.curation.curation import curate, run
from conceptual.pipelines.curation.curation_config import CurationConfig
from conceptual.records import candidate_id
from conceptual.storage import SUCCESS
from conceptual_demo.corpus import generate_candidates, write_candidates

pytestmark = pytest.mark.integration

BROKEN_LINES = b"no tab on this line\nthree\tfields\there\n\xff\xfebad bytes\thttp://x.test/b.jpg\n"


def read_table(uri: str):
    fs, _ = storage.resolve(uri)
    files = [p for p in storage.list_files(uri) if p.endswith(".parquet")]
    tables = []
    for path in files:
        with fs.open_input_file(path) as f:
            tables.append(pq.read_table(f))
    return [row for t in tables for row in t.to_pylist()]


@pytest.fixture(scope="module")
def curated_run(ray_local, tmp_path_factory):
    rows = generate_candidates(400, seed=7)
    # Half the JSONL rows state their split (as a user's own split would): kept, not hashed.
    rows[250::2] = [{**row, "split": "test"} for row in rows[250::2]]
    local = tmp_path_factory.mktemp("cands")
    write_candidates(rows[:250], str(local / "part-0.tsv"), fmt="cc_tsv")
    write_candidates(rows[250:], str(local / "part-1.jsonl"), fmt="jsonl")
    base = "s3://conceptual/it"
    storage.write_bytes(
        f"{base}/input/part-0.tsv", (local / "part-0.tsv").read_bytes() + BROKEN_LINES
    )
    storage.write_bytes(f"{base}/input/part-1.jsonl", (local / "part-1.jsonl").read_bytes())
    config = CurationConfig.model_validate(
        {
            "with_images": False,
            "entity_frequency": {"more_than": 2},
            "resources": {"batch_size": 64},
        }
    )
    stats, run_id = run(f"{base}/input", f"{base}/output", config)
    return {
        "rows": rows,
        "stats": stats,
        "run_id": run_id,
        "output": f"{base}/output",
        "base": base,
    }


def test_every_candidate_lands_exactly_once(curated_run):
    stats, out = curated_run["stats"], curated_run["output"]
    assert stats["input"] == 400 + 3
    curated = read_table(storage.join(out, "curated"))
    rejected = read_table(storage.join(out, "rejected"))
    assert len(curated) == stats["kept"] and len(rejected) == stats["input"] - stats["kept"]
    ids = [r["id"] for r in curated] + [r["id"] for r in rejected]
    assert len(ids) == len(set(ids)) or len(ids) - len(set(ids)) == _duplicate_pairs(
        curated_run["rows"]
    )
    rejected_total = sum(n for reasons in stats["rejected"].values() for n in reasons.values())
    assert stats["input"] == stats["kept"] + rejected_total


def test_a_stated_split_is_kept(curated_run):
    stated = {
        candidate_id(r["image_url"], r["alt_text"]) for r in curated_run["rows"] if "split" in r
    }
    curated = read_table(storage.join(curated_run["output"], "curated"))
    kept = [r["split"] for r in curated if r["id"] in stated]
    assert kept and set(kept) == {"test"}
    hashed = [r["split"] for r in curated if r["id"] not in stated]
    assert hashed.count("train") > hashed.count("test")  # the hash's 0.9/0.05/0.05


def _duplicate_pairs(rows) -> int:
    pairs = [(r["image_url"], r["alt_text"]) for r in rows]
    return len(pairs) - len(set(pairs))


def test_reasons_cover_read_text_and_syntax(curated_run):
    rejected = curated_run["stats"]["rejected"]
    assert rejected["read"]["malformed_row"] == 2 and rejected["read"]["invalid_utf8"] == 1
    assert {"url", "hashtag", "empty", "non_english"} <= set(rejected["text"])
    assert "syntax" in rejected
    rows = read_table(storage.join(curated_run["output"], "rejected"))
    assert all(r["stage"] and r["reason"] for r in rows)
    assert any("part-0.tsv" in (r["detail"] or "") for r in rows if r["stage"] == "read")


def test_curated_records_are_transformed(curated_run):
    curated = read_table(storage.join(curated_run["output"], "curated"))
    assert curated, "a realistic candidate set keeps something"
    for row in curated:
        assert row["caption"] == row["caption"].lower()
        assert row["types"], row
        assert row["image_url"].startswith("http")
    assert any(e["action"] == "replaced" for row in curated for e in row["entities"])
    captions = curated_run["stats"]["captions"]
    assert captions["count"] == len(curated) and captions["vocabulary_size"] > 10


def test_stats_and_success_marker_written(curated_run):
    out = curated_run["output"]
    stats = storage.read_json(storage.join(out, "stats.json"))
    assert stats["input"] == curated_run["stats"]["input"]
    assert stats["mlflow_run_id"] == curated_run["run_id"]
    assert storage.read_json(storage.join(out, SUCCESS))["kept"] == stats["kept"]
    phases = stats["seconds_by_phase"]
    assert list(phases) == [
        "read_and_process",
        "global_rules",
        "write",
        "statistics",
        "samples",
    ]
    assert all(seconds >= 0 for seconds in phases.values())
    assert sum(phases.values()) <= stats["seconds"] + 0.05  # rounding


def test_mlflow_run_has_config_metrics_and_artifacts(curated_run):
    run = mlflow.get_run(curated_run["run_id"])
    assert run.data.params["entity_frequency.more_than"] == "2"
    assert run.data.metrics["input"] == curated_run["stats"]["input"]
    assert run.data.metrics["rejected.read.malformed_row"] == 2
    assert "seconds.read_and_process" in run.data.metrics
    artifacts = {a.path for a in mlflow.MlflowClient().list_artifacts(curated_run["run_id"])}
    assert {"config.yaml", "stats.json", "funnel.png", "funnel.txt", "samples"} <= artifacts
    kept = json.loads(
        mlflow.artifacts.load_text(f"runs:/{curated_run['run_id']}/samples/kept.json")
    )
    assert "caption" in kept["columns"]


def test_failed_rerun_leaves_output_marked_incomplete(curated_run):
    base, out = curated_run["base"], curated_run["output"]
    storage.write_bytes(f"{base}/bad/c.csv", b"alt_text,width\nA dog,3\n")
    with pytest.raises(CandidateFormatError):
        run(f"{base}/bad", out, CurationConfig(with_images=False))
    assert not storage.exists(storage.join(out, SUCCESS))


def test_single_cpu_and_many_small_splits(tmp_path):
    """The NLP actor holds the only CPU, so reading must not need one (it once hung); and
    a file cut into many byte ranges yields every candidate exactly once."""
    import ray

    from conceptual.runtime import init_ray

    write_candidates(generate_candidates(120, seed=5), str(tmp_path / "in.tsv"), fmt="cc_tsv")
    config = CurationConfig.model_validate(
        {"with_images": False, "samples": 0, "resources": {"range_bytes": 2048}}
    )
    ray.shutdown()
    init_ray(num_cpus=1)
    try:
        stats = curate(str(tmp_path / "in.tsv"), str(tmp_path / "out"), config)
    finally:
        ray.shutdown()
        init_ray(num_cpus=2)  # the session's shared Ray, for the tests after this one
    assert stats["input"] == 120
    assert "read" not in stats["rejected"]  # no line was cut in two
