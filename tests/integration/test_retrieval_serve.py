"""Image and caption search over real HTTP on 127.0.0.1: Ray Serve on the session's local Ray,
the private MLflow registry, tiny untrained dual encoders (text and speech) registered as
champions, and indexes built by the build_index job over a features output of real photos
(computed by the features job's own stage, with the real CNN).

The tests run in file order: the first meets the retrievers before any index exists, the
second builds the indexes (the version tags point the service at them)."""

from __future__ import annotations

import asyncio
import io
import json
import re
import tempfile
import threading
import time
import uuid
from pathlib import Path

import httpx
import mlflow
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import skimage.data
import soundfile
import torch
import yaml
from audio_bombs import flac_declaring, id3_chain, loud_float_wav, opus, wav_declaring  # tests/
from PIL import Image
from ray import serve
from waiting import WAIT_S, wait_until  # tests/waiting.py

from conceptual import registry
from conceptual.jobs import build_index as build_index_job
from conceptual.models.retriever import DualEncoder, RetrieverConfig
from conceptual.models.saving import save_retriever
from conceptual.models.vocab import Vocabulary
from conceptual.pipelines.features.features import FeatureOperator, FeaturesConfig
from conceptual.pipelines.retrieval.build_index import BuildIndexConfig, run
from conceptual.records import CLIP, image_id
from conceptual.retrieval_index import INDEX_TAG, RetrievalIndex
from conceptual.serve import retriever_deployment
from conceptual.serve.app import ServeConfig, start
from conceptual.serve.captioner_deployment import CaptioningSettings
from conceptual.serve.retriever_deployment import (
    RetrievalSettings,
    RetrieverDeployment,
    Searcher,
)
from conceptual.speech.audio import encode_flac
from conceptual.tracking import start_run
from conceptual_demo.images import good_jpeg

pytestmark = pytest.mark.integration

# Two captions of each photo.
PHOTOS = {
    "coffee": ["a cup of coffee on a saucer", "coffee in a white cup"],
    "chelsea": ["a cat with striped fur", "a tabby cat looks away"],
    "astronaut": ["a woman in a space suit", "an astronaut with a flag"],
    "rocket": ["a rocket on the launch pad", "a rocket before the launch"],
}
AUDIO = {"n_mfcc": 20, "n_mels": 40, "seconds": 1.0, "freq_mask": 5, "time_mask": 5, "cmvn": True}
TINY = {
    "embed_dim": 16,
    "image_dim": 1280,
    "image_hidden": 32,
    "speech_channels": [4, 8],
    "text_d_model": 16,
    "text_layers": 1,
    "text_heads": 2,
    "max_tokens": 12,
    "n_mfcc": AUDIO["n_mfcc"],
    "frames": 101,
    "dropout": 0.0,
}
MAX_AUDIO_S = 2.0


def jpeg(name: str) -> bytes:
    return good_jpeg(Image.fromarray(getattr(skimage.data, name)()))


def tone(seconds: float, frequency: float = 440.0, rate: int = 16000) -> np.ndarray:
    t = np.arange(round(seconds * rate)) / rate
    return (0.3 * np.sin(2 * np.pi * frequency * t)).astype(np.float32)


def wav(samples: np.ndarray, rate: int = 16000) -> bytes:
    buffer = io.BytesIO()
    soundfile.write(buffer, samples, rate, format="WAV")
    return buffer.getvalue()


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, str]:
    """A features output of the photos (the features job's stage, real CNN), the curated
    data it names, and spoken captions (tones) of the first caption of each photo."""
    root = tmp_path_factory.mktemp("retrieval-data")
    records = [
        {"id": f"{name}-{n}", "image_url": f"http://127.0.0.1/{name}.jpg", "caption": caption,
         "split": "test", "image": jpeg(name)}
        for name, captions in PHOTOS.items()
        for n, caption in enumerate(captions)
    ]  # fmt: skip
    curated = root / "curated"
    curated.mkdir()
    pq.write_table(pa.Table.from_pylist(records), curated / "part-0.parquet")
    config = FeaturesConfig()
    features = FeatureOperator(config)(pa.Table.from_pylist(records))
    (root / "features" / "features").mkdir(parents=True)
    pq.write_table(features, root / "features" / "features" / "part-0.parquet")
    summary = {"curated": str(curated), "model": config.cnn.model, "image_size": config.image_size}
    (root / "features" / "features.json").write_text(json.dumps(summary))
    (root / "features" / "_SUCCESS").write_text("{}")

    clips = [
        {"id": f"clip-{n}", "caption_id": f"{name}-0", "image_id": image_id(jpeg(name)),
         "caption": captions[0], "split": "test", "audio": encode_flac(tone(1.5, 300 + 150 * n))}
        for n, (name, captions) in enumerate(PHOTOS.items())
    ]  # fmt: skip
    (root / "speech" / "clips").mkdir(parents=True)
    table = pa.Table.from_pylist(clips, pa.schema([CLIP.field(c) for c in clips[0]]))
    pq.write_table(table, root / "speech" / "clips" / "part-0.parquet")
    (root / "speech" / "_SUCCESS").write_text("{}")
    return {"features": str(root / "features"), "speech": str(root / "speech"), "root": str(root)}


