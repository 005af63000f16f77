"""Importers on tiny datasets made here: every caption imported or skipped with a reason,
records in the platform's schemas, captions in the released style, stable splits."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from PIL import Image

from conceptual import importers
from conceptual.fluency.flickr8k_cn import flickr8k_cn_pairs
from conceptual.importers import ImportConfig, ImportSourceError, released_style, write_import
from conceptual.records import CURATED, IMPORTED, candidate_id
from conceptual.splits import SplitConfig, assign_split


def jpeg(width: int, height: int, color: str) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, format="JPEG")
    return out.getvalue()


@pytest.fixture
def coco(tmp_path) -> tuple[Path, Path]:
    """A COCO captions file for val2017 with 2 good images, one whose file is missing, one
    that is not an image, a caption of an image id the file does not list, an empty caption."""
    images = tmp_path / "val2017"
    images.mkdir()
    (images / "a.jpg").write_bytes(jpeg(64, 48, "red"))
    (images / "b.jpg").write_bytes(jpeg(32, 40, "blue"))
    (images / "broken.jpg").write_bytes(b"this is not a picture")
    entries = [
        (1, "a.jpg", "http://images.cocodataset.org/val2017/a.jpg"),
        (2, "b.jpg", None),
        (3, "gone.jpg", None),
        (4, "broken.jpg", None),
    ]
    captions = [
        (1, "A man riding a horse."),
        (2, "Two dogs play in the snow."),
        (1, "  A horse and its rider \n"),
        (3, "A cat on a sofa."),
        (4, "A broken picture."),
        (1, "   "),
        (99, "A caption of an image nobody listed."),
    ]
    annotations = tmp_path / "captions_val2017.json"
    annotations.write_text(
        json.dumps(
            {
                "images": [
                    {"id": i, "file_name": name, "width": 1, "height": 1}
                    | ({"coco_url": url} if url else {})
                    for i, name, url in entries
                ],
                "annotations": [
                    {"id": 100 + n, "image_id": image_id, "caption": text}
                    for n, (image_id, text) in enumerate(captions)
                ],
            }
        )
    )
    return annotations, images


@pytest.fixture
def captions_folder(tmp_path) -> Path:
    """Flickr8k's layout; the rows of one image are not together and one caption is quoted."""
    folder = tmp_path / "flickr"
    (folder / "images").mkdir(parents=True)
    (folder / "images" / "x.jpg").write_bytes(jpeg(50, 50, "green"))
    (folder / "images" / "y.jpg").write_bytes(jpeg(60, 30, "white"))
    (folder / "captions.csv").write_text(
        "image,caption\n"
        'x.jpg,"A dog, wet from the rain, shakes itself ."\n'
        "y.jpg,A white wall .\n"
        "x.jpg,A wet dog .\n"
        "y.jpg,A blank white picture\n"
    )
    return folder


def read_rows(folder: Path) -> tuple[object, list[dict]]:
    table = pq.read_table(folder)
    return table.schema, table.to_pylist()


def test_coco_import_accounts_for_every_caption(coco, tmp_path):
    out = tmp_path / "out"
    report = write_import(importers.coco_pairs(*coco), str(out))

    assert report["input_captions"] == 7
    assert (report["images"], report["captions"], report["skipped"]) == (2, 3, 4)
    assert report["skipped_by_reason"] == dict.fromkeys(importers.SKIP_REASONS, 0) | {
        "missing_image": 2,
        "unreadable_image": 1,
        "empty_caption": 1,
    }
    listed = {(s["source_id"], s["reason"]) for s in report["skipped_captions"]}
    assert listed == {
        ("captions_val2017.json#103", "missing_image"),
        ("captions_val2017.json#106", "missing_image"),
        ("captions_val2017.json#104", "unreadable_image"),
        ("captions_val2017.json#105", "empty_caption"),
    }
    assert json.loads((out / "import.json").read_text()) == report
    assert json.loads((out / "_SUCCESS").read_text()) == {
        "input_captions": 7,
        "images": 2,
        "captions": 3,
        "skipped": 4,
    }


