"""The service's captioners and retrievers are the family table's captioning and search keys
(conceptual.pipelines.families): a family added with a `Captioning` or `Search` entry is served with no
edit to serve/, and requests choose it with ?captioner= (or ?language=) and ?retriever=. The
routes run here over fake deployment handles: no Ray."""

from __future__ import annotations

import dataclasses

import pytest
import yaml
from ray.serve._private.build_app import build_app
from starlette.testclient import TestClient

from conceptual.pipelines import families
from conceptual.pipelines.families import Captioning, Search
from conceptual.serve.app import ServeConfig, build
from conceptual.serve.captioner_deployment import Captioned, CaptioningSettings
from conceptual.serve.retriever_deployment import (
    CaptionSearchResponse,
    ImageSearchResponse,
    RetrievalSettings,
)
from conceptual.serve.routes import Handles, make_api
from conceptual.serve.schema import CaptionResponse, ModelRef

MODEL = ModelRef(name="contrastive", version="1", alias="champion")


@pytest.fixture
def contrastive(monkeypatch) -> Search:
    """A family added to the registry (a second CLIP-style one, saved as the retrievers'
    models are), served as the key "contrastive" is."""
    search = Search("clip", "ClipRetriever", "clip")
    # Its code is the contrastive family's (the folder, and so the name, too).
    family = dataclasses.replace(families.FAMILIES["contrastive"], search=(search,))
    monkeypatch.setitem(families.FAMILIES, "clip", family)
    return search


def test_a_familys_search_entry_is_a_retriever_the_service_runs(contrastive):
    tracking = "sqlite:///nowhere.db"  # resolved by build() otherwise
    config = ServeConfig(
        captioning=CaptioningSettings(tracking_uri=tracking),
        retrievers=["clip", "text"],
        retrieval=RetrievalSettings(tracking_uri=tracking),
    )
    deployments = {d.name: d for d in build_app(build(config), name="test").deployments}
    assert set(deployments) == {"Api", "Captioner", "ClipRetriever", "TextRetriever"}
    assert deployments["ClipRetriever"].init_args[1] == "clip"
    assert config.retrieval.model_name("clip") == "clip"
    assert config.retrieval.model_name("text") == "retriever-text"
    # text_model and speech_model still name those two keys' models.
    settings = RetrievalSettings.model_validate(
        {"text_model": "mine", "models": {"clip": "clip-b"}}
    )
    assert settings.model_name("text") == "mine" and settings.model_name("clip") == "clip-b"


def test_a_key_no_family_declares_is_refused():
    with pytest.raises(ValueError, match="not search keys"):
        ServeConfig(retrievers=["clip"])
    with pytest.raises(ValueError, match="not search keys"):
        RetrievalSettings(models={"clip": "clip"})


class Method:
    """A deployment handle's method: `.remote(...)` records the call and answers `result`."""

    def __init__(self, calls: list, name: str, result):
        self.calls, self.name, self.result = calls, name, result

    def remote(self, *args):
        self.calls.append((self.name, args))

        async def result():
            return self.result

        return result()


class FakeRetriever:
    def __init__(self):
        self.calls: list = []
        images = ImageSearchResponse(
            images=[], query="text", path="text", model=MODEL, approximate=False
        )
        captions = CaptionSearchResponse(captions=[], model=MODEL, approximate=False)
        self.search_text = Method(self.calls, "search_text", images)
        self.search_image = Method(self.calls, "search_image", captions)


@pytest.fixture
def client(contrastive):
    retriever = FakeRetriever()
    api = make_api(
        ServeConfig(retrievers=["clip"]),
        Handles(captioners={}, retrievers={"clip": retriever}),
    )
    with TestClient(api) as client:
        yield client, retriever.calls


def error_of(response) -> tuple[int, str]:
    return response.status_code, response.json()["error"]["code"]


def test_retriever_chooses_among_the_enabled_keys(client):
    http, calls = client
    query = {"text": "a dog", "k": 2}
    response = http.post("/v1/search/images?retriever=clip", json=query)
    assert response.status_code == 200, response.text
    response = http.post(
        "/v1/search/captions?retriever=clip&k=3",
        content=b"jpeg",
        headers={"content-type": "image/jpeg"},
    )
    assert response.status_code == 200, response.text
    assert calls == [("search_text", ("a dog", 2)), ("search_image", (b"jpeg", 3))]
    # Without ?retriever=, text queries go to `text`, as before: not run here.
    assert error_of(http.post("/v1/search/images", json=query)) == (501, "not_enabled")
    assert error_of(http.post("/v1/search/images?retriever=bogus", json=query)) == (
        422,
        "bad_parameter",
    )
    # A text model hears speech only through the recognizer (retrieval.asr, off here).
    spoken = http.post(
        "/v1/search/images?retriever=clip",
        content=b"RIFF",
        headers={"content-type": "audio/wav"},
    )
    assert error_of(spoken) == (422, "bad_parameter")
    assert len(calls) == 2


# --- captioners ---------------------------------------------------------------------------


