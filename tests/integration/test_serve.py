"""The captioning service over real HTTP on 127.0.0.1: Ray Serve on the session's local Ray,
the private MLflow registry, two tiny untrained captioners with different vocabularies (so
answers show which one spoke) and real photos.

The tests run in file order: the first one meets the service before any champion exists
and promotes the first version; the alias-move test promotes the second.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx
import mlflow
import pytest
import skimage.data
import yaml
from PIL import Image
from ray import serve
from ray.serve.schema import ApplicationStatus, ServeDeploySchema

from conceptual import registry
from conceptual.demo.images import bomb, corrupt, good_jpeg, truncated
from conceptual.serve.app import APP_NAME, Api, ServeConfig, start
from conceptual.serve.captioner_deployment import CaptionerDeployment, CaptionerSettings
from conceptual.tracking import start_run

pytestmark = pytest.mark.integration

# Each model's words: every caption it writes uses only these (and its special tokens).
CAPTIONS = {
    "coffee": "a cup of coffee on a saucer",
    "cat": "the cat sleeps beside striped cushions",
}
MAX_BODY = 1 << 20
EVAL_SET = "val"
WAIT_S = 90  # upper bound on waiting for replicas to load or switch a model


@pytest.fixture(scope="module")
def name() -> str:
    """A registered model of its own: other tests in the session may have a `captioner`."""
    return f"serve-test-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def versions(platform_home, name, tiny_captioner):
    """The two captioners, registered (no alias yet), in CAPTIONS order."""
    registered = []
    for seed, (variant, caption) in enumerate(CAPTIONS.items()):
        model, vocab = tiny_captioner(caption, seed)
        with start_run("serve-tests") as run:
            registry.log_captioner(model, vocab)
            mlflow.log_metric("val.loss", 1.0 + seed)
        registered.append(registry.register(run.info.run_id, {"variant": variant}, name=name))
    return registered


@pytest.fixture(scope="module")
def service(ray_local, name, free_port):
    """The application's base URL; no champion exists when it starts."""
    config = ServeConfig(
        max_body_bytes=MAX_BODY,
        captioner=CaptionerSettings(model_name=name, poll_seconds=0.5),
    )
    yield start(config, port=free_port())
    serve.shutdown()


@pytest.fixture(scope="module")
def client(service):
    with httpx.Client(base_url=service, timeout=60) as http:
        yield http


@pytest.fixture(scope="module")
def ready(client, versions, name):
    """The client once version 1 is the champion and loaded (the first test promotes it;
    run alone, a test gets it from here)."""
    if registry.champion_version(name) is None:
        registry.promote_if_better(versions[0], 0.1, EVAL_SET, name=name)
    wait_until(lambda: client.get("/readyz").status_code == 200, "the champion to load")
    return client


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up after {WAIT_S} s waiting for {what}")
        time.sleep(0.2)


def photo(name: str) -> Image.Image:
    return Image.fromarray(getattr(skimage.data, name)())


@pytest.fixture(scope="module")
def coffee() -> bytes:
    return good_jpeg(photo("coffee"))


def words_of(version) -> set[str]:
    return set(CAPTIONS[version.tags["variant"]].split())


def error_code(response: httpx.Response) -> str:
    return response.json()["error"]["code"]


def test_not_ready_until_a_champion_is_promoted(client, versions, name, coffee):
    assert client.get("/healthz").json() == {"status": "ok"}
    readiness = client.get("/readyz")
    assert readiness.status_code == 503 and readiness.json()["ready"] is False
    assert "champion" in readiness.json()["models"][0]["problem"]
    refused = client.post("/v1/captions", content=coffee)
    assert refused.status_code == 503 and error_code(refused) == "not_ready"

    registry.promote_if_better(versions[0], 0.1, EVAL_SET, name=name)
    wait_until(lambda: client.get("/readyz").status_code == 200, "the champion to load")
    [status] = client.get("/readyz").json()["models"]
    assert status["ready"] and status["model"]["version"] == str(versions[0].version)