def test_coco_candidates_carry_their_image_and_a_stable_locator(coco, tmp_path):
    annotations, images = coco
    write_import(importers.coco_pairs(annotations, images), str(tmp_path / "out"))
    schema, rows = read_rows(tmp_path / "out" / "candidates")

    assert schema == IMPORTED
    by_text = {row["alt_text"]: row for row in rows}
    assert set(by_text) == {
        "A man riding a horse.",
        "A horse and its rider",
        "Two dogs play in the snow.",
    }
    coco_hosted, local = by_text["A man riding a horse."], by_text["Two dogs play in the snow."]
    assert coco_hosted["image_url"] == "http://images.cocodataset.org/val2017/a.jpg"
    assert local["image_url"] == "val2017/b.jpg"  # its path in the dataset, not on this machine
    assert local["image"] == (images / "b.jpg").read_bytes()
    assert all(row["id"] == candidate_id(row["image_url"], row["alt_text"]) for row in rows)


def test_candidates_carry_the_split_their_source_states(coco, captions_folder, tmp_path):
    """COCO's split, and a CSV folder's `split` column, ride on each candidate for the
    curation to keep (they were lost there, and the curation hashed again)."""
    write_import(importers.coco_pairs(*coco), str(tmp_path / "coco"))
    assert {row["split"] for row in read_rows(tmp_path / "coco" / "candidates")[1]} == {"val"}
    csv = captions_folder / "captions.csv"
    csv.write_text(
        "image,caption,split\nx.jpg,A wet dog .,Test\ny.jpg,A white wall .,\n"
        "x.jpg,A dog shakes itself .,\ny.jpg,A blank white picture,holdout\n"
    )
    report = write_import(importers.csv_pairs(captions_folder), str(tmp_path / "csv"))
    rows = read_rows(tmp_path / "csv" / "candidates")[1]
    assert {row["alt_text"]: row["split"] for row in rows} == {
        "A wet dog .": "test",
        "A dog shakes itself .": "test",  # an image's split, stated on one of its rows
        "A white wall .": None,  # none stated: the curation's hash decides
    }
    assert report["skipped"] == report["skipped_by_reason"]["malformed_row"] == 1
    config = ImportConfig(curated=True)
    write_import(importers.csv_pairs(captions_folder), str(tmp_path / "cur"), config)
    curated = read_rows(tmp_path / "cur" / "curated")[1]
    assert {row["split"] for row in curated if row["image_url"].endswith("x.jpg")} == {"test"}


def test_curated_coco_records_are_clean_and_keep_the_source_split(coco, tmp_path):
    config = ImportConfig(curated=True)
    report = write_import(importers.coco_pairs(*coco), str(tmp_path / "out"), config)
    schema, rows = read_rows(tmp_path / "out" / "curated")

    assert schema == CURATED
    assert report["splits"] == {"val": {"images": 2, "captions": 3}}
    horse = next(row for row in rows if row["alt_text"] == "A man riding a horse.")
    assert horse["caption"] == "a man riding a horse"
    assert (horse["width"], horse["height"], horse["split"]) == (64, 48, "val")
    assert horse["entities"] == horse["types"] == horse["labels"] == horse["matched"] == []


def test_split_by_hash_puts_all_captions_of_an_image_in_its_hash_split(coco, tmp_path):
    config = ImportConfig(curated=True, split_by="hash")
    write_import(importers.coco_pairs(*coco), str(tmp_path / "out"), config)
    _, rows = read_rows(tmp_path / "out" / "curated")
    assert {row["split"] for row in rows} <= {"train", "val", "test"}
    assert all(row["split"] == assign_split(row["image"], SplitConfig()) for row in rows)


def test_a_file_name_without_a_split_leaves_the_split_to_the_hash(coco, tmp_path):
    annotations, images = coco
    renamed = annotations.rename(tmp_path / "captions_constrained.json")
    assert {pair.source_split for pair in importers.coco_pairs(renamed, images)} == {None}