@pytest.fixture
def glimpse(monkeypatch) -> Captioning:
    """A family added to the registry with a captioner of its own (an English one, saved as
    the captioners' models are), served as the key "glimpse"."""
    captioning = Captioning("glimpse", "GlimpseCaptioner", "glimpse-captioner")
    family = dataclasses.replace(families.FAMILIES["captioner"], captioning=(captioning,))
    monkeypatch.setitem(families.FAMILIES, "glimpse", family)  # the captioner's code
    return captioning


def test_a_familys_captioning_entry_is_a_captioner_the_service_runs(glimpse):
    config = ServeConfig(
        captioners=["en", "glimpse"],
        captioning=CaptioningSettings(tracking_uri="sqlite:///nowhere.db"),
    )
    deployments = {d.name: d for d in build_app(build(config), name="test").deployments}
    assert set(deployments) == {"Api", "Captioner", "GlimpseCaptioner"}
    assert deployments["GlimpseCaptioner"].init_args[1] == "glimpse"
    assert config.captioning.model_name("glimpse") == "glimpse-captioner"
    assert config.captioning.model_name("en") == "captioner"
    assert config.captioning.model_name("zh") == "captioner-zh"


def test_captioners_are_checked_against_the_table():
    assert ServeConfig().captioners == ["en"]
    assert ServeConfig(captioners=["zh"]).captioners == ["zh"]  # English may be left out
    with pytest.raises(ValueError, match="twice"):
        ServeConfig(captioners=["zh", "zh"])
    with pytest.raises(ValueError):
        ServeConfig(captioners=[])
    with pytest.raises(ValueError, match="not captioning keys"):
        ServeConfig(captioners=["fr"])
    with pytest.raises(ValueError, match="not captioning keys"):
        CaptioningSettings(models={"fr": "captioner-fr"})


def test_the_names_before_captioners_had_keys_are_read_for_a_release():
    config = ServeConfig.model_validate(
        {
            "languages": ["en", "zh-CN"],
            "captioner": {"model_name": "mine", "poll_seconds": 2},
            "captioner_zh": {"model_name": "mine-zh"},
        }
    )
    assert config.captioners == ["en", "zh"]
    assert config.captioning.models == {"en": "mine", "zh": "mine-zh"}
    assert config.captioning.poll_seconds == 2
    # The Chinese captioner's own settings are the shared ones now: said, not dropped.
    with pytest.raises(ValueError, match="shared by every captioner"):
        ServeConfig.model_validate({"captioner_zh": {"max_batch_size": 4}})
    with pytest.raises(ValueError, match="one key"):
        ServeConfig.model_validate({"languages": ["en"], "captioners": ["en"]})


def test_the_shipped_config_runs_chinese_beside_english_when_listed(repo):
    text = (repo / "serve" / "config.yaml").read_text()
    assert "      captioners: [en]\n" in text
    [application] = yaml.safe_load(text.replace("captioners: [en]", "captioners: [en, zh]"))[
        "applications"
    ]
    config = ServeConfig.model_validate(application["args"])
    assert config.captioners == ["en", "zh"] and config.captioning.models == {}


class FakeCaptioner:
    def __init__(self, calls: list, key: str, language: str):
        response = CaptionResponse(
            captions=["a dog"],
            display=["a dog"],
            language=language,
            captioner=key,
            model=MODEL,
            beam_size=4,
        )
        self.caption = Method(calls, key, Captioned(response, 1, {}))


@pytest.fixture
def captioning(glimpse):
    """The routes over captioners en, glimpse (English both) and zh, in that order."""

    def client(keys: list[str]):
        calls: list = []
        handles = {
            key: FakeCaptioner(calls, key, families.captionings()[key].language) for key in keys
        }
        api = make_api(ServeConfig(captioners=keys), Handles(captioners=handles))
        return TestClient(api), calls

    return client


def test_captioner_or_language_chooses_among_the_enabled_captioners(captioning):
    http, calls = captioning(["en", "glimpse", "zh"])
    with http:
        for params, key in (
            ({}, "en"),  # English, by the first listed that writes it
            ({"captioner": "glimpse"}, "glimpse"),
            ({"captioner": "glimpse", "language": "en"}, "glimpse"),
            ({"language": "zh-CN"}, "zh"),
        ):
            response = http.post("/v1/captions", params=params, content=b"jpeg")
            assert response.status_code == 200, response.text
            assert response.json()["captioner"] == key and calls[-1][0] == key
        crossed = http.post("/v1/captions?captioner=glimpse&language=zh", content=b"jpeg")
        assert error_of(crossed) == (422, "bad_parameter")
        assert "'glimpse' writes 'en', not 'zh'" in crossed.json()["error"]["message"]
        unknown = http.post("/v1/captions?captioner=bogus", content=b"jpeg")
        assert error_of(unknown) == (422, "bad_parameter")
    assert len(calls) == 4
    http, calls = captioning(["glimpse", "zh"])
    with http:
        response = http.post("/v1/captions", content=b"jpeg")
        assert response.json()["captioner"] == "glimpse"  # the first listed writing English
        assert error_of(http.post("/v1/captions?captioner=en", content=b"jpeg")) == (
            501,
            "not_enabled",
        )
    http, calls = captioning(["zh"])
    with http:
        refused = http.post("/v1/captions", content=b"jpeg")
        assert error_of(refused) == (501, "not_enabled")
        assert "it writes 'zh'" in refused.json()["error"]["message"]
    assert calls == []