def register(model: DualEncoder, name: str, **saved) -> str:
    """Logs the model in a run, registers it as a version of `name` and makes it champion."""
    with start_run("retrieval-serve-tests") as active, tempfile.TemporaryDirectory() as folder:
        mlflow.log_artifacts(str(save_retriever(model, folder, **saved)), "model")
    version = registry.register(active.info.run_id, {"variant": "tiny"}, name=name)
    registry.promote_if_better(version, 0.5, "tiny-set", metric="mean_R@10", name=name)
    return str(version.version)


@pytest.fixture(scope="module")
def models(platform_home, tiny_captioner, log_captioner) -> dict[str, str]:
    """Registered champions of their own names: a text and a speech retriever, and a
    captioner (so that /readyz can be ready)."""
    suffix = uuid.uuid4().hex[:8]
    names = {key: f"{key}-test-{suffix}" for key in ("text", "speech", "captioner")}
    torch.manual_seed(0)
    vocab = Vocabulary.build([c for captions in PHOTOS.values() for c in captions], min_count=1)
    text = DualEncoder(RetrieverConfig(modality="text", vocab_size=len(vocab), **TINY))
    speech = DualEncoder(RetrieverConfig(modality="speech", **TINY))
    versions = {
        "text": register(text.eval(), names["text"], vocab=vocab),
        "speech": register(speech.eval(), names["speech"], audio=AUDIO),
    }
    captioner, captioner_vocab = tiny_captioner("a cup of coffee", 0)
    with start_run("retrieval-serve-tests") as active:
        log_captioner(captioner, captioner_vocab)
    version = registry.register(active.info.run_id, {}, name=names["captioner"])
    registry.promote_if_better(version, 0.1, "tiny-set", name=names["captioner"])
    return {"names": names, "versions": versions}


@pytest.fixture(scope="module")
def client(ray_local, models, free_port):
    names = models["names"]
    config = ServeConfig(
        captioning=CaptioningSettings(models={"en": names["captioner"]}, poll_seconds=0.5),
        retrievers=["text", "speech"],
        admin_details=True,  # the models' problems and index tags, which the tests follow
        retrieval=RetrievalSettings(
            text_model=names["text"],
            speech_model=names["speech"],
            poll_seconds=0.5,
            max_k=20,
            max_text_chars=200,
            max_audio_seconds=MAX_AUDIO_S,
        ),
    )
    url = start(config, port=free_port())
    with httpx.Client(base_url=url, timeout=60) as http:
        yield http
    serve.shutdown()


def statuses(client: httpx.Client) -> dict[str, dict]:
    return {status["task"]: status for status in client.get("/v1/models").json()["models"]}


def retrievers_ready(client: httpx.Client) -> bool:
    found = statuses(client)
    return all(found[f"{m}_retrieval"]["ready"] for m in ("text", "speech"))


def indexes(data: dict[str, str]) -> dict[str, str]:
    return {m: str(Path(data["root"]) / f"index-{m}") for m in ("text", "speech")}


@pytest.fixture(scope="module")
def ready(client, models, data):
    """The client once both indexes are built and served (the second test builds them; run
    alone, a test gets them from here)."""
    if not retrievers_ready(client):
        for modality, output in indexes(data).items():
            if not Path(output, "_SUCCESS").exists():
                build(models, data, modality)
        wait_until(lambda: retrievers_ready(client), "the retrievers to load their indexes")
    return client


def build(models: dict, data: dict[str, str], modality: str) -> None:
    name, output = models["names"][modality], indexes(data)[modality]
    if modality == "text":  # through the job's command line
        argv = ["--model", f"models:/{name}@champion", "--data", data["features"]]
        argv += ["--output", output, "approximate=true", "device=cpu"]
        assert build_index_job.main(argv) == 0
    else:
        config = BuildIndexConfig(device="cpu")
        model = f"models:/{name}/{models['versions'][modality]}"
        run(model, data["features"], output, config, speech_uri=data["speech"])


