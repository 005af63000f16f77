"""Publishing curated records as a Hugging Face dataset (read back with the real `datasets`
library) and tracing a registered model back to its data (issue 49), on a real MLflow
(SQLite) without Ray: the records are an import's and hand-written curated rows, the runs
log what they read and wrote through conceptual.lineage as the jobs do."""

from __future__ import annotations

import io
import json
import re

import mlflow
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from PIL import Image

from conceptual import funnel, lineage, registry, tracking
from conceptual.importers import ImportConfig, csv_pairs, write_import
from conceptual.jobs import lineage as lineage_job
from conceptual.jobs import publish_dataset
from conceptual.records import CURATED, FEATURES

COLOURS = ["red", "green", "blue", "yellow", "purple", "orange"]
SPLITS = ["train"] * 4 + ["val", "test"]


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("CONCEPTUAL_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return tmp_path / "home"


def jpeg(colour: str, size=(64, 48)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, colour).save(out, "JPEG")
    return out.getvalue()


@pytest.fixture
def imported(tmp_path) -> str:
    """Six photos, two captions each, their splits stated: 8 train, 2 val, 2 test."""
    folder = tmp_path / "flickr"
    (folder / "images").mkdir(parents=True)
    lines = ["image,caption,split"]
    for colour, split in zip(COLOURS, SPLITS):
        (folder / "images" / f"{colour}.jpg").write_bytes(jpeg(colour))
        lines += [
            f"{colour}.jpg,A {colour} square.,{split}",
            f"{colour}.jpg,Something {colour}.,{split}",
        ]
    (folder / "captions.csv").write_text("\n".join(lines) + "\n")
    out = str(tmp_path / "cur")
    write_import(csv_pairs(folder), out, ImportConfig(curated=True))
    return out


def load(folder, tmp_path, name: str | None = None):
    import datasets

    return datasets.load_dataset(str(folder), name, cache_dir=str(tmp_path / "hf-cache"))


def card_of(folder) -> tuple[dict, str]:
    text = (folder / "README.md").read_text()
    _, top, body = text.split("---\n", 2)
    return yaml.safe_load(top), body


def test_published_import_loads_with_datasets_and_its_card_says_what_it_holds(
    imported, tmp_path, home, capsys
):
    pub = tmp_path / "pub"
    assert publish_dataset.main(["--data", imported, "--output", str(pub), "--name", "Six"]) == 0
    out = capsys.readouterr().out
    assert "warning:  no license set" in out  # never guessed

    loaded = load(pub, tmp_path)
    assert {split: len(rows) for split, rows in loaded.items()} == {
        "train": 8,
        "validation": 2,
        "test": 2,
    }
    assert list(loaded["train"].features) == ["image_url", "caption"]
    assert loaded["validation"][0]["image_url"].startswith("images/")
    assert sorted(p.name for p in (pub / "data").iterdir()) == [
        "test-00000-of-00001.parquet",
        "train-00000-of-00001.parquet",
        "validation-00000-of-00001.parquet",
    ]

    header, body = card_of(pub)
    assert header["pretty_name"] == "Six" and header["task_categories"] == ["image-to-text"]
    assert header["size_categories"] == ["n<1K"] and header["language"] == ["en"]
    assert "license" not in header
    assert header["configs"][0]["data_files"][1] == {
        "split": "validation",
        "path": "data/validation-*",
    }
    for section in (
        "### Dataset Summary",
        "### Data Instances",
        "### Data Fields",
        "### Data Splits",
        "## Dataset Creation",
        "### Personal and Sensitive Information",
        "### Licensing Information",
    ):
        assert f"\n{section}\n" in body, section
    assert "Imported: 12 captions of 12 in the source, for 6 images" in body
    assert "**Not set.**" in body and "(0 hypernymized)" in body
    run_id = next(line for line in out.splitlines() if line.startswith("mlflow:")).split()[2]
    assert f"`{run_id}` (publish)" in body


def curated_rows() -> list[dict]:
    """Three records as a curation writes them: labelled, one with a name and a date
    replaced."""
    label = {"wnid": None, "name": "dog", "score": 0.9, "mid": "/m/0bt9lr"}
    person = {"text": "Anna", "label": "PERSON", "action": "replaced", "replacement": "person"}
    date = {"text": "2019", "label": "DATE", "action": "removed", "replacement": None}
    rows = []
    for n, (colour, split) in enumerate(zip(COLOURS[:3], ["train", "val", "test"])):
        image = jpeg(colour, (80 + n, 60))
        rows.append(
            {
                "id": f"id{n}",
                "image_url": f"http://x.test/{colour}.jpg",
                "alt_text": f"Anna's {colour} dog in 2019" if n == 0 else f"a {colour} dog",
                "caption": "person 's dog" if n == 0 else f"a {colour} dog",
                "entities": [{**person, "source": "rule"}, {**date, "source": "rule"}]
                if n == 0
                else [],
                "types": [],
                "labels": [label, {**label, "name": "puppy", "score": 0.5, "mid": None}],
                "matched": ["dog"],
                "image": image,
                "width": 80 + n,
                "height": 60,
                "split": split,
                "image_id": None,
            }
        )
    return rows


def write_curation(folder, rows) -> None:
    (folder / "curated").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=CURATED), folder / "curated" / "p.parquet")
    stats = funnel.build(5, len(rows), {"text": {"too_short": 1}, "fetch": {"opted_out": 1}}, ["text", "fetch"])  # fmt: skip
    (folder / "stats.json").write_text(json.dumps(stats))
    (folder / "_SUCCESS").write_text("{}")


