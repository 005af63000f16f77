"""The recaption job on real photos: a saved captioner writes a caption for each image of an
import of three Flickr8k photos (five captions each), and a saved dual encoder keeps, per
image, its web captions, the synthetic one or both; no image is lost, every record says where
its caption came from and what it scored, and what the rule saw is in choices/."""

from __future__ import annotations

import json
import shutil

import pyarrow.parquet as pq
import pytest

pytestmark = [pytest.mark.integration, pytest.mark.realdata]

PHOTOS = 3


@pytest.fixture
def curated(real_data, tmp_path) -> str:
    from conceptual.fluency.flickr8k_cn import Flickr8kCnConfig, import_flickr8k_cn

    images = tmp_path / "images"
    images.mkdir()
    for photo in sorted((real_data / "flickr8k_mini" / "images").glob("*.jpg"))[:PHOTOS]:
        shutil.copy(photo, images / photo.name)
    out = tmp_path / "en"
    import_flickr8k_cn(
        images, real_data / "flickr8k_cn", str(out), Flickr8kCnConfig(source="english")
    )
    return str(out)


@pytest.fixture
def models(curated, tmp_path, tiny_captioner):
    """A tiny captioner and a tiny text dual encoder over the captions' words, saved as the
    training jobs save them, with the features the vision step computes."""
    import torch

    from conceptual.models.retriever import DualEncoder, RetrieverConfig
    from conceptual.models.saving import save_model, save_retriever
    from conceptual.models.vocab import Vocabulary
    from conceptual.vision.alignment import VISION_FEATURES
    from conceptual.vision.cnn import FEATURE_CHANNELS

    captions = pq.read_table(f"{curated}/curated", columns=["caption"])["caption"].to_pylist()
    captioner, vocab = tiny_captioner(" ".join(captions[:3]))
    save_model(captioner, vocab, tmp_path / "captioner", features=VISION_FEATURES, beam=2)
    torch.manual_seed(0)
    words = Vocabulary.build(captions, min_count=1)
    config = RetrieverConfig(
        modality="text", image_dim=FEATURE_CHANNELS, vocab_size=len(words), embed_dim=16,
        image_hidden=32, text_d_model=16, text_heads=2, text_layers=1,
    )  # fmt: skip
    save_retriever(DualEncoder(config).eval(), tmp_path / "scorer", words, features=VISION_FEATURES)
    return str(tmp_path / "captioner"), str(tmp_path / "scorer")


def recaption(curated, models, out, min_score, capsys) -> tuple[list[dict], list[dict], dict]:
    from conceptual.jobs import recaption as job

    captioner, scorer = models
    argv = ["--data", curated, "--output", str(out), "--model", captioner]
    keys = [f"scorer={scorer}", f"min_score={min_score}", "actors=1", "experiment=test-recaption"]
    assert job.main([*argv, *keys]) == 0, capsys.readouterr().err
    kept = pq.read_table(out / "curated").drop(["image"]).to_pylist()
    choices = pq.read_table(out / "choices").to_pylist()
    return kept, choices, json.loads((out / "recaption.json").read_text())


@pytest.mark.slow  # 105 s at load 5: the rule itself is tests/unit/curation/test_recaption_rule.py
def test_recaption_keeps_web_synthetic_or_both_per_image_and_loses_no_image(
    curated, models, tmp_path, ray_local, platform_home, capsys
):
    from conceptual.pipelines.curation.recaption import RECAPTIONED
    from conceptual.records import image_id

    # An import's records carry no image_id: the job gives each its image's.
    photos = pq.read_table(f"{curated}/curated", columns=["image"])["image"].to_pylist()
    images = {image_id(photo) for photo in photos}
    # Every caption passes: each image keeps its five web captions and the synthetic one.
    kept, choices, summary = recaption(curated, models, tmp_path / "all", -1.0, capsys)
    assert pq.read_schema(next((tmp_path / "all" / "curated").glob("*.parquet"))) == RECAPTIONED
    synthetic = [r for r in kept if r["caption_source"] == "synthetic"]
    assert len(kept) == PHOTOS * 6 and len(synthetic) == PHOTOS
    assert {r["image_id"] for r in synthetic} == images
    assert all(r["id"].endswith("#synthetic") and r["caption"] for r in synthetic)
    assert len({r["id"] for r in kept}) == len(kept)
    assert {c["kept"] for c in choices} == {"both"} and len(choices) == PHOTOS
    assert summary["kept"] == {"web": 0, "synthetic": 0, "both": PHOTOS}
    assert summary["synthetic_chosen_rate"] == 1.0
    assert not (tmp_path / "all" / "rejected").exists() or not list(
        (tmp_path / "all" / "rejected").glob("*.parquet")
    )

    # No caption passes: each image keeps exactly its best one, web or synthetic; the web
    # captions dropped are rejected as low_alignment, with their score.
    kept, choices, summary = recaption(curated, models, tmp_path / "none", 2.0, capsys)
    assert sorted(r["image_id"] for r in kept) == sorted(images)
    by_image = {c["image_id"]: c for c in choices}
    for record in kept:
        choice = by_image[record["image_id"]]
        best = max(choice["synthetic_score"], choice["best_web_score"])
        assert record["alignment_score"] == pytest.approx(best, abs=1e-6)
        assert choice["kept"] == record["caption_source"]
    rejected = pq.read_table(tmp_path / "none" / "rejected").to_pylist()
    web_kept = sum(r["caption_source"] == "web" for r in kept)
    assert len(rejected) == PHOTOS * 5 - web_kept
    assert {(r["stage"], r["reason"]) for r in rejected} == {("recaption", "low_alignment")}
    assert all("alignment_score" in r["detail"] for r in rejected)
    assert summary["rejected"] == {"recaption": {"low_alignment": len(rejected)}}
    margins = [c["synthetic_score"] - c["best_web_score"] for c in choices]
    assert summary["margin"]["mean"] == pytest.approx(sum(margins) / PHOTOS, abs=1e-3)


def test_recaption_refuses_a_missing_scorer_before_any_work(curated, models, tmp_path, capsys):
    from conceptual.jobs import recaption as job

    captioner, _ = models
    out = tmp_path / "out"
    argv = ["--data", curated, "--output", str(out), "--model", captioner]
    assert job.main([*argv, f"scorer={tmp_path / 'nothing'}"]) == 2
    err = capsys.readouterr().err
    assert "train_contrastive" in err and "Traceback" not in err
    assert not out.exists()