def test_csv_pairs_read_quoted_captions_and_group_by_image(captions_folder):
    pairs = list(importers.csv_pairs(captions_folder))
    assert [(p.image_path.name, p.caption, p.source_id) for p in pairs] == [
        ("x.jpg", "A dog, wet from the rain, shakes itself .", "captions.csv:2"),
        ("x.jpg", "A wet dog .", "captions.csv:4"),
        ("y.jpg", "A white wall .", "captions.csv:3"),
        ("y.jpg", "A blank white picture", "captions.csv:5"),
    ]
    assert pairs[0].image_url == "images/x.jpg"
    assert {p.source_split for p in pairs} == {None}


def test_csv_splits_are_stable_across_runs_and_shared_by_an_images_captions(
    captions_folder, tmp_path
):
    config = ImportConfig(curated=True)
    splits = []
    for run in ("first", "second"):
        write_import(importers.csv_pairs(captions_folder), str(tmp_path / run), config)
        _, rows = read_rows(tmp_path / run / "curated")
        splits.append({row["id"]: (row["image_url"], row["split"]) for row in rows})
    assert splits[0] == splits[1] and len(splits[0]) == 4
    split_of_image = dict(splits[0].values())
    assert len(split_of_image) == 2
    for name, split in split_of_image.items():
        image = (captions_folder / "images" / name.rsplit("/", 1)[1]).read_bytes()
        assert split == assign_split(image, SplitConfig())


@pytest.mark.parametrize(
    ("caption", "expected"),
    [
        ("A man riding a horse.", "a man riding a horse"),
        (
            "Two people at the edge of a lake , facing the water .",
            "two people at the edge of a lake , facing the water",
        ),
        ("A dog, wet from the rain.", "a dog , wet from the rain"),
        ("A close-up of a T-shirt", "a close - up of a t - shirt"),
        ("It's a man's hat!", "it 's a man 's hat !"),
        ("They don't swim", "they do n't swim"),
        ('A sign that says "stop".', "a sign that says stop"),
        ("  A   cat\non a mat \n", "a cat on a mat"),
        ("Where is the ball?", "where is the ball ?"),
        ("A 3.5 ft wall", "a 3.5 ft wall"),
        (".", ""),
    ],
)
def test_released_style(caption, expected):
    assert released_style(caption) == expected


def test_repeated_captions_of_an_image_are_skipped_not_duplicated(captions_folder, tmp_path):
    with (captions_folder / "captions.csv").open("a") as f:
        f.write("x.jpg,A wet dog .\nx.jpg,A wet dog\n")
    candidates = write_import(importers.csv_pairs(captions_folder), str(tmp_path / "c"))
    curated = write_import(
        importers.csv_pairs(captions_folder), str(tmp_path / "d"), ImportConfig(curated=True)
    )
    # Raw text differs in one repeat only; in the released style both repeat "a wet dog".
    assert candidates["skipped_by_reason"]["duplicate_caption"] == 1
    assert curated["skipped_by_reason"]["duplicate_caption"] == 2
    _, rows = read_rows(tmp_path / "d" / "curated")
    assert len({row["id"] for row in rows}) == len(rows) == 4


def test_parts_are_bounded_and_a_rerun_replaces_the_previous_output(captions_folder, tmp_path):
    out = tmp_path / "out"
    write_import(importers.csv_pairs(captions_folder), str(out), ImportConfig(rows_per_part=3))
    parts = sorted(p.name for p in (out / "candidates").iterdir())
    assert parts == ["part-00000.parquet", "part-00001.parquet"]
    assert [pq.read_metadata(out / "candidates" / p).num_rows for p in parts] == [3, 1]

    write_import(importers.csv_pairs(captions_folder), str(out), ImportConfig(curated=True))
    assert sorted(p.name for p in out.iterdir()) == ["_SUCCESS", "curated", "import.json"]
    assert [p.name for p in (out / "curated").iterdir()] == ["part-00000.parquet"]


def test_each_image_is_read_once(captions_folder, tmp_path, monkeypatch):
    reads = []
    original = Path.read_bytes

    def counted(path: Path) -> bytes:
        reads.append(path.name)
        return original(path)

    monkeypatch.setattr(Path, "read_bytes", counted)
    write_import(importers.csv_pairs(captions_folder), str(tmp_path / "out"))
    assert sorted(reads) == ["captions.csv", "x.jpg", "y.jpg"]


