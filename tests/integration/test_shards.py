"""WebDataset shards on a local Ray: a record id given twice is one sample, not two tar
members of the same name, wherever the copies fall among the batches."""

from __future__ import annotations

import json
import tarfile

import pyarrow as pa
import pytest
import ray.data

from conceptual.pipelines.curation.shards import WebDatasetConfig, write_shards
from conceptual.records import CURATED

pytestmark = pytest.mark.integration


def curated_record(n: int, split: str = "train") -> dict:
    return {
        "id": f"id{n:04d}",
        "image_url": f"http://x.test/{n}.jpg",
        "alt_text": f"A dog {n}",
        "caption": f"a dog {n}",
        "entities": [],
        "types": [],
        "labels": [],
        "matched": [],
        "image": b"\xff\xd8jpeg %d" % n,
        "width": 10,
        "height": 10,
        "split": split,
    }


def test_duplicate_records_become_one_sample(ray_local, tmp_path):
    records = [curated_record(n, "train" if n % 2 else "val") for n in range(10)]
    # id0003 three times (twice in the first batch of 4), id0007 twice, in other batches.
    given = records + [records[3], records[7], records[3]]
    given = given[:2] + [records[3]] + given[2:]
    curated = ray.data.from_arrow(pa.Table.from_pylist(given, schema=CURATED))

    counts = write_shards(curated, str(tmp_path), WebDatasetConfig(samples_per_shard=4))

    assert counts["samples"] == 10 and counts["duplicates"] == 4
    members = []
    for shard in sorted(tmp_path.rglob("*.tar")):
        with tarfile.open(shard) as tar:
            members += tar.getnames()
    assert len(members) == len(set(members)) == 30  # .jpg, .txt and .json of each id
    assert {m.split(".")[0] for m in members} == {r["id"] for r in records}


def test_shards_are_named_as_img2dataset_names_them_and_read_by_webdataset(ray_local, tmp_path):
    """SPLIT/00000.tar, 00001.tar...: what `webdataset` (and img2dataset's readers) stream,
    each sample KEY.jpg, KEY.txt and KEY.json."""
    import webdataset

    records = [curated_record(n, "train" if n < 7 else "test") for n in range(10)]
    curated = ray.data.from_arrow(pa.Table.from_pylist(records, schema=CURATED))

    counts = write_shards(curated, str(tmp_path), WebDatasetConfig(samples_per_shard=3))

    names = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.tar"))
    for split in ("train", "test"):  # numbered from 00000 in each split, none missing
        mine = [name for name in names if name.startswith(f"{split}/")]
        assert mine == [f"{split}/{i:05d}.tar" for i in range(len(mine))] and mine
    assert counts["shards"] == len(names) and counts["samples"] == 10
    samples = list(webdataset.WebDataset([str(tmp_path / n) for n in names], shardshuffle=False))
    assert sorted(s["__key__"] for s in samples) == [r["id"] for r in records]
    for sample in samples:
        record = next(r for r in records if r["id"] == sample["__key__"])
        assert sample["jpg"] == record["image"]
        assert sample["txt"].decode() == record["caption"]
        assert json.loads(sample["json"])["split"] == record["split"]
