"""The whole curation funnel on a local Ray with S3 storage: the demo's real photos and
broken variants served over HTTP on 127.0.0.1, generated web alt-texts pointing at them,
imported candidates that carry their image, then features of the curated set."""

from __future__ import annotations

import io
import tarfile

import mlflow
import pyarrow.parquet as pq
import pytest
from PIL import Image

from conceptual import lineage_chain, storage
from conceptual.config import load
from conceptual.importers import csv_pairs, write_import
from conceptual.pipelines.curation.curation import STAGES, run
from conceptual.pipelines.curation.curation_config import CurationConfig
from conceptual.pipelines.features.features import FeaturesConfig
from conceptual.pipelines.features.features import run as features_job
from conceptual.storage import SUCCESS
from conceptual_demo.corpus import write_candidates
from conceptual_demo.images import build_images, demo_candidates, fetch_overrides
from conceptual_demo.server import serve_directory

pytestmark = pytest.mark.integration

BASE = "s3://conceptual/funnel"
# An image that comes with its candidate is never fetched: this URL would be refused.
UNFETCHABLE = "file:///nonexistent/espresso.jpg"


def read_rows(uri: str) -> list[dict]:
    fs, _ = storage.resolve(uri)
    rows = []
    for path in storage.list_files(uri):
        if path.endswith(".parquet"):
            with fs.open_input_file(path) as f:
                rows.extend(pq.read_table(f).to_pylist())
    return rows


