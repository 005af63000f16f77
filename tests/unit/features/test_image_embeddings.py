"""The vision step's image embeddings (records.PROCESSED's `embedding`, `mirrored_embedding`):
the features job's pooled vector of the same photo, computed only when a rule asks, gone from
a rejected row and never written out."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image, ImageOps

from conceptual.pipelines.curation import image_operators
from conceptual.pipelines.dataflow.rows import table, to_curated, to_rejected
from conceptual.records import CURATED, IN_FLIGHT, REJECTED
from conceptual.vision.cnn import CnnConfig, FeatureExtractor
from conceptual.vision.images import ImageFilterConfig
from conceptual.vision.labels import OverlapConfig

pytestmark = pytest.mark.realdata


@pytest.fixture(scope="module")
def photos(real_data):
    paths = sorted((real_data / "flickr8k_mini").rglob("*.jpg"))[:2]
    return [path.read_bytes() for path in paths]


def rows(images: list[bytes | None]) -> list[dict]:
    return [
        dict.fromkeys(IN_FLIGHT.names)
        | {"id": str(i), "alt_text": "a dog", "caption": "a dog", "image": image, "position": i}
        for i, image in enumerate(images)
    ]


def vision(**kwargs):
    # The overlap rule off: these rows are judged by their images alone.
    return image_operators.VisionOperator(
        ImageFilterConfig(min_side=1, max_aspect=float("inf")),
        CnnConfig(),
        OverlapConfig(enabled=False),
        **kwargs,
    )


def test_an_embedding_is_the_features_jobs_pooled_vector_of_the_photo(photos):
    out = vision(embeds=True, mirrored=True)(table(rows([*photos, b"not an image"])))
    records = out.to_pylist()
    extractor = FeatureExtractor(CnnConfig())
    for record, data in zip(records, photos):
        image = Image.open(io.BytesIO(data)).convert("RGB")
        [(pooled, _)] = extractor.extract([image])[0]
        [(mirror, _)] = extractor.extract([ImageOps.mirror(image)])[0]
        assert np.allclose(record["embedding"], pooled, atol=1e-4)
        assert np.allclose(record["mirrored_embedding"], mirror, atol=1e-4)
        assert not np.allclose(pooled, mirror, atol=1e-2)  # a photo is not its mirror image
    assert records[2]["reason"] is not None  # undecodable: rejected, and no embedding
    assert records[2]["embedding"] == [] and records[2]["mirrored_embedding"] == []
    # Never written out: neither output's records carry it.
    assert to_curated(out).schema == CURATED and to_rejected(out).schema == REJECTED


def test_without_a_rule_that_compares_images_no_embedding_is_made(photos):
    operator = vision()
    assert operator.extractor is None
    out = operator(table(rows(photos))).to_pylist()
    assert [r["embedding"] for r in out] == [[], []]
    out = vision(embeds=True)(table(rows(photos))).to_pylist()
    assert all(len(r["embedding"]) == 1280 and r["mirrored_embedding"] == [] for r in out)
