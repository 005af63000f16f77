"""The shards users already have, as candidates (issue 60, 3), without Ray: WebDataset tars
as img2dataset writes them (with `webdataset`'s own TarWriter, as img2dataset does), read
sample by sample with their image bytes; a broken sample or shard rejected with a reason; a
tar with no captions refused whole; img2dataset's folder read by its shards; globs."""

from __future__ import annotations

import gzip
import io
import json
import tarfile

import pytest

from conceptual import storage
from conceptual.candidates import CandidateFormatError, detect_format
from conceptual.pipelines.dataflow.readers import beside_shards, candidate_files
from conceptual.records import candidate_id
from conceptual.shard_candidates import check_shard, shard_rows

JPEG = b"\xff\xd8\xff\xe0 not decoded here"


def img2dataset_shard(samples: list[dict]) -> bytes:
    """A tar as img2dataset's WebDatasetSampleWriter writes it: webdataset's TarWriter, each
    sample {"__key__", "jpg", "txt", "json"} (its JSON: url, caption, key, status...)."""
    from webdataset import TarWriter

    out = io.BytesIO()
    with TarWriter(out) as writer:
        for sample in samples:
            writer.write(sample)
    return out.getvalue()


def sample(n: int, **members) -> dict:
    meta = {
        "url": f"http://img.example/{n}.jpg",
        "caption": f"caption {n} in the json",
        "key": f"{n:09d}",
        "status": "success",
        "error_message": None,
        "width": 640,
        "height": 480,
    }
    return {"__key__": f"{n:09d}", "jpg": JPEG + b"%d" % n, "txt": f"a dog {n}",
            "json": json.dumps(meta, indent=4)} | members  # fmt: skip


def rows_of(data: bytes, name: str = "00000.tar", max_bytes: int = 1 << 20) -> list[dict]:
    return list(shard_rows(io.BytesIO(data), name, max_bytes))


def test_img2dataset_samples_are_candidates_with_their_images():
    rows = rows_of(img2dataset_shard([sample(0), sample(1)]))
    assert [r["reason"] for r in rows] == [None, None]
    assert [r["alt_text"] for r in rows] == ["a dog 0", "a dog 1"]  # .txt first
    assert [r["image_url"] for r in rows] == [
        "http://img.example/0.jpg",
        "http://img.example/1.jpg",
    ]
    assert rows[1]["image"] == JPEG + b"1"  # not fetched again
    assert rows[0]["id"] == candidate_id("http://img.example/0.jpg", "a dog 0")


def test_the_json_caption_serves_without_txt_and_the_curations_own_shards_read_back():
    """A sample with .json alone (img2dataset's caption_col, no save_caption) and a sample of
    the curation's shards (pipelines/curation/shards.py: image_url, alt_text, split)."""
    no_txt = sample(0)
    del no_txt["txt"]
    ours = {"__key__": "4f1c", "jpg": JPEG, "txt": "dog runs on grass",
            "json": json.dumps({"id": "4f1c", "image_url": "http://a.test/d.jpg",
                                "page_url": "http://a.test/", "alt_text": "Rex runs",
                                "split": "val"})}  # fmt: skip
    rows = rows_of(img2dataset_shard([no_txt, ours]))
    assert rows[0]["alt_text"] == "caption 0 in the json" and rows[0]["reason"] is None
    assert rows[1]["alt_text"] == "Rex runs"  # what the curated caption came from
    assert (rows[1]["image_url"], rows[1]["page_url"], rows[1]["split"]) == (
        "http://a.test/d.jpg", "http://a.test/", "val")  # fmt: skip


def test_png_and_webp_samples_and_samples_without_url():
    """A mirror's sample may have no URL: its image tells it apart, so two with the same
    caption are two candidates."""
    rows = rows_of(img2dataset_shard([
        {"__key__": "a", "png": b"\x89PNG one", "txt": "a red kite"},
        {"__key__": "b", "webp": b"RIFFwebp", "txt": "a red kite"},
    ]))  # fmt: skip
    assert [r["image"] for r in rows] == [b"\x89PNG one", b"RIFFwebp"]
    assert [r["reason"] for r in rows] == [None, None] and rows[0]["image_url"] is None
    assert rows[0]["id"] != rows[1]["id"]


def test_a_bad_sample_is_rejected_with_a_reason_and_the_shard_goes_on():
    bad = [
        {"__key__": "000000001", "jpg": JPEG},  # no caption at all
        {"__key__": "000000002", "jpg": JPEG, "txt": b"\xff\xfe bad"},
        {"__key__": "000000003", "jpg": JPEG, "json": b"{not json"},
        {"__key__": "000000004", "jpg": b"x" * 5000, "txt": "too big"},
    ]
    rows = rows_of(img2dataset_shard([sample(0), *bad, sample(5)]), max_bytes=4096)
    assert [r["reason"] for r in rows] == [
        None, "missing_caption", "invalid_utf8", "invalid_json", "too_large", None]  # fmt: skip
    assert {r["stage"] for r in rows[1:5]} == {"read"}
    assert rows[1]["detail"].startswith("00000.tar:000000001: no .txt")
    assert "5000 bytes" in rows[4]["detail"] and rows[4].get("image") is None


