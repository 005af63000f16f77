"""Exact duplicates over a whole run (pipelines/dataflow/rows.py, find_duplicates): past
dedup.keys_per_partition the keys are hash-partitioned across the cluster, by URL and then
by image, and that finds what comparing them all in one table finds; each batch then reads
only the blocks of found positions its rows fall in."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
import ray.data
from curated_rows import outputs

from conceptual.config import load
from conceptual.pipelines.curation.curation import curate
from conceptual.pipelines.curation.curation_config import CurationConfig
from conceptual.pipelines.dataflow.rows import (
    Positions,
    duplicate_keys,
    duplicates,
    find_duplicates,
    mark_duplicates,
    table,
)
from conceptual_demo.corpus import generate_candidates, write_candidates

pytestmark = pytest.mark.integration


def candidates(n: int, seed: int = 0) -> pa.Table:
    """Kept candidates in shuffled input order, repeating URLs and images across each other:
    a few URLs and images are shared by many rows, some rows have no image id."""
    rng = np.random.default_rng(seed)
    positions = rng.permutation(n) * 7  # sparse, as a file's offsets are
    urls, images = rng.integers(0, n // 3, n), rng.integers(0, n // 4, n)
    no_image = rng.random(n) < 0.1
    return table(
        [
            {
                "id": f"r{p}",
                "position": int(p),
                "image_url": f"http://img.test/{u}.jpg",
                "image_id": None if missing else f"{i:040x}",
                "alt_text": "a dog",
                "caption": "a dog",
            }
            for p, u, i, missing in zip(positions, urls, images, no_image)
        ]
    )


def found_by(rows: pa.Table, **settings) -> tuple[Positions, pa.Table]:
    """What find_duplicates finds in `rows` (their keys in blocks of 1,000 rows), and the
    rows marked by it."""
    keys = ray.data.from_arrow(
        [duplicate_keys(rows.slice(i, 1000)) for i in range(0, rows.num_rows, 1000)]
    )
    arguments, report = find_duplicates(keys, **settings)
    assert report == {}
    return arguments["found"], mark_duplicates(rows, **arguments)


def test_hash_partitioned_keys_find_what_one_table_finds(ray_local):
    rows = candidates(4_000)
    settings = {"by_url": True, "by_image": True}
    expected = duplicates(duplicate_keys(rows), **settings)
    assert 0 < expected.num_rows < rows.num_rows and pa.compute.any(expected["same_image"])

    one_table, marked_here = found_by(rows, **settings, keys_per_partition=1_000_000)
    partitioned, marked_across = found_by(rows, **settings, keys_per_partition=800)

    assert len(one_table.blocks) == 1 and len(partitioned.blocks) > 1
    assert marked_across.equals(marked_here)
    listed = marked_here.filter(pa.compute.equal(marked_here["reason"], "duplicate"))
    assert sorted(listed["position"].to_pylist()) == expected["position"].to_pylist()
    # A batch of positions from far apart reads the blocks they fall in, and only finds those.
    positions = rows["position"].to_numpy()[:50]
    found, same_image = partitioned.lookup(np.append(positions, [-1, 10**12]))
    wanted = set(expected["position"].to_pylist())
    assert found.tolist() == [p in wanted for p in positions] + [False, False]


def test_the_first_of_each_url_and_then_of_each_image_is_kept_and_the_rest_say_why(ray_local):
    rows = table(
        [
            {"id": "a", "position": 3, "image_url": "u1", "image_id": "i1", "caption": "x"},
            {"id": "b", "position": 1, "image_url": "u1", "image_id": "i2", "caption": "x"},
            {"id": "c", "position": 2, "image_url": "u2", "image_id": "i2", "caption": "x"},
            {"id": "d", "position": 4, "image_url": "u3", "image_id": None, "caption": "x"},
            {"id": "e", "position": 0, "image_url": "u3", "stage": "text", "reason": "hashtag"},
        ]
    )
    _, marked = found_by(rows, by_url=True, by_image=True, keys_per_partition=100)
    out = {r["id"]: r for r in marked.to_pylist()}
    assert [out[i]["reason"] for i in "abcde"] == ["duplicate", None, "duplicate", None, "hashtag"]
    assert out["a"]["detail"] == "the same image URL as an earlier candidate"
    assert out["c"]["detail"] == "the same image bytes as an earlier candidate (image_id i2)"
    assert out["a"]["caption"] is None and out["c"]["stage"] == "deduplicate"
    assert out["e"]["stage"] == "text"
    _, unchanged = found_by(rows, by_url=False, by_image=False, keys_per_partition=100)
    assert unchanged.equals(rows)


@pytest.mark.slow  # two curations; the hash partitions are tested above on their own
def test_a_curation_with_partitioned_keys_writes_what_one_table_writes(ray_local, tmp_path):
    write_candidates(generate_candidates(600, seed=3), str(tmp_path / "in.tsv"), fmt="cc_tsv")
    settings = ["with_images=false", "entity_frequency.more_than=2", "resources.batch_size=50"]
    stats = {}
    for name, per_partition in (("one", 1_000_000), ("partitioned", 40)):
        overrides = [*settings, f"dedup.keys_per_partition={per_partition}"]
        stats[name] = curate(
            str(tmp_path / "in.tsv"),
            str(tmp_path / name),
            load(CurationConfig, overrides=overrides),
        )
    assert stats["one"]["funnel"] == stats["partitioned"]["funnel"]
    assert stats["one"]["rejected"]["deduplicate"]["duplicate"] > 0
    assert outputs(str(tmp_path / "one")) == outputs(str(tmp_path / "partitioned"))