def test_embedded_images_decode_and_labels_keep_the_released_columns(tmp_path, home):
    cur, pub = tmp_path / "cur", tmp_path / "pub"
    write_curation(cur, curated_rows())
    assert (
        publish_dataset.main(["--data", str(cur), "--output", str(pub), "--images", "embed"]) == 0
    )

    loaded = load(pub, tmp_path, "labeled")
    assert {split: len(rows) for split, rows in loaded.items()} == {
        "train": 1,
        "validation": 1,
        "test": 1,
    }
    first = loaded["train"][0]
    assert first["image"].format == "JPEG" and first["image"].size == (80, 60)
    assert first["labels"] == ["dog", "puppy"] and first["MIDs"] == ["/m/0bt9lr", None]
    assert first["confidence_scores"] == pytest.approx([0.9, 0.5])
    assert loaded["test"][0]["image"].size == (82, 60)

    header, body = card_of(pub)
    unlabeled, labeled = header["dataset_info"]
    assert labeled["config_name"] == "labeled" and [f["name"] for f in labeled["features"]] == [
        "image_url",
        "caption",
        "labels",
        "MIDs",
        "confidence_scores",
        "image",
    ]
    assert [f["name"] for f in unlabeled["features"]] == ["image_url", "caption", "image"]
    assert "names, dates or places in 1 of 3 captions (33.3%)" in body
    assert "names of people 1, dates and times 1" in body
    assert "| text | 5 | 1 | 4 | too_short 1 |" in body  # the funnel, step by step
    assert "Opt-outs honoured: 1 images" in body
    assert '"image": "<JPEG image,' in body  # the instance shows no bytes