def test_a_raw_jpeg_gets_a_caption_naming_the_model(ready, versions, name, coffee):
    response = ready.post("/v1/captions", content=coffee, headers={"content-type": "image/jpeg"})
    assert response.status_code == 200
    body = response.json()
    assert body["model"] == {
        "name": name,
        "version": str(versions[0].version),
        "alias": "champion",
        "variant": "coffee",
    }
    assert body["beam_size"] == ServeConfig().default_beam
    [caption] = body["captions"]
    assert set(caption.split()) <= words_of(versions[0])
    assert int(response.headers["x-batch-size"]) >= 1


def test_a_multipart_upload_gets_several_captions_best_first(ready):
    image = good_jpeg(photo("chelsea"))
    response = ready.post(
        "/v1/captions",
        params={"beam_size": 4, "num_captions": 3},
        files={"image": ("chelsea.jpg", image, "image/jpeg")},
    )
    assert response.status_code == 200
    body = response.json()
    assert body["beam_size"] == 4
    assert len(body["captions"]) == 3 and len(set(body["captions"])) == 3


def test_models_names_what_is_served_with_its_scores(ready, versions, name):
    body = ready.get("/v1/models").json()
    [status] = body["models"]
    assert status["task"] == "captioning" and status["ready"]
    model = status["model"]
    assert (model["name"], model["version"], model["alias"]) == (
        name,
        str(versions[0].version),
        "champion",
    )
    assert model["variant"] == "coffee" and model["run_id"] == versions[0].run_id
    assert model["tags"][registry.score_tag(EVAL_SET)] == "0.1"
    assert model["metrics"] == {"val.loss": 1.0}
    assert body["limits"] == {"max_beam": 8, "default_beam": 3, "max_body_bytes": MAX_BODY}


def chunks(total: int, size: int = 64 << 10):
    """A body without Content-Length (chunked): only counting can stop it."""
    for offset in range(0, total, size):
        yield b"\xff" * min(size, total - offset)


def bad_requests() -> list:
    cup = photo("coffee")  # its corrupted copy fails to decode (not every photo's does)
    jpeg = {"content-type": "image/jpeg"}
    return [
        pytest.param({}, 400, "empty_body", id="no body"),
        pytest.param({"files": {"picture": ("a.jpg", good_jpeg(cup))}}, 400, "missing_image",
                     id="form without image"),
        pytest.param({"content": b"x", "headers": {"content-type": "multipart/form-data"}},
                     400, "bad_multipart", id="form without boundary"),
        pytest.param({"content": b"\xff" * (MAX_BODY + 1)}, 413, "too_large", id="too large"),
        pytest.param({"content": chunks(MAX_BODY + 1)}, 413, "too_large", id="too large chunked"),
        pytest.param({"content": b"<html>hello</html>", "headers": jpeg}, 415, "not_an_image",
                     id="not an image"),
        pytest.param({"content": truncated(cup)}, 422, "truncated", id="truncated"),
        pytest.param({"content": corrupt(cup)}, 422, "corrupt", id="corrupt"),
        pytest.param({"content": bomb(cup)}, 422, "too_many_pixels", id="decompression bomb"),
        pytest.param({"params": {"beam_size": 0}}, 422, "bad_parameter", id="beam 0"),
        pytest.param({"params": {"beam_size": 9}}, 422, "bad_parameter", id="beam over max"),
        pytest.param({"params": {"beam_size": "wide"}}, 422, "bad_parameter", id="beam text"),
        pytest.param({"params": {"num_captions": 1.5}}, 422, "bad_parameter", id="n not int"),
        pytest.param({"params": {"beam_size": 2, "num_captions": 3}}, 422, "bad_parameter",
                     id="n over beam"),
    ]  # fmt: skip


@pytest.mark.parametrize(("request_args", "status", "code"), bad_requests())
def test_bad_requests_get_a_clear_json_error(ready, coffee, request_args, status, code):
    if "params" in request_args:  # a good image, bad parameters
        request_args = {"content": coffee, **request_args}
    response = ready.post("/v1/captions", **request_args)
    assert response.status_code == status, response.text
    assert error_code(response) == code
    assert response.json()["error"]["message"]


