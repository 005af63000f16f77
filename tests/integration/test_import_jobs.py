"""The import jobs on the real COCO and Flickr8k samples, and an import into S3."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from PIL import Image

from conceptual import storage
from conceptual.importers import ImportConfig, csv_pairs, write_import
from conceptual.records import CURATED, IMPORTED

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def run_job(module: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", f"conceptual.jobs.{module}", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )


def coco_split_counts(coco: Path) -> dict[str, dict[str, int]]:
    """Images with captions and captions per split, as COCO's own files count them."""
    counts = {}
    for split in ("train", "val"):
        data = json.loads((coco / f"captions_{split}2017.json").read_text())
        images = {a["image_id"] for a in data["annotations"]}
        counts[split] = {"images": len(images), "captions": len(data["annotations"])}
    return counts


@pytest.mark.realdata
def test_import_coco_job_curates_both_splits(real_data, tmp_path):
    coco = real_data / "coco_mini"
    result = run_job("import_coco", "--root", str(coco), "--output", str(tmp_path), "--curated")
    assert result.returncode == 0, result.stderr[-2000:]
    assert str(tmp_path / "import.json") in result.stdout

    report = json.loads((tmp_path / "import.json").read_text())
    assert (report["images"], report["captions"], report["skipped"]) == (159, 795, 0)
    assert report["splits"] == coco_split_counts(coco)
    table = pq.read_table(tmp_path / "curated")
    assert table.schema == CURATED and table.num_rows == 795
    sizes = {}
    for row in table.select(["image_url", "width", "height", "split"]).to_pylist():
        split_folder = row["image_url"].split("/")[-2]  # .../val2017/000000000139.jpg
        assert row["split"] == split_folder.removesuffix("2017")
        sizes[row["image_url"]] = (row["width"], row["height"])
    name = "000000000139.jpg"
    with Image.open(coco / "val2017" / name) as image:
        assert sizes[f"http://images.cocodataset.org/val2017/{name}"] == image.size


@pytest.mark.realdata
def test_import_coco_job_pairs_annotations_with_image_folders(real_data, tmp_path):
    coco = real_data / "coco_mini"
    args = []
    for split in ("train2017", "val2017"):
        args += [
            "--annotations",
            str(coco / f"captions_{split}.json"),
            "--images",
            str(coco / split),
        ]
    result = run_job("import_coco", *args, "--output", str(tmp_path))
    assert result.returncode == 0, result.stderr[-2000:]
    table = pq.read_table(tmp_path / "candidates")
    assert table.schema == IMPORTED and table.num_rows == 795
    assert len(set(table["id"].to_pylist())) == 795


@pytest.mark.realdata
def test_import_captions_job_on_flickr8k(real_data, tmp_path):
    folder = real_data / "flickr8k_mini"
    result = run_job(
        "import_captions", "--folder", str(folder), "--output", str(tmp_path), "--curated"
    )
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads((tmp_path / "import.json").read_text())
    assert (report["images"], report["captions"], report["skipped"]) == (798, 3990, 0)
    assert sum(split["images"] for split in report["splits"].values()) == 798
    rows = pq.read_table(tmp_path / "curated", columns=["image_url", "split"]).to_pylist()
    split_of_image = {(row["image_url"], row["split"]) for row in rows}
    assert len(split_of_image) == 798  # one split per image


def test_jobs_exit_2_on_a_missing_folder(tmp_path):
    for module, args in [
        ("import_coco", ["--root", str(tmp_path / "nowhere")]),
        ("import_captions", ["--folder", str(tmp_path / "nowhere")]),
    ]:
        result = run_job(module, *args, "--output", str(tmp_path / "out"))
        assert result.returncode == 2
        assert result.stderr.strip() == f"error: {args[0]} {args[1]}: no such file or folder"
        assert not (tmp_path / "out").exists()  # refused before anything was written


def test_import_writes_to_s3(s3_endpoint, tmp_path):
    folder = tmp_path / "photos"
    (folder / "images").mkdir(parents=True)
    Image.new("RGB", (40, 30), "orange").save(folder / "images" / "a.jpg")
    (folder / "captions.csv").write_text("image,caption\na.jpg,An orange square.\n")
    uri = "s3://conceptual/imports/x"

    report = write_import(csv_pairs(folder), uri, ImportConfig(curated=True))

    assert report["output"] == f"{uri}/curated" and report["captions"] == 1
    assert storage.read_json(f"{uri}/_SUCCESS")["captions"] == 1
    assert storage.read_json(f"{uri}/import.json") == report
    fs, _ = storage.resolve(uri)
    [part] = storage.list_files(f"{uri}/curated")
    table = pq.read_table(part, filesystem=fs)
    assert table.schema == CURATED
    assert table.column("caption").to_pylist() == ["an orange square"]