def test_a_labelled_curation_publishes_the_released_cards_two_configs(tmp_path, home):
    """As the released card: `unlabeled` (image_url, caption; the default) of every record,
    `labeled` (+ labels, MIDs, confidence_scores) of the records that have labels."""
    rows = curated_rows()
    rows[2]["labels"] = []  # the test record has none
    cur, pub = tmp_path / "cur", tmp_path / "pub"
    write_curation(cur, rows)
    assert publish_dataset.main(["--data", str(cur), "--output", str(pub)]) == 0

    header, body = card_of(pub)
    assert [(c["config_name"], c.get("default")) for c in header["configs"]] == [
        ("unlabeled", True),
        ("labeled", None),
    ]
    unlabeled, default = load(pub, tmp_path, "unlabeled"), load(pub, tmp_path)
    for plain in (unlabeled, default):
        assert {split: len(rows) for split, rows in plain.items()} == {
            "train": 1,
            "validation": 1,
            "test": 1,
        }
        assert plain["train"].column_names == ["image_url", "caption"]
    labeled = load(pub, tmp_path, "labeled")
    assert {split: len(rows) for split, rows in labeled.items()} == {"train": 1, "validation": 1}
    assert labeled["validation"][0] == {
        "image_url": "http://x.test/green.jpg",
        "caption": "a green dog",
        "labels": ["dog", "puppy"],
        "MIDs": ["/m/0bt9lr", None],
        "confidence_scores": pytest.approx([0.9, 0.5]),
    }
    assert (
        "`labeled`: `image_url`, `caption`, `labels`, `MIDs`, `confidence_scores`; train 1, validation 1"
        in body
    )


def test_format_tsv_writes_the_released_layout(tmp_path, home, capsys):
    """caption<TAB>url, no header, under the released names; a caption holding a tab cannot
    be written in that layout and is counted, not written broken. (import_conceptual reads
    such files back: tests/integration/test_import_conceptual.py.)"""
    rows = curated_rows()
    rows[2]["caption"] = "a\tblue dog"  # the test split's one record
    cur, pub = tmp_path / "cur", tmp_path / "pub"
    write_curation(cur, rows)
    assert publish_dataset.main(["--data", str(cur), "--output", str(pub), "--format", "tsv"]) == 0
    assert "1 rows with a tab or line break left out" in capsys.readouterr().out

    train = pub / "tsv" / "Train_GCC-training.tsv"
    assert train.read_bytes() == b"person 's dog\thttp://x.test/red.jpg\n"
    validation = pub / "tsv" / "Validation_GCC-1.1.0-Validation.tsv"
    assert validation.read_bytes() == b"a green dog\thttp://x.test/green.jpg\n"
    assert not (pub / "tsv" / "Test_GCC-test.tsv").exists()
    assert load(pub, tmp_path)["test"][0]["caption"] == "a\tblue dog"  # the Hub layout holds it
    _, body = card_of(pub)
    assert "1 records with a tab or line break in them are not in it" in body


def test_embedding_a_text_only_curation_is_refused(tmp_path, home, capsys):
    cur = tmp_path / "cur"
    write_curation(cur, [{**row, "image": None} for row in curated_rows()])
    argv = ["--data", str(cur), "--output", str(tmp_path / "pub"), "--images", "embed"]
    assert publish_dataset.main(argv) == 2
    err = capsys.readouterr().err
    assert re.search(r"^error: .*carry no images.*--images urls", err, re.M), err


def write_features(folder, rows: list[dict]) -> str:
    """Features of the curated rows as the features job writes them (a made-up vector)."""
    (folder / "features").mkdir(parents=True)
    table = [
        {"id": r["id"], "image_id": r["id"], "split": r["split"], "caption": r["caption"],
         "crop": 0, "pooled": [0.5], "grid": [0.5], "grid_shape": [1, 1, 1]}
        for r in rows
    ]  # fmt: skip
    pq.write_table(pa.Table.from_pylist(table, schema=FEATURES), folder / "features" / "p.parquet")
    (folder / "features.json").write_text(json.dumps({"rows": len(rows), "curated": "x"}))
    return str(folder)