def test_unknown_routes_and_methods_answer_json(ready):
    missing = ready.get("/v2/everything")
    assert missing.status_code == 404 and error_code(missing) == "not_found"
    wrong = ready.get("/v1/captions")
    assert wrong.status_code == 405 and error_code(wrong) == "method_not_allowed"


def test_bad_requests_leave_every_replica_running(ready, coffee):
    assert ready.post("/v1/captions", content=coffee).status_code == 200
    application = serve.status().applications[APP_NAME]
    assert application.status == ApplicationStatus.RUNNING
    for deployment in application.deployments.values():
        assert set(deployment.replica_states) == {"RUNNING"}, deployment.replica_states


def test_openapi_document_describes_the_api(ready):
    spec = ready.get("/openapi.json").json()
    assert {"/v1/captions", "/v1/models", "/healthz", "/readyz"} <= set(spec["paths"])
    post = spec["paths"]["/v1/captions"]["post"]
    bounds = {
        p["name"]: (p["schema"]["minimum"], p["schema"]["maximum"]) for p in post["parameters"]
    }
    assert bounds == {"beam_size": (1, 8), "num_captions": (1, 8)}
    content = post["requestBody"]["content"]
    assert {"image/*", "application/octet-stream", "multipart/form-data"} <= set(content)
    assert content["multipart/form-data"]["schema"]["required"] == ["image"]
    assert {"200", "400", "413", "415", "422", "503"} <= set(post["responses"])
    error = post["responses"]["422"]["content"]["application/json"]["schema"]["$ref"]
    assert error.endswith("/ErrorResponse")
    readyz = spec["paths"]["/readyz"]["get"]["responses"]
    assert readyz["503"]["content"]["application/json"]["schema"]["$ref"].endswith("/Readiness")


def test_concurrent_requests_all_succeed_and_share_batches(ready, coffee):
    with ThreadPoolExecutor(16) as pool:
        responses = list(pool.map(lambda _: ready.post("/v1/captions", content=coffee), range(16)))
    assert [r.status_code for r in responses] == [200] * 16
    assert len({tuple(r.json()["captions"]) for r in responses}) == 1  # same image, same model
    assert max(int(r.headers["x-batch-size"]) for r in responses) > 1


def test_an_alias_move_is_picked_up_while_requests_flow(ready, versions, name, coffee):
    old, new = (str(version.version) for version in versions)
    by_version = dict(zip((old, new), versions))
    answers: list[tuple[int, str | None, list[str]]] = []
    stop = threading.Event()

    def keep_asking() -> None:
        while not stop.is_set():
            response = ready.post("/v1/captions", content=coffee)
            body = response.json()
            version = body["model"]["version"] if response.status_code == 200 else None
            answers.append((response.status_code, version, body.get("captions", [])))

    clients = [threading.Thread(target=keep_asking) for _ in range(3)]
    for thread in clients:
        thread.start()
    try:
        wait_until(lambda: len(answers) >= 3, "answers from the first champion")
        assert registry.promote_if_better(versions[1], 0.9, EVAL_SET, name=name)["promoted"]
        # Every replica has switched once the last several answers all come from `new`.
        wait_until(
            lambda: len(answers) > 6 and {v for _, v, _ in answers[-6:]} == {new},
            "every replica to serve the new champion",
        )
    finally:
        stop.set()
        for thread in clients:
            thread.join()
    assert {status for status, _, _ in answers} == {200}
    assert answers[0][1] == old
    for _, version, [caption] in answers:
        assert set(caption.split()) <= words_of(by_version[version])


def test_serve_config_file_matches_the_code(repo):
    config = yaml.safe_load((repo / "serve" / "config.yaml").read_text())
    ServeDeploySchema.model_validate(config)
    assert config["http_options"]["host"] == "127.0.0.1"
    [application] = config["applications"]
    assert application["import_path"] == "conceptual.serve.app:build_app"
    ServeConfig.model_validate(application["args"])
    declared = {deployment["name"] for deployment in application["deployments"]}
    assert declared == {Api.name, CaptionerDeployment.name}


def test_default_beam_must_be_allowed():
    with pytest.raises(ValueError, match="default_beam"):
        ServeConfig(max_beam=2, default_beam=3)