def test_coco_sources_finds_both_layouts(tmp_path):
    for split in ("train2017", "val2017"):
        (tmp_path / split).mkdir()
        (tmp_path / f"captions_{split}.json").write_text("{}")
    assert importers.coco_sources(tmp_path) == [
        (tmp_path / "captions_train2017.json", tmp_path / "train2017"),
        (tmp_path / "captions_val2017.json", tmp_path / "val2017"),
    ]
    (tmp_path / "annotations").mkdir()
    (tmp_path / "annotations" / "captions_val2017.json").write_text("{}")
    assert importers.coco_sources(tmp_path) == [
        (tmp_path / "annotations" / "captions_val2017.json", tmp_path / "val2017")
    ]
    (tmp_path / "annotations" / "captions_test2017.json").write_text("{}")
    with pytest.raises(ImportSourceError, match="test2017"):
        importers.coco_sources(tmp_path)


def test_sources_that_cannot_be_imported_raise_a_clear_error(tmp_path, coco):
    annotations, images = coco
    with pytest.raises(ImportSourceError, match="no such folder"):
        importers.coco_pairs(annotations, tmp_path / "nowhere")
    with pytest.raises(ImportSourceError, match="no such file"):
        importers.coco_pairs(tmp_path / "nothing.json", images)
    with pytest.raises(ImportSourceError, match="no such folder"):
        importers.csv_pairs(tmp_path / "nowhere")
    (tmp_path / "csv" / "images").mkdir(parents=True)
    with pytest.raises(ImportSourceError, match="no such file"):
        importers.csv_pairs(tmp_path / "csv")
    (tmp_path / "csv" / "captions.csv").write_text("file,text\na.jpg,A dog\n")
    with pytest.raises(ImportSourceError, match="image and caption"):
        importers.csv_pairs(tmp_path / "csv")
    annotations.write_text('{"info": {}}')
    with pytest.raises(ImportSourceError, match="not a COCO captions file"):
        list(importers.coco_pairs(annotations, images))


def test_image_paths_that_leave_the_dataset_are_skipped(captions_folder, tmp_path):
    secret = tmp_path / "secret.jpg"  # an image, but not the dataset's
    secret.write_bytes(jpeg(20, 20, "black"))
    (captions_folder / "images" / "link.jpg").symlink_to(secret)
    with (captions_folder / "captions.csv").open("a") as f:
        f.write(f"../../secret.jpg,A way out .\n{secret},An absolute path .\n")
        f.write("link.jpg,A link out .\n/etc/hostname,A system file .\n")
    out = tmp_path / "out"
    report = write_import(importers.csv_pairs(captions_folder), str(out))

    assert report["skipped_by_reason"]["outside_dataset"] == 4
    assert report["captions"] == 4 and report["input_captions"] == 8
    _, rows = read_rows(out / "candidates")
    assert all(row["image"] != secret.read_bytes() for row in rows)
    assert not any("hostname" in row["image_url"] for row in rows)


def test_coco_file_names_that_leave_the_dataset_are_skipped(coco, tmp_path):
    annotations, images = coco
    data = json.loads(annotations.read_text())
    data["images"][1]["file_name"] = "../captions_val2017.json"
    annotations.write_text(json.dumps(data))
    report = write_import(importers.coco_pairs(annotations, images), str(tmp_path / "out"))
    assert report["skipped_by_reason"]["outside_dataset"] == 1


