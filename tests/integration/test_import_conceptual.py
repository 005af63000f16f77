"""conceptual.jobs.import_conceptual on a local Ray: the released format (Google's TSV, gzip or
not; Hugging Face's Parquet, both configs) with released captions and real photos served on
127.0.0.1, some URLs gone and one answering with an HTML page (tests/released_fixtures.py).
Each import runs once per module and its tests read its output; the features job reads the
first one."""

from __future__ import annotations

import contextlib
import hashlib
import io
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from PIL import Image
from released_fixtures import build, write_parquet, write_tsv  # tests/released_fixtures.py

from conceptual import storage
from conceptual.jobs import import_conceptual
from conceptual.records import CURATED
from conceptual.storage import SUCCESS
from conceptual.vision.labels import LabelMatcher
from conceptual_demo.server import serve_directory

pytestmark = [pytest.mark.integration, pytest.mark.realdata]

PHOTOS, GONE = 16, 3
SMALL = ["resources.batch_size=8", "resources.vision_batch_size=8", "samples=0"]
SMALL += ["fetch.allow_hosts=[127.0.0.1]"]  # the photos' server: named, never a default


def read_rows(uri: str) -> list[dict]:
    if not storage.exists(uri):  # an import that rejected nothing writes no rejected/
        return []
    return [
        row
        for path in sorted(storage.list_files(uri))
        if path.endswith(".parquet")
        for row in pq.read_table(path).to_pylist()
    ]


@pytest.fixture(scope="module")
def release(real_data, tmp_path_factory):
    """(rows, base URL, scratch folder), the photos served while the module runs."""
    tmp = tmp_path_factory.mktemp("released")
    rows = build(real_data, tmp / "www", PHOTOS, GONE)
    with serve_directory(tmp / "www") as server:
        yield rows, server.url, tmp


def run_job(tmp: Path, name: str, data: Path, *args: str) -> dict:
    out = tmp / f"out-{name}"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = import_conceptual.main(["--input", str(data), "--output", str(out), *SMALL, *args])
    return {
        "code": code,
        "printed": printed.getvalue(),
        "stats": storage.read_json(str(out / "stats.json")) if code == 0 else None,
        "curated": read_rows(str(out / "curated")) if code == 0 else [],
        "rejected": read_rows(str(out / "rejected")) if code == 0 else [],
        "out": out,
    }


@pytest.fixture(scope="module")
def gz_tsv(ray_local, release):
    """Google's validation TSV, gzip-compressed, no --split: the name says the split."""
    rows, base, tmp = release
    data = write_tsv(tmp / "gcc" / "Validation_GCC-1.1.0-Validation.tsv.gz", rows, base)
    return run_job(tmp, "gz-tsv", data)


@pytest.fixture(scope="module")
def labeled(ray_local, release):
    """The labeled config's validation file, the overlap rule on the dataset's labels, with
    CNN weights that cannot load: the classifier must not be loaded."""
    rows, base, tmp = release
    data = write_parquet(tmp / "labeled" / "validation-00000-of-00001.parquet", rows, base, True)
    return run_job(
        tmp,
        "labeled",
        data.parent,
        "overlap.enabled=true",
        "labels.source=dataset",
        "cnn.weights=/nonexistent/weights.pth",
    )


def test_every_row_is_kept_or_rejected_with_its_reason(gz_tsv, release):
    rows = release[0]
    assert gz_tsv["code"] == 0, gz_tsv["printed"]
    stats = gz_tsv["stats"]
    assert stats["input"] == len(rows) == len(gz_tsv["curated"]) + len(gz_tsv["rejected"])
    rejected = sum(n for reasons in stats["rejected"].values() for n in reasons.values())
    assert stats["kept"] + rejected == stats["input"] and stats["kept"] == PHOTOS
    assert stats["rejected"]["fetch"] == {"http_status": GONE, "not_an_image": 1}
    ids = [r["id"] for r in gz_tsv["curated"] + gz_tsv["rejected"]]
    assert len(set(ids)) == len(rows)
    assert storage.read_json(str(gz_tsv["out"] / SUCCESS))["kept"] == PHOTOS
    gone = f"gone {GONE + 1} (http_status {GONE}, not_an_image 1)"
    assert f"fetched {PHOTOS}, {gone}, filtered 0, kept {PHOTOS}" in gz_tsv["printed"]


def test_captions_are_byte_identical_and_the_split_is_the_file_s(gz_tsv, release):
    rows, base, _ = release
    released = {row.url(base): row.caption for row in rows}
    curated = gz_tsv["curated"]
    assert pq.read_schema(next(gz_tsv["out"].glob("curated/*.parquet"))) == CURATED
    for record in curated:
        assert record["caption"].encode() == released[record["image_url"]].encode()
        assert record["alt_text"] == record["caption"]
        assert record["entities"] == [] and record["labels"] == []
        assert record["split"] == "validation"
        assert record["image_id"] == hashlib.sha1(record["image"]).hexdigest()
    assert gz_tsv["stats"]["splits"] == {"validation": PHOTOS}