def error_code(response: httpx.Response) -> str:
    return response.json()["error"]["code"]


# ---------------------------------------------------------------- the tests, in order


def test_a_champion_without_an_index_is_not_ready(client, models):
    wait_until(lambda: statuses(client)["text_retrieval"]["problem"] is not None and
               "build_index" in statuses(client)["text_retrieval"]["problem"],
               "the text retriever to check the registry")  # fmt: skip
    found = statuses(client)
    for modality in ("text", "speech"):
        status = found[f"{modality}_retrieval"]
        assert not status["ready"] and status["model"] is None
        assert f"models:/{models['names'][modality]}/" in status["problem"]
    assert found["captioning"]["task"] == "captioning"
    refused = client.post("/v1/search/images", json={"text": "a cat"})
    assert refused.status_code == 503 and error_code(refused) == "not_ready"
    assert client.get("/readyz").status_code == 503


def test_build_index_tags_the_champion_and_the_service_follows(client, models, data):
    for modality in ("text", "speech"):
        build(models, data, modality)
        name, number = models["names"][modality], models["versions"][modality]
        tags = registry.registered_version(f"models:/{name}/{number}").tags
        assert tags[INDEX_TAG] == indexes(data)[modality]
    manifest = json.loads(Path(indexes(data)["text"], "index.json").read_text())
    assert manifest["counts"]["images"] == len(PHOTOS) and manifest["counts"]["captions"] == 8
    assert manifest["registered"] == {"name": models["names"]["text"], "version": "1"}
    assert manifest["features"]["image_size"] == 256
    assert manifest["approximate"]["targets"]["images"]["recall@10"] == 1.0
    speech = json.loads(Path(indexes(data)["speech"], "index.json").read_text())
    assert speech["counts"]["clips"] == len(PHOTOS)
    wait_until(lambda: retrievers_ready(client), "the retrievers to load their indexes")
    assert client.get("/readyz").status_code == 200


def test_build_index_refuses_bad_inputs_with_exit_2(data, tmp_path, capsys):
    model = "models:/retriever-text/1"  # not read: each fails first
    missing = ["--model", model, "--data", str(tmp_path / "nothing")]
    assert build_index_job.main([*missing, "--output", str(tmp_path / "o")]) == 2
    assert f"--data {tmp_path / 'nothing'}: no such file or folder" in capsys.readouterr().err
    bad_key = ["--model", model, "--data", data["features"], "--output", str(tmp_path / "o")]
    assert build_index_job.main([*bad_key, "aproximate=true"]) == 2
    assert "aproximate" in capsys.readouterr().err


def test_a_text_query_finds_k_images_best_first(ready, models):
    response = ready.post("/v1/search/images", json={"text": "a cat with striped fur", "k": 3})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["query"] == "text" and body["approximate"] is True
    assert body["model"] == {
        "name": models["names"]["text"],
        "version": models["versions"]["text"],
        "alias": "champion",
        "variant": "tiny",
    }
    images = body["images"]
    assert len(images) == 3
    scores = [image["score"] for image in images]
    assert scores == sorted(scores, reverse=True)
    names = {f"http://127.0.0.1/{name}.jpg": name for name in PHOTOS}
    for image in images:
        assert image["image_url"] in names and image["caption"] in PHOTOS[names[image["image_url"]]]
    assert len({image["image_id"] for image in images}) == 3
    # k as a query parameter; the default k (10) is more than the 4 images there are
    assert (
        len(ready.post("/v1/search/images", params={"k": 2}, json={"text": "a"}).json()["images"])
        == 2
    )
    assert len(ready.post("/v1/search/images", json={"text": "rocket"}).json()["images"]) == 4


