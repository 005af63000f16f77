"""The service's retrievers are the family table's search keys (conceptual.families): a
family added with a `Search` entry is served with no edit to serve/, and requests choose it
with ?retriever=. The routes run here over fake deployment handles: no Ray."""

from __future__ import annotations

import dataclasses

import pytest
from ray.serve._private.build_app import build_app
from starlette.testclient import TestClient

from conceptual import families
from conceptual.families import Search
from conceptual.serve.app import ServeConfig, build
from conceptual.serve.captioner_deployment import CaptioningSettings
from conceptual.serve.retriever_deployment import (
    CaptionSearchResponse,
    ImageSearchResponse,
    RetrievalSettings,
)
from conceptual.serve.routes import Handles, make_api
from conceptual.serve.schema import ModelRef

MODEL = ModelRef(name="contrastive", version="1", alias="champion")


@pytest.fixture
def contrastive(monkeypatch) -> Search:
    """A family added to the registry (a second CLIP-style one, saved as the retrievers'
    models are), served as the key "contrastive" is."""
    search = Search("clip", "ClipRetriever", "clip")
    family = dataclasses.replace(families.FAMILIES["contrastive"], name="clip", search=(search,))
    monkeypatch.setitem(families.FAMILIES, family.name, family)
    return search


def test_a_familys_search_entry_is_a_retriever_the_service_runs(contrastive):
    tracking = "sqlite:///nowhere.db"  # resolved by build() otherwise
    config = ServeConfig(
        captioner=CaptioningSettings(tracking_uri=tracking),
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