def test_published_as_the_released_tsv_it_imports_back_unchanged(gz_tsv, release):
    """publish_dataset --format tsv writes the released layout, and import_conceptual reads
    it back: the same captions, byte for byte, of the same URLs, in the same split."""
    from conceptual.jobs import publish_dataset

    _, _, tmp = release
    pub = tmp / "published"
    argv = ["--data", str(gz_tsv["out"]), "--output", str(pub), "--format", "tsv"]
    assert publish_dataset.main(argv) == 0
    tsv = pub / "tsv" / "Validation_GCC-1.1.0-Validation.tsv"
    first = {(r["caption"], r["image_url"]) for r in gz_tsv["curated"]}
    lines = tsv.read_bytes().decode().splitlines()
    assert {tuple(line.split("\t")) for line in lines} == first and len(lines) == PHOTOS
    again = run_job(tmp, "republished", tsv)
    assert again["code"] == 0, again["printed"]
    assert {(r["caption"], r["image_url"]) for r in again["curated"]} == first
    assert {r["split"] for r in again["curated"]} == {"validation"}


def test_the_features_job_takes_the_import(gz_tsv, tmp_path):
    from conceptual.pipelines.features.features import FeaturesConfig, extract
    from conceptual.pipelines.features.features_data import feature_files, split_images

    summary = extract(str(gz_tsv["out"]), str(tmp_path / "f"), FeaturesConfig(crops=0))
    assert summary["images"] == PHOTOS
    files = feature_files(str(tmp_path / "f"))
    # train_captioner's and train_retriever's dev split, "val", finds the released "validation".
    for split in ("val", "validation"):
        assert len(split_images(files, str(tmp_path / "f"), split).image_ids) == PHOTOS


@pytest.mark.slow  # a fourth import (10-15 s); --split and resizing have unit tests too
def test_a_plain_tsv_with_split_and_resizing(ray_local, release):
    rows, base, tmp = release
    data = write_tsv(tmp / "plain" / "in.tsv", rows, base)
    result = run_job(tmp, "plain", data, "--split", "train", "image.resize.short_side=256")
    assert result["code"] == 0, result["printed"]
    assert result["stats"]["kept"] == PHOTOS
    assert "resize" in [row["stage"] for row in result["stats"]["funnel"]]
    for record in result["curated"]:
        assert record["split"] == "train"
        with Image.open(io.BytesIO(record["image"])) as image:
            assert image.size == (record["width"], record["height"])
        assert min(record["width"], record["height"]) == 256
        assert record["image_id"] == hashlib.sha1(record["image"]).hexdigest()


def test_unlabeled_parquet_files_of_one_split(ray_local, release):
    rows, base, tmp = release
    folder = tmp / "unlabeled"
    write_parquet(folder / "train-00000-of-00002.parquet", rows[: len(rows) // 2], base, False)
    write_parquet(folder / "train-00001-of-00002.parquet", rows[len(rows) // 2 :], base, False)
    result = run_job(tmp, "unlabeled", folder)
    assert result["code"] == 0, result["printed"]
    assert result["stats"]["input"] == len(rows) and result["stats"]["kept"] == PHOTOS
    released = {row.url(base): row.caption for row in rows}
    for record in result["curated"]:
        assert record["caption"] == released[record["image_url"]]
        assert record["split"] == "train" and record["labels"] == []


def test_labeled_parquet_labels_are_stored(labeled, release):
    rows, base, _ = release
    assert labeled["code"] == 0, labeled["printed"]
    by_url = {row.url(base): row for row in rows}
    assert labeled["curated"]
    for record in labeled["curated"]:
        row = by_url[record["image_url"]]
        assert [label["name"] for label in record["labels"]] == row.labels
        assert [label["mid"] for label in record["labels"]] == row.mids
        assert [label["score"] for label in record["labels"]] == pytest.approx(row.scores)
        assert all(label["wnid"] is None for label in record["labels"])
        assert record["split"] == "validation"


def test_labeled_overlap_uses_the_dataset_s_labels(labeled, release):
    rows, base, _ = release
    matcher = LabelMatcher()
    labels = {
        row.url(base): [
            {"wnid": None, "name": n, "score": s, "mid": m}
            for n, s, m in zip(row.labels, row.scores, row.mids)
        ]
        for row in rows
    }
    expected_kept = {
        row.url(base)
        for row in rows
        if row.kind == "photo" and not matcher.match(row.caption, labels[row.url(base)]).rejection
    }
    assert {r["image_url"] for r in labeled["curated"]} == expected_kept
    assert 0 < len(expected_kept) < PHOTOS
    assert all(record["matched"] for record in labeled["curated"])
    overlap = labeled["stats"]["rejected"]["overlap"]
    assert overlap == {"no_label_overlap": PHOTOS - len(expected_kept)}


def test_the_reader_gives_each_file_s_rows_its_split(ray_local, release):
    """A folder holding both splits: the rows of each file carry its split (the import
    passes `splits` to the reader when no one split holds for the whole input)."""
    from conceptual.pipelines.curation.curation_config import ResourcesConfig
    from conceptual.pipelines.dataflow.readers import read_candidates

    rows, base, tmp = release
    folder = tmp / "mixed"
    write_tsv(folder / "Train_GCC-training.tsv", rows[:5], base)
    write_parquet(folder / "validation-00000-of-00001.parquet", rows[5:9], base, True)
    range_bytes = ResourcesConfig().range_bytes
    read = read_candidates(str(folder), "auto", range_bytes, splits=True).take_all()
    splits = {row["image_url"]: row["split"] for row in read}
    assert [splits[row.url(base)] for row in rows[:9]] == ["train"] * 5 + ["validation"] * 4
    assert all(len(row["labels"] or []) == 0 for row in read if row["split"] == "train")
    assert all(row["labels"] for row in read if row["split"] == "validation")
    unsplit = read_candidates(str(folder), "auto", range_bytes).take_all()
    assert {row["split"] for row in unsplit} == {None}