def test_an_audio_query_finds_images(ready, models):
    clip = wav(tone(1.2))
    raw = ready.post("/v1/search/images", params={"k": 2}, content=clip,
                     headers={"content-type": "audio/wav"})  # fmt: skip
    assert raw.status_code == 200, raw.text
    body = raw.json()
    assert body["query"] == "speech" and len(body["images"]) == 2
    assert body["path"] == "speech" and body["transcript"] is None  # the speech model's path
    assert body["model"]["name"] == models["names"]["speech"]
    assert body["images"][0]["score"] >= body["images"][1]["score"]
    form = ready.post("/v1/search/images", files={"audio": ("q.wav", clip, "audio/wav")})
    assert (
        form.status_code == 200
        and form.json()["images"]
        == ready.post(
            "/v1/search/images", content=clip, headers={"content-type": "audio/wav"}
        ).json()["images"]
    )
    flac = ready.post("/v1/search/images", content=encode_flac(tone(0.5)),
                      headers={"content-type": "audio/flac"})  # fmt: skip
    assert flac.status_code == 200 and len(flac.json()["images"]) == 4


def test_an_image_query_finds_captions(ready, models):
    response = ready.post("/v1/search/captions", params={"k": 5}, content=jpeg("coffee"),
                          headers={"content-type": "image/jpeg"})  # fmt: skip
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["model"]["name"] == models["names"]["text"]
    captions = body["captions"]
    assert len(captions) == 5
    assert [c["score"] for c in captions] == sorted((c["score"] for c in captions), reverse=True)
    every = {caption for captions in PHOTOS.values() for caption in captions}
    assert {c["caption"] for c in captions} <= every
    form = ready.post("/v1/search/captions", files={"image": ("c.jpg", jpeg("coffee"))})
    assert form.status_code == 200 and form.json()["captions"][0] == captions[0]


@pytest.mark.parametrize("recorded", [False, True])
def test_an_image_query_is_embedded_as_the_indexed_images_were(models, data, recorded):
    """The replica's path (decode, CNN at the features' image size, image tower) gives an
    indexed photo the very embedding the index stored for it: with the CNN settings the
    model saved (`recorded`; the index's then go unread), or, for a model saved before it
    recorded them, the index's."""
    index = RetrievalIndex.load(indexes(data)["text"])
    name = models["names"]["text"]
    with tempfile.TemporaryDirectory() as folder:
        model_dir = registry.resolve(f"models:/{name}/{models['versions']['text']}", Path(folder))
        if recorded:
            saved = json.loads((model_dir / "config.json").read_text())
            indexed = index.manifest["features"]
            saved["features"] = {"model": indexed["model"], "image_size": indexed["image_size"]}
            (model_dir / "config.json").write_text(json.dumps(saved))
            index.manifest["features"] = {**indexed, "model": None, "image_size": None}
        searcher = Searcher(model_dir, index, approximate=False)
    rows = {row: i for i, row in enumerate(index.tables["images"]["image_id"].to_pylist())}
    for photo in ("coffee", "rocket"):
        data_bytes = jpeg(photo)
        embedded = searcher.embed_image(searcher.read_image(data_bytes))
        stored = index.vectors["images"][rows[image_id(data_bytes)]]
        np.testing.assert_allclose(embedded[0], stored, atol=1e-4)