@pytest.mark.parametrize("damage", ["truncated", "header"])
def test_a_shard_broken_part_way_gives_what_came_before_and_one_rejection(damage):
    data = img2dataset_shard([sample(n) for n in range(6)])
    members = list(tarfile.open(fileobj=io.BytesIO(data)))  # 3 a sample
    if damage == "truncated":  # inside sample 3's image: sample 2 was whole
        data = data[: members[9].offset_data + 10]
    else:  # sample 3's image header garbled: tarfile stops there as at the end
        start = members[9].offset
        data = data[:start] + b"\x07" * 512 + data[start + 512 :]
    rows = rows_of(data)
    assert [r["reason"] for r in rows] == [None, None, None, "malformed_row"]
    assert rows[-1]["detail"].startswith("00000.tar: the shard breaks after 3 samples")


def test_a_gzipped_shard_reads_as_the_tar():
    data = img2dataset_shard([sample(0), sample(1)])
    assert rows_of(gzip.compress(data), "00000.tar.gz") == rows_of(data, "00000.tar.gz")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"alt_text\timage_url\n" * 100, "is not a tar file"),
        (img2dataset_shard([]), "a tar file with no samples"),
        (img2dataset_shard([{"__key__": "0", "jpg": JPEG}, {"__key__": "1", "jpg": JPEG}]),
         r"first sample has no caption \(0.jpg\).*KEY.txt"),
        (img2dataset_shard([{"__key__": "0", "jpg": JPEG, "json": '{"url": "http://a/"}'}]),
         "first sample has no caption"),
    ],
)  # fmt: skip
def test_a_tar_that_holds_no_candidates_is_refused_whole(data, message):
    with pytest.raises(CandidateFormatError, match=message):
        check_shard(io.BytesIO(data), "x.tar")


def test_shards_are_known_by_name_and_img2datasets_files_beside_them_are_not_read(tmp_path):
    assert detect_format("s3://b/cc3m/00012.tar", b"") == "webdataset"
    assert detect_format("00012.tar.gz", b"") == "webdataset"
    folder = tmp_path / "img2dataset"
    folder.mkdir()
    for stem in ("00000", "00001"):
        for suffix in (".tar", ".parquet", "_stats.json"):
            (folder / f"{stem}{suffix}").write_bytes(b"")
    (folder / "more.parquet").write_bytes(b"")  # no shard beside it: candidates
    names = [p.rsplit("/", 1)[-1] for p in candidate_files(str(folder))]
    assert names == ["00000.tar", "00001.tar", "more.parquet"]
    assert beside_shards(["a.parquet", "b.tar.gz", "b.parquet"]) == ["a.parquet", "b.tar.gz"]


def test_a_glob_names_the_files_it_matches(tmp_path):
    for name in ("a/00000.tar", "a/00001.tar", "a/notes.txt", "b/00000.tar"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes(b"")
    found = storage.list_files(str(tmp_path / "*" / "*.tar"))
    assert [p.removeprefix(str(tmp_path)) for p in found] == [
        "/a/00000.tar", "/a/00001.tar", "/b/00000.tar"]  # fmt: skip
    assert storage.list_files(str(tmp_path / "c" / "*.tar")) == []


def test_a_curation_that_kept_nothing_writes_no_shards(tmp_path):
    """webdataset.enabled with no curated record (a shard re-curated to nothing): no shards,
    counted as none, not a crash on the missing records."""
    from conceptual.pipelines.curation.shards import WebDatasetConfig, write_shards

    counts = write_shards(None, str(tmp_path / "shards"), WebDatasetConfig(enabled=True))
    assert counts == {"shards": 0, "samples": 0, "duplicates": 0}


def test_the_sample_grid_leaves_out_an_image_no_stage_checked(tmp_path):
    """A text-only curation (with_images=false) of shards keeps their images unchecked:
    the kept samples' grid, drawn at the run's end, leaves out one that does not decode."""
    from PIL import Image

    from conceptual.funnel import plot_kept_samples

    good = io.BytesIO()
    Image.new("RGB", (64, 48), "teal").save(good, "JPEG")
    records = [{"image": JPEG, "caption": "corrupt"}, {"image": good.getvalue(), "caption": "ok"}]
    assert plot_kept_samples(records, tmp_path / "grid.png")
    assert not plot_kept_samples(records[:1], tmp_path / "none.png")
