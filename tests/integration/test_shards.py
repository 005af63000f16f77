"""WebDataset shards on a local Ray: a record id given twice is one sample, not two tar
members of the same name, wherever the copies fall among the batches."""

from __future__ import annotations

import tarfile

import pyarrow as pa
import pytest
import ray.data

from conceptual.pipelines.shards import WebDatasetConfig, write_shards
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
    for shard in sorted(tmp_path.glob("*.tar")):
        with tarfile.open(shard) as tar:
            members += tar.getnames()
    assert len(members) == len(set(members)) == 30  # .jpg, .txt and .json of each id
    assert {m.split(".")[0] for m in members} == {r["id"] for r in records}