def bad_requests() -> list:
    png = io.BytesIO()
    Image.new("RGB", (8, 8)).save(png, "PNG")
    audio = {"content-type": "audio/wav"}
    images = "/v1/search/images"
    return [
        pytest.param(images, {"content": np.random.default_rng(0).bytes(4000), "headers": audio},
                     415, "unsupported_format", id="random bytes as audio"),
        # The decode bombs of issue 32, small (tests/audio_bombs.py): refused from the header.
        pytest.param(images, {"content": flac_declaring(655_350, 8),
                              "headers": {"content-type": "audio/flac"}},
                     422, "bad_sample_rate", id="FLAC declaring 655,350 Hz"),
        pytest.param(images, {"content": wav_declaring(rate=2**31 - 1), "headers": audio},
                     422, "bad_sample_rate", id="WAV declaring 2^31-1 Hz"),
        pytest.param(images, {"content": opus(255), "headers": audio}, 415,
                     "unsupported_format", id="Ogg Opus of 255 channels as audio/wav"),
        pytest.param(images, {"content": wav_declaring(channels=255), "headers": audio}, 422,
                     "too_many_channels", id="WAV of 255 channels"),
        pytest.param(images, {"content": encode_flac(tone(0.5)), "headers": audio}, 415,
                     "format_mismatch", id="FLAC as audio/wav"),
        pytest.param(images, {"content": b"", "headers": audio}, 400, "empty_audio", id="empty"),
        pytest.param(images, {"content": wav(np.zeros(0, np.float32)), "headers": audio},
                     400, "empty_audio", id="no samples"),
        pytest.param(images, {"content": wav(tone(MAX_AUDIO_S + 1)), "headers": audio},
                     413, "audio_too_long", id="too long"),
        pytest.param(images, {"content": png.getvalue(), "headers": {"content-type": "image/png"}},
                     415, "unsupported_media_type", id="image as audio"),
        pytest.param(images, {"files": {"sound": ("a.wav", wav(tone(0.5)))}}, 400,
                     "missing_audio", id="form without audio"),
        pytest.param(images, {"json": {"text": "a cat"}, "params": {"k": 0}}, 422,
                     "bad_parameter", id="k 0"),
        pytest.param(images, {"json": {"text": "a cat"}, "params": {"k": 21}}, 422,
                     "bad_parameter", id="k over max"),
        pytest.param(images, {"json": {"text": "a cat", "k": "many"}}, 422, "bad_parameter",
                     id="k text in json"),
        pytest.param(images, {"json": {"text": "a cat", "k": 0}}, 422, "bad_parameter",
                     id="k 0 in json"),
        pytest.param(images, {"json": {"text": "   "}}, 422, "bad_parameter", id="empty text"),
        pytest.param(images, {"json": {"words": "a cat"}}, 422, "bad_parameter", id="no text"),
        pytest.param(images, {"json": {"text": "cat " * 100}}, 413, "text_too_long",
                     id="huge text"),
        pytest.param(images, {"json": {"text": "x" * 70_000}}, 413, "too_large",
                     id="huge body"),
        pytest.param(images, {"content": b"{not json", "headers": {"content-type": "application/json"}},
                     400, "bad_json", id="bad json"),
        pytest.param("/v1/search/captions", {"content": b"<html></html>"}, 415, "not_an_image",
                     id="not an image"),
        pytest.param("/v1/search/captions", {"content": png.getvalue(), "params": {"k": -1}},
                     422, "bad_parameter", id="captions k -1"),
    ]  # fmt: skip


@pytest.mark.parametrize(("route", "request_args", "status", "code"), bad_requests())
def test_bad_queries_get_a_clear_json_error(ready, route, request_args, status, code):
    response = ready.post(route, **request_args)
    assert response.status_code == status, response.text
    assert error_code(response) == code
    message = response.json()["error"]["message"]
    assert message and "Error" not in message


@pytest.mark.parametrize("tags", [990, 5000])
def test_a_chain_of_id3_tags_is_refused_at_once_and_holds_up_no_query(ready, tags):
    """2 MiB of chained empty ID3 tags (990 of them, then zeros), or 5,000 of them: 400
    bad_audio within a second (it cost 8 s and 1.8 GB, or a 503, when followed by
    recursion), and the query sent right behind it is answered as fast."""
    started = time.monotonic()
    response = ready.post("/v1/search/images", content=id3_chain(tags, 2 << 20),
                          headers={"content-type": "audio/mpeg"})  # fmt: skip
    refused_s = time.monotonic() - started
    assert (response.status_code, error_code(response)) == (400, "bad_audio"), response.text
    started = time.monotonic()
    assert ready.post("/v1/search/images", json={"text": "a cat"}).status_code == 200
    assert refused_s < 1.0 and time.monotonic() - started < 1.0


def test_a_query_far_outside_one_gets_numbers_for_scores(ready):
    """A float WAV at amplitude 1e19 is clipped to [-1, 1]: every score is a number."""
    response = ready.post("/v1/search/images", content=loud_float_wav(1e19),
                          headers={"content-type": "audio/wav"})  # fmt: skip
    assert response.status_code == 200, response.text
    scores = [hit["score"] for hit in response.json()["images"]]
    assert scores and all(isinstance(score, float) for score in scores)


def test_models_lists_the_retrievers_with_their_index(ready, models, data):
    found = statuses(ready)
    assert set(found) == {"captioning", "text_retrieval", "speech_retrieval"}
    for modality in ("text", "speech"):
        model = found[f"{modality}_retrieval"]["model"]
        assert model["name"] == models["names"][modality]
        assert model["tags"][INDEX_TAG] == indexes(data)[modality]
    spec = ready.get("/openapi.json").json()
    assert {"/v1/search/images", "/v1/search/captions"} <= set(spec["paths"])
    content = spec["paths"]["/v1/search/images"]["post"]["requestBody"]["content"]
    assert {"application/json", "audio/wav", "multipart/form-data"} <= set(content)


