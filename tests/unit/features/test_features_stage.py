"""The features operator on one batch: a row per record and crop, the CNN run once per photo."""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import skimage.data
from PIL import Image

from conceptual.pipelines.features.features import FeatureOperator, FeaturesConfig
from conceptual.records import image_id


def jpeg(array) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, "JPEG")
    return buffer.getvalue()


def test_records_of_one_photo_share_one_cnn_pass():
    coffee, cat = jpeg(skimage.data.coffee()), jpeg(skimage.data.chelsea())
    batch = pa.table(
        {
            "id": ["a", "b", "c", "d"],
            "split": ["train"] * 4,
            "caption": ["a cup", "coffee", "a cat", "no photo"],
            "image": [coffee, coffee, cat, None],
        }
    )
    operator = FeatureOperator(FeaturesConfig(crops=1))
    seen = []
    extract = operator.extractor.extract
    operator.extractor.extract = lambda images, **kw: (
        seen.append(len(images)) or extract(images, **kw)
    )

    rows = operator(batch).to_pylist()

    assert seen == [2]  # two distinct photos, the record without one skipped
    assert [(r["id"], r["crop"]) for r in rows] == [(i, c) for i in "abc" for c in (0, 1)]
    by_key = {(r["id"], r["crop"]): np.asarray(r["pooled"]) for r in rows}
    assert np.array_equal(by_key["a", 0], by_key["b", 0])
    assert not np.array_equal(by_key["a", 0], by_key["c", 0])
    assert rows[0]["grid_shape"] == [8, 8, len(rows[0]["pooled"])]
    assert rows[0]["language"] is None and rows[0]["fluency"] is None  # English records


def test_a_captions_language_and_fluency_score_come_along():
    photo = jpeg(skimage.data.coffee())
    batch = pa.table(
        {
            "id": ["a", "b"],
            "split": ["train"] * 2,
            "caption": ["一杯 咖啡", "咖啡"],
            "image": [photo, photo],
            "language": ["zh", "zh"],
            "fluency": pa.array([0.75, None], pa.float32()),
        }
    )
    rows = FeatureOperator(FeaturesConfig())(batch).to_pylist()
    assert [(r["language"], r["fluency"]) for r in rows] == [("zh", 0.75), ("zh", None)]


def test_the_image_id_curation_wrote_is_kept_and_older_data_gets_one():
    photo = jpeg(skimage.data.coffee())
    curated = {"id": ["a"], "split": ["train"], "caption": ["a cup"], "image": [photo]}
    stored = FeatureOperator(FeaturesConfig())(pa.table({**curated, "image_id": ["written"]}))
    assert stored["image_id"].to_pylist() == ["written"]
    # Curated data from before curation wrote the column: the hash of the photo's bytes.
    older = FeatureOperator(FeaturesConfig())(pa.table(curated))
    assert older["image_id"].to_pylist() == [image_id(photo)]