def test_unreadable_csv_rows_are_skipped_and_counted(captions_folder, tmp_path):
    with (captions_folder / "captions.csv").open("ab") as f:
        f.write(b"x.jpg,Bytes \xff\xfe that are not UTF-8\n")
        f.write(b"x.jpg,A dog " + b"x" * 70_000 + b"\n")
        f.write(b"x.jpg,\"A field over csv's own limit " + b"y" * 200_000 + b'"\n')
        f.write(b"y.jpg,A row after them all .\n")
    report = write_import(importers.csv_pairs(captions_folder), str(tmp_path / "out"))

    reasons = report["skipped_by_reason"]
    assert (reasons["invalid_utf8"], reasons["too_long"], reasons["malformed_row"]) == (1, 1, 1)
    assert report["captions"] == 5 and report["input_captions"] == 8
    listed = {s["source_id"]: s["reason"] for s in report["skipped_captions"]}
    assert listed["captions.csv:6"] == "invalid_utf8" and listed["captions.csv:7"] == "too_long"


def test_a_nul_byte_in_a_coco_file_name_skips_that_row_only(coco, tmp_path):
    annotations, images = coco
    data = json.loads(annotations.read_text())
    data["images"][1]["file_name"] = "b.jpg\x00.txt"  # b: "Two dogs play in the snow."
    data["images"].append({"id": 5, "file_name": 5})  # not text either
    data["annotations"].append({"id": 200, "image_id": 5, "caption": "A number for a name."})
    annotations.write_text(json.dumps(data))
    out = tmp_path / "out"
    report = write_import(importers.coco_pairs(annotations, images), str(out))

    assert report["skipped_by_reason"]["invalid_file_name"] == 2
    assert (report["captions"], report["input_captions"]) == (2, 8)
    listed = {s["source_id"]: s["reason"] for s in report["skipped_captions"]}
    assert (
        listed["captions_val2017.json#101"]
        == listed["captions_val2017.json#200"]
        == ("invalid_file_name")
    )
    assert "skipped:  6 captions" in importers.summary(report)
    assert json.loads((out / "import.json").read_text()) == report  # NUL escaped in the JSON


def test_ids_and_locators_do_not_depend_on_where_the_dataset_lies(
    captions_folder, coco, tmp_path, monkeypatch
):
    moved = shutil.copytree(captions_folder, tmp_path / "elsewhere" / "deeper" / "flickr")
    monkeypatch.chdir(captions_folder)  # "." names the folder as well as its absolute path
    ids = {}
    for name, folder in [("here", captions_folder), ("moved", moved), ("relative", Path("."))]:
        write_import(importers.csv_pairs(folder), str(tmp_path / name))
        _, rows = read_rows(tmp_path / name / "candidates")
        ids[name] = sorted((row["id"], row["image_url"]) for row in rows)
    assert ids["here"] == ids["moved"] == ids["relative"]
    assert {url for _, url in ids["here"]} == {"images/x.jpg", "images/y.jpg"}

    annotations, images = coco
    coco_moved = shutil.copytree(images, tmp_path / "coco" / "val2017")
    urls = [
        sorted(p.image_url for p in importers.coco_pairs(annotations, folder) if not p.problem)
        for folder in (images, coco_moved)
    ]
    assert urls[0] == urls[1]
    assert not any(url.startswith(("/", "file:")) or str(tmp_path) in url for url in urls[0])


def test_a_flickr8k_cn_photo_that_links_outside_its_folder_is_skipped(tmp_path):
    """The check import_captions makes (importers.image_in), not a copy of it."""
    images, cn = tmp_path / "images", tmp_path / "cn"
    images.mkdir()
    cn.mkdir()
    (images / "a.jpg").write_bytes(jpeg(20, 20, "red"))
    secret = tmp_path / "secret.jpg"
    secret.write_bytes(jpeg(20, 20, "black"))
    (images / "link.jpg").symlink_to(secret)
    (cn / "flickr8kzhc.caption.txt").write_text(
        "a.jpg#zhc#0 一只狗在草地上跑。\nlink.jpg#zhc#0 一张别人的照片。\n", encoding="utf-8"
    )
    pairs, _ = flickr8k_cn_pairs(images, cn, "native")
    by_name = {pair.caption: pair for pair in pairs}
    good, link = by_name["一只狗在草地上跑。"], by_name["一张别人的照片。"]
    assert good.problem is None and good.image_url == "images/a.jpg"
    assert link.problem is not None and link.problem.reason == "outside_dataset"
    assert link.image_url == ""