@pytest.fixture(scope="module")
def funnel_run(ray_local, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("funnel")
    catalogue = build_images(tmp / "images")
    # Candidates with their image bytes, as conceptual.jobs.import_captions writes them.
    folder = tmp / "imported"
    (folder / "images").mkdir(parents=True)
    coffee = next(f for f in catalogue.of_kind("good") if f.photo == "coffee")
    (folder / "images" / "espresso.jpg").write_bytes(catalogue.path(coffee).read_bytes())
    (folder / "captions.csv").write_text(
        "image,caption\nespresso.jpg,A cup of espresso on a saucer in the morning\n"
    )
    write_import(csv_pairs(folder), f"{BASE}/imported")
    with serve_directory(catalogue.directory) as server:
        rows = demo_candidates(catalogue, server.url, 400, seed=1)
        write_candidates(rows, str(tmp / "web.tsv"), fmt="cc_tsv")
        storage.write_bytes(f"{BASE}/input/web.tsv", (tmp / "web.tsv").read_bytes())
        for path in storage.list_files(f"{BASE}/imported/candidates"):
            data = storage.read_bytes(f"s3://{path}")
            storage.write_bytes(f"{BASE}/input/imported.parquet", data)
        config = load(
            CurationConfig,
            overrides=[
                *fetch_overrides(catalogue),
                "entity_frequency.more_than=1",
                "webdataset.enabled=true",
                "webdataset.samples_per_shard=20",
                "resources.batch_size=64",
            ],
        )
        stats, run_id = run(f"{BASE}/input", f"{BASE}/output", config)
    return {"stats": stats, "run_id": run_id, "out": f"{BASE}/output", "rows": rows}


def test_accounting_holds_across_every_stage(funnel_run):
    stats, out = funnel_run["stats"], funnel_run["out"]
    assert stats["input"] == 400 + 1
    assert [row["stage"] for row in stats["funnel"]] == list(STAGES)
    rejected = sum(n for reasons in stats["rejected"].values() for n in reasons.values())
    assert stats["input"] == stats["kept"] + rejected
    assert len(read_rows(storage.join(out, "curated"))) == stats["kept"]
    assert len(read_rows(storage.join(out, "rejected"))) == rejected
    assert storage.read_json(storage.join(out, SUCCESS))["kept"] == stats["kept"]


def test_every_image_stage_rejects_with_specific_reasons(funnel_run):
    rejected = funnel_run["stats"]["rejected"]
    assert {"http_status", "refused_address", "too_many_redirects"} <= set(rejected["fetch"])
    assert {"not_jpeg", "too_small", "aspect_ratio", "truncated"} <= set(rejected["image"])
    assert rejected["overlap"]["no_label_overlap"] > 0
    for row in read_rows(storage.join(funnel_run["out"], "rejected")):
        assert row["stage"] in STAGES and row["reason"], row


def test_kept_records_are_real_jpegs_with_fitting_labels(funnel_run):
    curated = read_rows(storage.join(funnel_run["out"], "curated"))
    assert curated
    for row in curated:
        image = Image.open(io.BytesIO(row["image"]))
        assert image.format == "JPEG" and image.size == (row["width"], row["height"])
        assert min(image.size) > 400 and max(image.size) / min(image.size) <= 2
        assert row["labels"] and row["matched"], row
        assert row["split"] in ("train", "val", "test")
        assert row["caption"] == row["caption"].lower()
    # The imported candidate kept its own bytes (its URL could never have been fetched):
    # they passed every image check, and the web candidates that carry the same photo
    # come first in the input, so it is their duplicate.
    rejected = read_rows(storage.join(funnel_run["out"], "rejected"))
    (imported,) = [row for row in rejected if row["image_url"] == "images/espresso.jpg"]
    assert (imported["stage"], imported["reason"]) == ("deduplicate", "duplicate")
    assert imported["detail"].startswith("the same image bytes as an earlier candidate")
    assert funnel_run["stats"]["image"]["unsafe_detector"] == "none"
    assert sum(funnel_run["stats"]["splits"].values()) == len(curated)


def test_webdataset_shards_hold_every_kept_sample(funnel_run):
    out = funnel_run["out"]
    names = []
    for path in storage.list_files(storage.join(out, "shards")):
        with tarfile.open(fileobj=io.BytesIO(storage.read_bytes(f"s3://{path}"))) as tar:
            names += tar.getnames()
    keys = {name.split(".")[0] for name in names}
    assert len(keys) == funnel_run["stats"]["kept"] == funnel_run["stats"]["shards"]["samples"]
    assert len(names) == 3 * len(keys)  # .jpg, .txt, .json per sample


def test_mlflow_has_every_stage(funnel_run):
    metrics = mlflow.get_run(funnel_run["run_id"]).data.metrics
    leaving = {row["stage"]: row["leaving"] for row in funnel_run["stats"]["funnel"]}
    assert metrics["funnel.overlap.leaving"] == leaving["overlap"]
    # the demo's few photos stand behind many candidates: each photo is kept once
    assert metrics["rejected.deduplicate.duplicate"] > 0
    assert metrics["rejected.fetch.http_status"] > 0
    samples = mlflow.MlflowClient().list_artifacts(funnel_run["run_id"], "samples")
    assert "samples/kept_images.png" in {a.path for a in samples}
    params = mlflow.get_run(funnel_run["run_id"]).data.params
    assert params["fetch.allow_hosts"] == "['127.0.0.1']"


def test_features_of_the_curated_set(funnel_run):
    out = f"{BASE}/features"
    summary, run_id = features_job(funnel_run["out"], out, FeaturesConfig(crops=1))
    # The features run read the curated data, which the curation run wrote from its input.
    (curated,) = lineage_chain.trace(run_id)["run"]["reads"]
    assert (curated["uri"], curated["part"], curated["status"]) == (
        funnel_run["out"],
        "curated",
        "unchanged",
    )
    assert curated["origin"]["kind"] == "curation" and curated["origin"]["input"] == 401
    assert curated["written_by"]["run_id"] == funnel_run["run_id"]
    (source,) = curated["written_by"]["reads"]
    assert source["uri"] == f"{BASE}/input" and source["read"] == {"all": "source"}
    kept = funnel_run["stats"]["kept"]
    assert summary["images"] == kept and summary["rows"] == 2 * kept
    rows = read_rows(storage.join(out, "features"))
    assert {r["crop"] for r in rows} == {0, 1}
    for row in rows:
        assert row["grid_shape"] == [8, 8, 1280]
        assert len(row["grid"]) == 8 * 8 * 1280 and len(row["pooled"]) == 1280
        assert row["split"] in ("train", "val", "test") and row["caption"]
    assert storage.exists(storage.join(out, SUCCESS))


def test_published_curation_loads_with_datasets_and_its_card_tells_the_funnel(funnel_run, tmp_path):
    import datasets

    from conceptual.publishing import PublishConfig, publish

    out = tmp_path / "hf"
    publish(funnel_run["out"], str(out), PublishConfig(images="embed", name="Funnel"))
    # The curation labels its images: the released card's two configs, `labeled` with them.
    loaded = datasets.load_dataset(str(out), "labeled", cache_dir=str(tmp_path / "hf-cache"))
    splits = {"val": "validation"}
    assert {s: len(rows) for s, rows in loaded.items()} == {
        splits.get(s, s): n for s, n in funnel_run["stats"]["splits"].items() if n
    }
    row = next(iter(loaded.values()))[0]
    assert row["image"].format == "JPEG" and min(row["image"].size) > 400
    assert row["labels"] and len(row["labels"]) == len(row["confidence_scores"])
    card = (out / "README.md").read_text()
    for stage in STAGES:  # the funnel, each stage with its count
        assert f"\n| {stage} | " in card, stage
    assert f"| {funnel_run['stats']['input']} | " in card.replace(",", "")
    assert "### Personal and Sensitive Information" in card and "Opt-outs honoured" in card
    assert f"`{funnel_run['run_id']}` (curation)" in card
    assert "<summary>The curation's configuration</summary>" in card  # its run's config.yaml
    assert "fetch:\n" in card and "**Not set.**" in card