def test_search_is_opt_in(repo):
    assert ServeConfig().retrievers == []
    # serve/config.yaml documents the settings commented out: uncommented, they are valid.
    text = (repo / "serve" / "config.yaml").read_text()
    text = re.sub(r"^      # (retrievers:|retrieval:)", r"      \1", text, flags=re.M)
    text = re.sub(r"^      #   ", "        ", text, flags=re.M)
    [application] = yaml.safe_load(text)["applications"]
    assert ServeConfig.model_validate(application["args"]).retrievers == ["text", "speech"]
    with pytest.raises(ValueError, match="twice"):
        ServeConfig(retrievers=["text", "text"])
    with pytest.raises(ValueError, match="default_k"):
        RetrievalSettings(max_k=5, default_k=10)


@pytest.mark.realdata
def test_with_asr_a_spoken_query_is_transcribed_and_searched_by_text(ready, models, real_data):
    """retrieval.asr: the text retriever's deployment (the class Serve runs, on the champion
    and index the service serves) hears a recorded clip through the recognizer."""
    mp3 = real_data / "flickr8k_mini" / "speech_gtts" / "1000268201_693b08cb0e.mp3"
    settings = RetrievalSettings(text_model=models["names"]["text"], asr=True, poll_seconds=60)

    async def search():
        deployment = RetrieverDeployment.func_or_class.__new__(RetrieverDeployment.func_or_class)
        await deployment.__init__(settings, "text")
        try:
            return await deployment.search_audio(mp3.read_bytes(), 3, "audio/mpeg")
        finally:
            deployment._following.cancel()

    answer = asyncio.run(search())
    assert answer.path == "asr" and answer.query == "speech" and len(answer.images) == 3
    assert {"pink", "stairs"} <= set(answer.transcript.split())  # "a child in a pink dress..."
    assert answer.model.name == models["names"]["text"]


def test_a_held_decode_does_not_hold_up_other_queries(ready, models, monkeypatch):
    """Issue 32: audio is decoded on a thread of its own. While one spoken query's decode is
    held, a text query and an image query on the same replica (a text retriever with asr,
    the one that takes all three) are answered; then the spoken one is."""
    decoding, released = threading.Event(), threading.Event()
    decode = retriever_deployment.read_audio

    def held_decode(*args):
        decoding.set()
        assert released.wait(WAIT_S)
        return decode(*args)

    monkeypatch.setattr(retriever_deployment, "read_audio", held_decode)
    settings = RetrievalSettings(text_model=models["names"]["text"], asr=True, poll_seconds=60)

    async def queries():
        deployment = RetrieverDeployment.func_or_class.__new__(RetrieverDeployment.func_or_class)
        await deployment.__init__(settings, "text")
        try:
            spoken = asyncio.create_task(deployment.search_audio(wav(tone(1.0)), 2, "audio/wav"))
            assert await asyncio.to_thread(decoding.wait, WAIT_S)
            text = await asyncio.wait_for(deployment.search_text("a rocket", 2), WAIT_S)
            image = await asyncio.wait_for(deployment.search_image(jpeg("rocket"), 2), WAIT_S)
            assert not spoken.done()  # still decoding
            released.set()
            return text, image, await asyncio.wait_for(spoken, WAIT_S)
        finally:
            released.set()
            deployment._following.cancel()

    text, image, spoken = asyncio.run(queries())
    assert len(text.images) == 2 and len(image.captions) == 2
    assert spoken.path == "asr"


def test_an_index_on_s3_is_built_and_served(ready, models, data, s3_endpoint):
    """Last: it moves the text champion's index tag to an S3 copy, which the replicas follow."""
    output = "s3://conceptual/retrieval-serve-test/index-text"
    name = models["names"]["text"]
    config = BuildIndexConfig(device="cpu", approximate=True)
    result = run(f"models:/{name}@champion", data["features"], output, config)
    assert result["output"] == output and result["approximate_recall@10"] == 1.0
    local, remote = RetrievalIndex.load(indexes(data)["text"]), RetrievalIndex.load(output)
    np.testing.assert_array_equal(local.vectors["captions"], remote.vectors["captions"])
    assert remote.tables["images"].equals(local.tables["images"])
    assert remote.approximate["images"].ntotal == len(PHOTOS)

    def served_from_s3() -> bool:
        model = statuses(ready)["text_retrieval"]["model"]
        return model is not None and model["tags"][INDEX_TAG] == output

    wait_until(served_from_s3, "the text retriever to load the index from S3")
    response = ready.post("/v1/search/images", json={"text": "a rocket", "k": 2})
    assert response.status_code == 200 and len(response.json()["images"]) == 2
