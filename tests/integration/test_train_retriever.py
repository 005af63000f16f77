"""Retriever training on a local Ray (text with one worker, speech with two workers gathering
each other's negatives while one of them dies and the run resumes), then the jobs around it:
register, evaluate, the champion rule. The data is made up so that a tiny model learns it in
a few epochs: four kinds of image, each with its own feature centre, its own captions and
its own tone in the spoken captions.

Then the CNN fine-tuned end to end (model.image_backbone=finetune) on real photos
(scikit-image's samples) at 64 px for one epoch, evaluated, indexed, and an image query
embedded as the search service embeds it."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import skimage.data
import torch
from PIL import Image

from conceptual.records import CLIP, FEATURES, image_id

pytestmark = pytest.mark.integration

CHANNELS = 16
KINDS = [
    ("a dog on the grass", "a brown dog running on the grass", 300.0),
    ("a cat on the sofa", "a small cat sleeping on the sofa", 600.0),
    ("a boat on the lake", "a white boat sailing on the lake", 1200.0),
    ("a car on the road", "a red car driving on the road", 2400.0),
]
IMAGES_PER_KIND, VAL_IMAGES_PER_KIND = 8, 2


def tone(hz: float, rng: np.random.Generator, seconds: float = 1.0) -> bytes:
    from conceptual.speech.audio import SAMPLE_RATE, encode_flac

    t = np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    samples = 0.3 * np.sin(2 * np.pi * hz * t) + 0.01 * rng.normal(size=t.size)
    return encode_flac(samples.astype(np.float32))


def write_data(directory) -> tuple[str, str]:
    """A features output (32 images x 2 captions; 24 images train, 8 val) and a speech
    output with a clip of every caption. Returns their URIs."""
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(len(KINDS), CHANNELS))
    features, clips = [], []
    for kind, (*captions, hz) in enumerate(KINDS):
        for image in range(IMAGES_PER_KIND):
            image_id = hashlib.sha1(f"{kind}-{image}".encode()).hexdigest()
            pooled = (centres[kind] + 0.3 * rng.normal(size=CHANNELS)).astype(np.float32)
            split = "val" if image < VAL_IMAGES_PER_KIND else "train"
            for n, caption in enumerate(captions):
                record = {"id": f"{kind}-{image}-{n}", "split": split, "caption": caption}
                features.append({**record, "image_id": image_id, "crop": 0, "pooled": pooled})
                clips.append(
                    {
                        "id": f"clip-{kind}-{image}-{n}",
                        "caption_id": record["id"],
                        "image_id": image_id,
                        "caption": caption,
                        "split": split,
                        "audio": tone(hz * (1 + 0.02 * n), rng),
                    }
                )
    for name, part, rows, schema in (
        ("features", "features", features, FEATURES),
        ("speech", "clips", clips, CLIP),
    ):
        (directory / name / part).mkdir(parents=True)
        table = pa.Table.from_pylist(rows, schema=schema)
        pq.write_table(table, directory / name / part / "part-0.parquet", row_group_size=16)
        (directory / name / "_SUCCESS").write_text("{}")  # written last, as the jobs do
    # The features job's summary: the CNN settings a model trained on them saves.
    summary = {"model": "efficientnet-lite0", "image_size": 256}
    (directory / "features" / "features.json").write_text(json.dumps(summary))
    return str(directory / "features"), str(directory / "speech")


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> tuple[str, str]:
    return write_data(tmp_path_factory.mktemp("retrieval"))


def tiny_config(model: dict | None = None, **overrides):
    """A config for tiny models; `model` overrides some of its model.* keys."""
    from conceptual.pipelines.families.retriever.train_retriever import RetrieverTrainConfig

    settings = {
        "model": {
            "embed_dim": 32,
            "image_hidden": 32,
            "speech_channels": [8, 16],
            "text_d_model": 32,
            "text_layers": 1,
            "text_heads": 2,
            "max_tokens": 12,
            "dropout": 0.0,
            **(model or {}),
        },
        "audio": {"seconds": 1.0, "n_mfcc": 32, "n_mels": 32, "time_mask": 10, "freq_mask": 4},
        "min_count": 1,
        "min_eval_size": 1,  # the champion rule on these 8 dev photos
        "lr": 0.003,
        "batch_size": 8,
        "epochs": 4,
        "cpus_per_worker": 0.5,
        "max_failures": 1,
        "experiment": "test-retrieval",
    }
    return RetrieverTrainConfig(**{**settings, **overrides})


def test_text_retriever_trains_registers_and_evaluates(ray_local, platform_home, data):
    from mlflow import MlflowClient

    from conceptual import registry
    from conceptual.models.saving import FeatureSettings, load
    from conceptual.pipelines.families.retriever.evaluate_retriever import (
        RetrieverEvalConfig,
        evaluate,
    )
    from conceptual.pipelines.families.retriever.train_retriever import RECIPE, model_name
    from conceptual.pipelines.training.training import publish, train

    features_uri, _ = data
    config = tiny_config(modality="text", loss="mms")
    result = train(RECIPE, config, features_uri)

    history = result["history"]
    assert [h["epoch"] for h in history] == [1, 2, 3, 4]
    assert history[-1]["loss"] < history[0]["loss"]
    # 8 val images of 4 kinds: a caption's own image is one of 2 that fit it, so R@1 of a
    # model that learned the kinds is about 1/2; chance R@1 is 1/8.
    assert result["best"]["text_to_image.R@1"] > 0.3
    assert result["best"]["mean_R@10"] == max(h["mean_R@10"] for h in history)

    run = MlflowClient().get_run(result["run_id"])
    assert {"loss", "text_to_image.R_1", "image_to_text.R_10", "mean_R_10"} <= set(run.data.metrics)
    assert run.data.params["model.text_architecture"] == "transformer"
    assert "model.speech_channels" not in run.data.params  # the other modality's keys
    saved = load(result["model_dir"])
    model, vocab = saved.model, saved.vocab
    assert model.config.modality == "text" and "dog" in vocab.tokens and saved.audio is None
    # Its training captions' language model, which the recognizer hears spoken queries with.
    assert "dog" in saved.language_model.read_text().split()
    # The features' CNN and image size travel with the model, for embedding images.
    assert saved.features == FeatureSettings(model="efficientnet-lite0", image_size=256)

    decision = publish(RECIPE, result, config)
    assert decision["promoted"] and decision["reason"] == "first_champion"
    champion = f"models:/{model_name('text')}@{registry.CHAMPION}"
    evaluated = evaluate(
        champion, features_uri, RetrieverEvalConfig(split="val", experiment="test-retrieval")
    )
    # The same model on the same set as its dev scoring: the same numbers, chance beside.
    assert evaluated["metrics"]["mean_R@10"] == pytest.approx(result["best"]["mean_R@10"])
    assert evaluated["chance"]["text_to_image.R@1"] == pytest.approx(1 / 8)
    assert evaluated["eval_set"] == result["eval_set"]
    logged = MlflowClient().get_run(evaluated["run_id"]).data.metrics
    assert {
        f"{d}.R_{k}" for d in ("text_to_image", "image_to_text") for k in (1, 5, 10, 50, 100)
    } <= set(logged)
    assert "chance.image_to_text.R_5" in logged
    version = registry.champion_version(model_name("text"))
    assert version.tags[registry.score_tag(result["eval_set"], "mean_R@10")]


@pytest.mark.slow  # a fault test, as the captioner's (make test-slow runs both)
def test_two_speech_workers_share_negatives_and_resume_after_a_worker_dies(
    ray_local, platform_home, data, tmp_path, monkeypatch
):
    from conceptual.pipelines.families.retriever.train_retriever import RECIPE
    from conceptual.pipelines.training import training
    from conceptual.pipelines.training.training import train

    features_uri, speech_uri = data
    marker = tmp_path / "failed-once"
    monkeypatch.setenv(training.FAIL_AT_EPOCH_ENV, "2")
    monkeypatch.setenv(training.FAIL_MARKER_ENV, str(marker))
    config = tiny_config(modality="speech", loss="mms", workers=2, epochs=3)
    result = train(RECIPE, config, features_uri, speech_uri)

    assert marker.exists()  # a worker did die in epoch 2
    history = result["history"]
    assert sorted({h["epoch"] for h in history}) == [1, 2, 3]
    assert all(math.isfinite(h["loss"]) for h in history)
    assert "speech_to_image.R@10" in result["best"] and "image_to_speech.R@10" in result["best"]


def test_speech_without_clips_is_refused(data):
    from conceptual.pipelines.families.retriever.train_retriever import RECIPE
    from conceptual.pipelines.training.training import train

    features_uri, _ = data
    with pytest.raises(ValueError, match="--speech"):
        train(RECIPE, tiny_config(modality="speech"), features_uri)


@pytest.mark.slow  # the seeded draw is unit-tested (test_retrieval_data.py), as the captioner's
@pytest.mark.parametrize("modality", ["speech", "text"])
def test_train_fraction_trains_on_a_seeded_draw_of_the_train_images(ray_local, data, modality):
    from conceptual.pipelines.families.retriever.train_retriever import prepare

    features_uri, speech_uri = data
    config = tiny_config(modality=modality, train_fraction=0.5, seed=5)

    def drawn() -> list[int]:
        prepared = prepare(config, features_uri, speech_uri)
        assert prepared.params["train_images"] == 12  # half of the 24
        rows = prepared.rows(config).select_columns(["image_group"]).to_pandas()
        return sorted(rows["image_group"])

    groups = drawn()
    assert len(groups) == 24 and len(set(groups)) == 12  # both captions (clips) of each
    assert drawn() == groups  # the same draw in every run of the seed


# ---------------------------------------------------------------- a fine-tuned CNN

# scikit-image's photo -> (split, captions); each train photo also mirrored (another image).
PHOTOS = {
    "astronaut": ("train", ["a woman in a space suit", "an astronaut with a flag"]),
    "coffee": ("train", ["a cup of coffee on a saucer", "coffee in a white cup"]),
    "chelsea": ("train", ["a cat with striped fur", "a tabby cat looks away"]),
    "rocket": ("train", ["a rocket on the launch pad", "a rocket before the launch"]),
    "immunohistochemistry": ("val", ["stained cells under a microscope"]),
    "hubble_deep_field": ("val", ["galaxies in deep space", "a sky full of galaxies"]),
    "colorwheel": ("val", ["a wheel of colours"]),
}
PHOTO_SIZE = 64


def photo_records() -> list[dict]:
    """Curated records (id, image_url, caption, split, image) of the photos."""
    from conceptual_demo.images import good_jpeg, mirrored

    records = []
    for name, (split, captions) in PHOTOS.items():
        photo = Image.fromarray(getattr(skimage.data, name)())
        views = {name: good_jpeg(photo)}
        if split == "train":
            views[f"{name}-mirrored"] = mirrored(photo)
        for view, data in views.items():
            records += [
                {"id": f"{view}-{n}", "image_url": f"http://127.0.0.1/{view}.jpg",
                 "caption": caption, "split": split, "image": data}
                for n, caption in enumerate(captions)
            ]  # fmt: skip
    return records


@pytest.fixture(scope="module")
def photo_features(tmp_path_factory) -> str:
    """A features output of the photos whose features.json names their curated data. The
    pooled vectors are stand-ins: a fine-tuned CNN reads the photos."""
    root = tmp_path_factory.mktemp("photos")
    records = photo_records()
    (root / "curated").mkdir()
    pq.write_table(pa.Table.from_pylist(records), root / "curated" / "part-0.parquet")
    rows = [
        {"id": r["id"], "image_id": image_id(r["image"]), "split": r["split"],
         "caption": r["caption"], "crop": 0, "pooled": np.ones(4, dtype=np.float32)}
        for r in records
    ]  # fmt: skip
    (root / "features" / "features").mkdir(parents=True)
    table = pa.Table.from_pylist(rows, schema=FEATURES)
    pq.write_table(table, root / "features" / "features" / "part-0.parquet")
    summary = {"curated": str(root / "curated"), "model": "efficientnet-lite0", "image_size": 256}
    (root / "features" / "features.json").write_text(json.dumps(summary))
    (root / "features" / "_SUCCESS").write_text("{}")
    return str(root / "features")


@pytest.mark.slow  # the CNN trained end to end on photos: a minute
def test_a_text_retriever_fine_tunes_the_cnn_and_embeds_photos_everywhere(
    ray_local, platform_home, photo_features, tmp_path
):
    from conceptual.models.retriever import DualEncoder
    from conceptual.models.saving import load
    from conceptual.pipelines.families.retriever.evaluate_retriever import (
        RetrieverEvalConfig,
        evaluate,
    )
    from conceptual.pipelines.families.retriever.train_retriever import RECIPE
    from conceptual.pipelines.retrieval.build_index import BuildIndexConfig, build
    from conceptual.pipelines.training.training import train
    from conceptual.retrieval_index import RetrievalIndex
    from conceptual.serve.retriever_deployment import Searcher

    finetune = {"image_backbone": "finetune", "image_size": PHOTO_SIZE}
    config = tiny_config(modality="text", epochs=1, model=finetune)
    result = train(RECIPE, config, photo_features)

    [epoch] = result["history"]
    assert math.isfinite(epoch["loss"]) and "text_to_image.R@1" in result["best"]
    model = load(result["model_dir"]).model
    assert model.config.photo_size == PHOTO_SIZE
    stem = "image.backbone._conv_stem.weight"
    pretrained = DualEncoder(model.config).state_dict()[stem]
    assert not torch.equal(model.state_dict()[stem], pretrained)  # the CNN itself trained

    # Evaluation embeds the val photos as the dev scoring did: the same numbers.
    evaluated = evaluate(
        result["model_dir"],
        photo_features,
        RetrieverEvalConfig(split="val", experiment="test-retrieval"),
    )
    assert evaluated["images"] == 3
    assert evaluated["metrics"]["mean_R@10"] == pytest.approx(result["best"]["mean_R@10"])

    index_uri = str(tmp_path / "index")
    manifest = build(result["model_dir"], photo_features, index_uri, BuildIndexConfig(device="cpu"))
    assert manifest["image_backbone"] == "finetune"
    assert manifest["counts"]["images"] == 11 and manifest["counts"]["captions"] == 20
    index = RetrievalIndex.load(index_uri)
    # An image query goes through the fine-tuned CNN as build_index took the indexed photos.
    searcher = Searcher(Path(result["model_dir"]), index, approximate=False)
    assert searcher.extractor is None and searcher.image_size == PHOTO_SIZE
    photos = {r["id"]: r["image"] for r in photo_records()}
    rows = index.tables["images"].to_pylist()
    for row, vector in zip(rows[:3], index.vectors["images"][:3]):
        query = searcher.embed_image(searcher.read_image(photos[row["id"]]))
        np.testing.assert_allclose(query[0], vector, atol=1e-4)
    captions, _ = searcher.captions(query, k=3)
    assert len(captions) == 3
