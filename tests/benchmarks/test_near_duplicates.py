"""Near-duplicate images (issue 59, 2; pipelines/curation/near_duplicates.py) on the shared photos:
NEAR_DUP_SOURCES of them (flickr8k_mini and coco_mini, drawn with a fixed seed; 100) each
copied six ways (tests/photo_copies.py: re-encoded at JPEG qualities 90, 70 and 50, resized
to 60%, cropped 10%, mirrored), mixed in shuffled order with NEAR_DUP_DISTINCT others (400)
once each. The embeddings are saved under <state>/benchmarks/ and reused by a rerun. Measured,
for each threshold of a sweep: the recall of copies (the copies and originals rejected as a
near-duplicate of their own photo, of the six per photo there are to reject) and the rows
wrongly merged (rejected as a near-duplicate of another photo; the goal is >= 0.95 and 0);
at the default threshold, without mirrors counted, and with the rows split into k-means
clusters (each row compared within its nearest one or two centroids) on a local Ray.

    .venv/bin/python -m pytest -p no:cacheprovider tests/benchmarks/test_near_duplicates.py -s
"""

from __future__ import annotations

import io
import os
import random

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from photo_copies import KINDS, copies
from PIL import Image

from conceptual.paths import state_dir
from conceptual.pipelines.curation.near_duplicates import (
    EMBEDDED,
    NearDedupConfig,
    close_pairs,
    find_near_duplicates,
    grouped,
)
from conceptual.vision.cnn import FeatureExtractor

pytestmark = pytest.mark.realdata

SOURCES = int(os.environ.get("NEAR_DUP_SOURCES", 100))
DISTINCT = int(os.environ.get("NEAR_DUP_DISTINCT", 400))
SWEEP = (0.8, 0.82, 0.84, 0.86, 0.88, 0.9, 0.92, 0.94, 0.96)


def shared_photos(real_data) -> list:
    found = sorted((real_data / "flickr8k_mini" / "images").glob("*.jpg"))
    found += sorted((real_data / "coco_mini").glob("*2017/*.jpg"))
    random.Random(0).shuffle(found)
    return found


def embedded_rows(named: list[tuple[str, bytes]]) -> pa.Table:
    """EMBEDDED rows of (name, image bytes), in that order, as the vision step embeds them
    (FeatureExtractor.pooled of each image and of its mirror image)."""
    from PIL import ImageOps

    extractor = FeatureExtractor()
    vectors, mirrors = [], []
    for start in range(0, len(named), 32):
        images = [Image.open(io.BytesIO(data)).convert("RGB") for _, data in named[start:][:32]]
        vectors.append(extractor.pooled(images))
        mirrors.append(extractor.pooled([ImageOps.mirror(i) for i in images]))
    as_lists = [pa.array(np.concatenate(v).tolist(), pa.list_(pa.float32())) for v in (vectors, mirrors)]  # fmt: skip
    n = len(named)
    return pa.table(
        [
            pa.array(range(n), pa.int64()),
            [name for name, _ in named],
            pa.nulls(n, pa.float64()),
            *as_lists,
        ],  # fmt: skip
        EMBEDDED,
    )


@pytest.fixture(scope="module")
def mixed(real_data):
    """(EMBEDDED rows in shuffled order, named `PHOTO/KIND`, the photo of each name)."""
    photos = shared_photos(real_data)
    named = []
    for path in photos[:SOURCES]:
        data = path.read_bytes()
        named.append((f"{path.name}/original", data))
        named += [(f"{path.name}/{kind}", copy) for kind, copy in copies(data).items()]
    others = photos[SOURCES : SOURCES + DISTINCT]
    named += [(f"{path.name}/original", path.read_bytes()) for path in others]
    random.Random(1).shuffle(named)
    saved = state_dir() / "benchmarks" / f"near_duplicates_{SOURCES}_{DISTINCT}.parquet"
    if not saved.exists():
        saved.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(embedded_rows(named), saved)
    return pq.read_table(saved).cast(EMBEDDED)


def measured(found: pa.Table, rows: pa.Table) -> dict:
    """Recall of copies and rows wrongly merged, from `grouped`'s FOUND rows."""
    names = dict(zip(rows["position"].to_pylist(), rows["id"].to_pylist()))
    same = wrong = 0
    for position, detail in zip(found["position"].to_pylist(), found["detail"].to_pylist()):
        kept = detail.removeprefix("a near-duplicate of ").split(" ")[0]
        if kept.split("/")[0] == names[position].split("/")[0]:
            same += 1
        else:
            wrong += 1
    return {"recall": round(same / (SOURCES * len(KINDS)), 4), "wrongly_merged": wrong}


@pytest.mark.timeout(3600)  # the CNN over 1,100 images and their mirror images, on CPUs
def test_recall_of_copies_and_photos_wrongly_merged_by_threshold(mixed, record):
    default = NearDedupConfig()
    pairs = close_pairs(mixed, min(SWEEP), mirrored=True)
    sweep = {
        str(t): measured(grouped(pairs.filter(pc.greater_equal(pairs["cosine"], t))), mixed)
        for t in SWEEP
    }
    at_default = measured(grouped(close_pairs(mixed, default.threshold, True)), mixed)
    no_mirrors = measured(grouped(close_pairs(mixed, default.threshold, False)), mixed)
    results = {
        "rows": mixed.num_rows,
        "photos_copied": SOURCES,
        "distinct_photos": DISTINCT,
        "copies_each": list(KINDS),
        "threshold": default.threshold,
        "at_threshold": at_default,
        "at_threshold_without_mirrors": no_mirrors,
        "sweep": sweep,
    }
    record("near_duplicates", results)
    assert at_default["recall"] >= 0.95 and at_default["wrongly_merged"] == 0


@pytest.mark.timeout(3600)
def test_clusters_of_the_shared_photos_find_what_one_table_finds(mixed, record, ray_local):
    """The rows split into k-means clusters of about 200 (each row compared within its
    nearest one or two centroids) on a local Ray, against comparing them all at once."""
    import ray.data

    default = NearDedupConfig()
    one_table = measured(grouped(close_pairs(mixed, default.threshold, True)), mixed)
    clustered = {}
    for nearest in (1, 2):
        settings = default.model_dump(exclude={"enabled"})
        settings |= {"nearest": nearest, "rows_per_cluster": 200}
        arguments, report = find_near_duplicates(ray.data.from_arrow(mixed), **settings)
        found = ray.get(arguments["found"].block)
        clustered[f"nearest_{nearest}"] = {**measured(found, mixed), "clusters": report["clusters"]}
    record("near_duplicates_clustered", {"one_table": one_table, **clustered})
    assert {k: clustered["nearest_2"][k] for k in one_table} == one_table
