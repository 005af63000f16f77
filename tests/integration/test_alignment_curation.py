"""A small curation with the learned alignment rule on (issue 59, 1), on a local Ray: the
demo's photos each with its own caption and with another photo's, a scorer fitted to the
true pairs, alignment.keep_fraction=0.5 by the score alone. The true pairs are the top half
and are kept; the others are rejected low_alignment; every record, curated or rejected,
carries its alignment_score; stats.json counts the reason and reports the threshold."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from alignment_scorers import saved_scorer
from photo_copies import jpeg
from PIL import Image

from conceptual import storage
from conceptual.vision.cnn import CnnConfig, FeatureExtractor
from conceptual_demo.images import PHOTOS, load_photo

pytestmark = pytest.mark.integration


@pytest.mark.slow  # a curation with images: the CNN over 5 photos, the NLP stage over 10 pairs
def test_a_curation_keeps_the_best_aligned_half(ray_local, tmp_path):
    from conceptual.config import load
    from conceptual.pipelines.curation.curation import curate
    from conceptual.pipelines.curation.curation_config import CurationConfig

    photos = {photo.name: jpeg(load_photo(photo), 92) for photo in PHOTOS}
    captions = {photo.name: photo.captions()[0] for photo in PHOTOS}
    names = list(photos)
    decoded = [Image.open(io.BytesIO(photos[name])).convert("RGB") for name in names]
    vectors = FeatureExtractor(CnnConfig()).pooled(decoded)
    scorer = saved_scorer(
        tmp_path / "scorer", [captions[n].lower() for n in names], vectors, steps=60
    )
    rows = []
    for i, name in enumerate(names):
        other = names[(i + 1) % len(names)]  # the next photo's caption: a false pair
        for kind, caption in (("true", captions[name]), ("false", captions[other])):
            url = f"http://img.demo.invalid/{name}-{kind}.jpg"  # never fetched: bytes given
            rows.append({"url": url, "caption": caption, "jpg": photos[name]})
    (tmp_path / "in").mkdir()
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "in" / "00000.parquet")
    overrides = [
        f"alignment.scorer={scorer}",
        "alignment.keep_fraction=0.5",
        "overlap.rule=alignment",
        "dedup.by_image=false",  # each photo comes twice, once per caption
        "entity_frequency.enabled=false",
        "resume=false",
    ]
    config = load(CurationConfig, overrides=overrides)
    stats = curate(str(tmp_path / "in"), str(tmp_path / "out"), config)

    assert stats["input"] == 10 and stats["kept"] == 5
    on_disk = storage.read_json(str(tmp_path / "out" / "stats.json"))
    assert on_disk["rejected"]["alignment"] == {"low_alignment": 5}
    assert "overlap" not in [row["stage"] for row in on_disk["funnel"]]  # the score decides
    assert on_disk["alignment"]["scored"] == 10 and on_disk["alignment"]["keep_fraction"] == 0.5
    curated = pq.read_table(tmp_path / "out" / "curated").to_pylist()
    rejected = pq.read_table(tmp_path / "out" / "rejected").to_pylist()
    assert {r["image_url"].rsplit("-", 1)[1] for r in curated} == {"true.jpg"}
    assert {r["image_url"].rsplit("-", 1)[1] for r in rejected} == {"false.jpg"}
    threshold = on_disk["alignment"]["threshold"]
    assert all(r["alignment_score"] >= threshold for r in curated)
    for r in rejected:
        assert r["alignment_score"] < threshold and r["reason"] == "low_alignment"
        assert r["detail"] == f"alignment score {r['alignment_score']:.4f} < {threshold:.4f}"
