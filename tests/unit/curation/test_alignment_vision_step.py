"""The vision step with an alignment scorer (pipelines/curation/image_operators.py): every pair whose
image passes the filters gets its `alignment_score`, the scorer's cosine over the image's
CNN embedding; with alignment.min_score the pairs under it are rejected there,
low_alignment, and keep their score."""

from __future__ import annotations

import io

import numpy as np
import pytest
from alignment_scorers import saved_scorer
from photo_copies import jpeg
from PIL import Image

from conceptual.pipelines.curation.image_operators import VisionOperator
from conceptual.pipelines.dataflow.rows import table
from conceptual.records import IN_FLIGHT
from conceptual.vision.alignment import AlignmentConfig, load_scorer
from conceptual.vision.cnn import CnnConfig, FeatureExtractor
from conceptual.vision.images import ImageFilterConfig
from conceptual.vision.labels import OverlapConfig
from conceptual_demo.images import PHOTOS, load_photo


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    """The demo's photos, a caption of each, and a scorer fitted to them."""
    photos = [jpeg(load_photo(photo), 92) for photo in PHOTOS]
    captions = [photo.captions()[0].lower() for photo in PHOTOS]
    decoded = [Image.open(io.BytesIO(data)).convert("RGB") for data in photos]
    vectors = FeatureExtractor(CnnConfig()).pooled(decoded)
    scorer = saved_scorer(tmp_path_factory.mktemp("scorer") / "s", captions, vectors, steps=60)
    return photos, captions, vectors, scorer


def rows(photos, captions) -> list[dict]:
    return [
        dict.fromkeys(IN_FLIGHT.names)
        | {"id": str(i), "alt_text": c, "caption": c, "image": p, "position": i}
        for i, (p, c) in enumerate(zip(photos, captions))
    ]


def test_pairs_are_scored_and_those_under_min_score_rejected(pairs):
    photos, captions, vectors, path = pairs
    others = captions[1:] + captions[:1]  # each photo with the next photo's caption
    scorer = load_scorer(str(path), "cpu")
    true, shifted = scorer.score(vectors, captions), scorer.score(vectors, others)
    assert true.min() > shifted.max()  # the fitted scorer tells them apart
    threshold = float(true.min() + shifted.max()) / 2
    vision = VisionOperator(
        ImageFilterConfig(min_side=1, max_aspect=float("inf")),
        CnnConfig(),
        OverlapConfig(enabled=False, rule="alignment"),
        embeds=True,
        alignment=AlignmentConfig(scorer=str(path), min_score=threshold),
    )
    batch = rows([*photos, *photos, b"not an image"], [*captions, *others, captions[0]])
    out = vision(table(batch)).to_pylist()
    n = len(photos)
    assert [r["reason"] for r in out[:n]] == [None] * n
    assert [(r["stage"], r["reason"]) for r in out[n : 2 * n]] == [
        ("alignment", "low_alignment")
    ] * n
    assert out[n]["detail"] == f"alignment score {shifted[0]:.4f} < {threshold:.4f}"
    # The score is in every record the scorer saw, kept or rejected (float32: as computed).
    scores = np.array([r["alignment_score"] for r in out[: 2 * n]], np.float32)
    assert np.allclose(scores, np.concatenate([true, shifted]), atol=1e-4)
    assert out[-1]["reason"] == "undecodable" or out[-1]["stage"] == "image"
    assert out[-1]["alignment_score"] is None  # its image failed: never scored