def trace(capsys, *argv) -> dict:
    assert lineage_job.main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_registered_model_traces_back_to_its_import_and_a_changed_dataset_says_so(
    imported, tmp_path, home, capsys
):
    rows = pq.read_table(f"{imported}/curated").to_pylist()
    feat = write_features(tmp_path / "feat", rows)
    with tracking.start_run("features", job="features"):
        lineage.log_read(imported)
        lineage.log_written(feat)
    with tracking.start_run("captioning", job="train_captioner") as run:
        lineage.log_read(feat, splits=["train", "val"], part="features")
        mlflow.log_text("weights", "model/model.txt")
    version = registry.register(run.info.run_id, {"variant": "rnn-1x1"}, name="test-captioner")
    registry._client().set_registered_model_alias("test-captioner", "champion", version.version)

    chain = trace(capsys, "--model", "models:/test-captioner@champion")
    assert (
        chain["model"]["version"] == str(version.version)
        and chain["run"]["job"] == "train_captioner"
    )
    (features,) = chain["run"]["reads"]
    assert features["uri"] == feat and features["status"] == "unchanged"
    assert features["read"] == {"train": "training", "val": "validation"}
    assert features["splits"] == {"test": 2, "train": 8, "val": 2}
    writer = features["written_by"]
    assert writer["job"] == "features"
    (curated,) = writer["reads"]
    assert curated["uri"] == imported and curated["status"] == "unchanged"
    assert curated["origin"]["kind"] == "import" and curated["origin"]["captions"] == 12
    assert curated["written_by"] is None  # an import opens no MLflow run
    # The serving endpoint's /v1/models (admin_details) names the training data by digest.
    from conceptual.serve.champion import describe

    (served,) = describe(version).datasets
    assert served["uri"] == feat and served["digest"] == features["digest"]

    # The curated files rewritten after training: the chain says so, not the same data.
    path = f"{imported}/curated/part-00000.parquet"
    table = pq.read_table(path)
    pq.write_table(table.slice(1), path)
    chain = trace(capsys, "--model", run.info.run_id)
    curated = chain["run"]["reads"][0]["written_by"]["reads"][0]
    assert curated["status"] == "changed" and curated["current_digest"] != curated["digest"]
    assert lineage_job.main(["--model", f"runs:/{run.info.run_id}/model"]) == 0
    text = capsys.readouterr().out
    assert "CHANGED since" in text and f"read {feat}/features  digest" in text


def test_lineage_refuses_what_it_cannot_trace(tmp_path, home, capsys):
    assert lineage_job.main(["--model", str(tmp_path / "nothing")]) == 2
    assert "no such" in capsys.readouterr().err
    assert lineage_job.main(["--model", "models:/absent@champion"]) == 2
    assert "error: " in capsys.readouterr().err


def test_the_card_says_only_what_the_run_did(tmp_path, home):
    """Issue 58: the summary named an entity-frequency rule that was off; "Opt-outs
    honoured: none did here" after the harvest skipped a noimageindex page; the Source was
    the machine's absolute path."""
    from test_lineage_reports import HARVEST_STATS, harvest_output

    cur, pub = tmp_path / "cur", tmp_path / "pub"
    write_curation(cur, curated_rows())
    stats = funnel.build(4, 3, {"text": {"too_short": 1}}, ["text", "syntax", "hypernymize"])
    stats |= {"entity_frequency": {"enabled": False}, "harvest": HARVEST_STATS}
    (cur / "stats.json").write_text(json.dumps(stats))
    assert publish_dataset.main(["--data", str(cur), "--output", str(pub)]) == 0
    _, body = card_of(pub)
    assert "rebuilt on Ray: text filters and hypernymization." in body
    assert "entity-frequency" not in body
    assert "Opt-outs honoured: 2 images of pages whose robots meta or `X-Robots-Tag` opted out were not harvested." in body  # fmt: skip
    assert "none did here" not in body
    assert "- **Source:** `../cur`" in body and "Published from `../cur`" in body
    assert str(tmp_path) not in body

    # harvest, then curate --input out/harvest/candidates: the harvest found by the run.
    harvested = harvest_output(tmp_path / "harvest")
    with tracking.start_run("curation", job="curate") as run:
        lineage.log_read(f"{harvested}/candidates", context="source")
    del stats["harvest"]
    (cur / "stats.json").write_text(json.dumps({**stats, "mlflow_run_id": run.info.run_id}))
    assert publish_dataset.main(["--data", str(cur), "--output", str(pub)]) == 0
    assert "Opt-outs honoured: 2 images of pages" in card_of(pub)[1]
