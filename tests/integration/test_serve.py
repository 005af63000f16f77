"""The captioning service over real HTTP on 127.0.0.1: Ray Serve on the session's local Ray,
the private MLflow registry, two tiny untrained captioners with different vocabularies (so
answers show which one spoke) and real photos. A second application beside the first serves
English and Chinese (a tiny captioner of Chinese words, registered under a model of its own).

The tests run in file order: the first one meets the service before any champion exists
and promotes the first version; the alias-move test promotes the second. Hostile clients
(slow uploads, huge forms, leaky errors, and attacks on the nginx front door) are tested
here too; the load tests among them are marked slow (`make test-slow`).
"""

from __future__ import annotations

import contextlib
import http.client
import io
import json
import math
import os
import select
import signal
import socket
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import mlflow
import pytest
import ray
import skimage.data
import yaml
from PIL import Image
from ray import serve
from ray.serve.schema import ApplicationStatus, ServeDeploySchema
from waiting import WAIT_S, wait_until  # tests/waiting.py

from conceptual import registry
from conceptual.models.inference import max_decoded_pixels
from conceptual.models.saving import LEGACY_FEATURES
from conceptual.pipelines.families import captionings
from conceptual.serve.app import APP_NAME, Api, ServeConfig, build, start
from conceptual.serve.captioner_deployment import CaptionerDeployment, CaptioningSettings
from conceptual.serve.front_door import FrontDoor, FrontDoorConfig
from conceptual.serve.uploads import MAX_FORM_PARTS
from conceptual.tracking import start_run
from conceptual_demo.images import bomb, corrupt, good_jpeg, truncated

pytestmark = pytest.mark.integration

# Each model's words: every caption it writes uses only these (and its special tokens).
CAPTIONS = {
    "coffee": "a cup of coffee on a saucer",
    "cat": "the cat sleeps beside striped cushions",
}
# The Chinese captioner's words (a caption as the Chinese training data holds it: segmented).
ZH_CAPTION = "一只 狗 在 草地 上 跑"
ZH_SEED = 1  # an untrained model's beams: this seed's are not empty on the coffee photo
MAX_BODY = 1 << 20
EVAL_SET = "val"
BODY_TIMEOUT_S = 6.0  # short, so that the slow-upload tests run in seconds


@pytest.fixture(scope="module")
def name() -> str:
    """A registered model of its own: other tests in the session may have a `captioner`."""
    return f"serve-test-{uuid.uuid4().hex[:8]}"


# The beam the test captioners were evaluated at (saved with them): not the default of 4,
# so that a request without beam_size shows it decodes at the model's own.
EVALUATED_BEAM = 5


@pytest.fixture(scope="module")
def versions(platform_home, name, tiny_captioner, log_captioner):
    """The two captioners, registered (no alias yet), in CAPTIONS order."""
    registered = []
    for seed, (variant, caption) in enumerate(CAPTIONS.items()):
        model, vocab = tiny_captioner(caption, seed)
        with start_run("serve-tests") as run:
            log_captioner(model, vocab, beam=EVALUATED_BEAM)
            mlflow.log_metric("val.loss", 1.0 + seed)
        registered.append(registry.register(run.info.run_id, {"variant": variant}, name=name))
    return registered


@pytest.fixture(scope="module")
def service(ray_local, name, free_port):
    """The application's base URL; no champion exists when it starts."""
    config = ServeConfig(
        max_body_bytes=MAX_BODY,
        body_timeout_s=BODY_TIMEOUT_S,
        # The tiny models answer in milliseconds and requests are decoded one at a time: a
        # wait longer than the default lets concurrent requests meet in a batch.
        captioning=CaptioningSettings(
            models={"en": name}, poll_seconds=0.5, batch_wait_timeout_s=0.05
        ),
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
    assert readiness.json()["models"][0]["problem"] is None  # for admins (admin_details)
    refused = client.post("/v1/captions", content=coffee)
    assert refused.status_code == 503 and error_code(refused) == "not_ready"
    assert refused.headers["retry-after"] == "5"

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
    assert body["beam_size"] == EVALUATED_BEAM  # the beam the model was evaluated at
    assert body["language"] == "en" and body["display"] == body["captions"]
    assert body["captioner"] == "en"  # the first (the only) captioner served writing English
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


def test_more_captions_than_the_models_beam_is_refused(ready, coffee):
    """Without beam_size the search runs at the model's beam, which bounds num_captions."""
    response = ready.post(
        "/v1/captions", content=coffee, params={"num_captions": EVALUATED_BEAM + 1}
    )
    assert response.status_code == 422 and error_code(response) == "bad_parameter"
    assert f"beam_size {EVALUATED_BEAM}" in response.json()["error"]["message"]


def test_models_names_what_is_served_and_no_more(ready, versions, name):
    """Strangers see a model's name, version, alias and language; its run, tags and
    metrics need the service's `admin_details` (TestChinese's application has it)."""
    body = ready.get("/v1/models").json()
    [status] = body["models"]
    assert status["task"] == "captioning" and status["language"] == "en" and status["ready"]
    assert status["model"] == {
        "name": name,
        "version": str(versions[0].version),
        "alias": "champion",
        "variant": "coffee",
    }
    assert status["problem"] is None
    assert body["limits"] == {"max_beam": 8, "default_beam": None, "max_body_bytes": MAX_BODY}


def test_search_when_not_enabled_is_501(ready):
    for route in ("/v1/search/images", "/v1/search/captions"):
        response = ready.post(route, json={"text": "a cat"})
        assert response.status_code == 501 and error_code(response) == "not_enabled", route


def test_errors_quote_a_clients_value_cut_short(ready, coffee):
    response = ready.post("/v1/captions", params={"beam_size": "9" * 60_000}, content=coffee)
    assert response.status_code == 422 and error_code(response) == "bad_parameter"
    assert len(response.text) < 1000 and "(60002 chars)" in response.text  # repr: quotes


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
        pytest.param({"params": {"language": "fr"}}, 422, "bad_parameter", id="unknown language"),
        pytest.param({"params": {"language": "zh"}}, 501, "not_enabled", id="zh not enabled"),
        pytest.param({"params": {"captioner": "zh"}}, 501, "not_enabled", id="zh not run"),
        pytest.param({"params": {"captioner": "bogus"}}, 422, "bad_parameter", id="no such key"),
        pytest.param({"params": {"captioner": "en", "language": "zh"}}, 422, "bad_parameter",
                     id="captioner writes another language"),
    ]  # fmt: skip


@pytest.mark.parametrize(("request_args", "status", "code"), bad_requests())
def test_bad_requests_get_a_clear_json_error(ready, coffee, request_args, status, code):
    if "params" in request_args:  # a good image, bad parameters
        request_args = {"content": coffee, **request_args}
    response = ready.post("/v1/captions", **request_args)
    assert response.status_code == status, response.text
    assert error_code(response) == code
    message = response.json()["error"]["message"]
    assert message and "Error" not in message  # our words, never a library's exception


def test_unknown_routes_and_methods_answer_json(ready):
    missing = ready.get("/v2/everything")
    assert missing.status_code == 404 and error_code(missing) == "not_found"
    wrong = ready.get("/v1/captions")
    assert wrong.status_code == 405 and error_code(wrong) == "method_not_allowed"


def tiny_parts_form(size: int) -> tuple[bytes, str]:
    """A form of as many empty parts as fit in `size` bytes, and its content type."""
    part = b"--b\r\nContent-Disposition: form-data; name=x\r\n\r\n\r\n"
    end = b"--b--\r\n"
    return part * ((size - len(end)) // len(part)) + end, "multipart/form-data; boundary=b"


def test_a_form_of_many_tiny_parts_is_refused_at_once(ready):
    body, content_type = tiny_parts_form(MAX_BODY)  # ~23,000 parts
    started = time.monotonic()
    response = ready.post("/v1/captions", content=body, headers={"content-type": content_type})
    elapsed = time.monotonic() - started
    assert response.status_code == 400 and error_code(response) == "too_many_parts"
    assert str(MAX_FORM_PARTS) in response.json()["error"]["message"]
    assert elapsed < 5, f"{elapsed:.1f} s to refuse the form"


def open_upload(base_url: str, declared_bytes: int) -> socket.socket:
    """A raw POST /v1/captions that declares `declared_bytes` of body and sends one."""
    url = httpx.URL(base_url)
    connection = socket.create_connection((url.host, url.port), timeout=WAIT_S)
    head = (
        f"POST /v1/captions HTTP/1.1\r\nHost: {url.host}\r\n"
        f"Content-Type: image/jpeg\r\nContent-Length: {declared_bytes}\r\n\r\n"
    )
    connection.sendall(head.encode() + b"\xff")
    return connection


def trickle(connection: socket.socket, every_s: float, until: float) -> tuple[int, dict] | None:
    """Sends one more byte every `every_s` seconds until the server answers (its status and
    JSON body) or the clock passes `until` (None)."""
    while (left := until - time.monotonic()) > 0:
        readable, _, _ = select.select([connection], [], [], min(every_s, left))
        if readable:
            response = http.client.HTTPResponse(connection)
            response.begin()
            return response.status, json.loads(response.read())
        connection.sendall(b"\xff")
    return None


def test_a_body_that_trickles_in_gets_408(ready, service):
    started = time.monotonic()
    with open_upload(service, 1000) as connection:
        answer = trickle(connection, every_s=0.5, until=started + BODY_TIMEOUT_S + 10)
    assert answer is not None, "no answer while the body trickled in"
    status, body = answer
    assert status == 408 and body["error"]["code"] == "body_timeout"
    assert time.monotonic() - started < BODY_TIMEOUT_S + 5


def test_credentials_in_the_tracking_uri_are_never_shown(ready, name, free_port):
    """A tracking server named with a password that refuses connections: /readyz and
    /v1/models say what failed, without the password."""
    secret = "hunter2-secret"
    settings = CaptioningSettings(
        models={"en": name},
        tracking_uri=f"http://user:{secret}@127.0.0.1:{free_port()}/",
        poll_seconds=3600,
    )
    # MLflow retries a refused connection for minutes unless told not to.
    no_retries = {"env_vars": {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0"}}
    actor_options = {**CaptionerDeployment.ray_actor_options, "runtime_env": no_retries}
    config = ServeConfig(captioning=settings, admin_details=True)  # problems shown
    application = build(config, {"ray_actor_options": actor_options})
    serve.run(application, name="leaky", route_prefix="/leaky")
    try:
        readiness = ready.get("/leaky/readyz")
        models = ready.get("/leaky/v1/models")
    finally:
        serve.delete("leaky")
    assert readiness.status_code == 503
    assert "127.0.0.1" in readiness.json()["models"][0]["problem"]  # still says where
    assert models.status_code == 200
    for response in (readiness, models):
        assert secret not in response.text


def test_malformed_http_gets_uvicorns_plain_400_and_the_service_goes_on(ready, service):
    """A limit of Ray Serve, documented in the README's Security section: its proxy's
    uvicorn answers broken framing itself, in text/plain, before the application sees it."""
    url = httpx.URL(service)
    with socket.create_connection((url.host, url.port), timeout=WAIT_S) as connection:
        connection.sendall(b"NOT HTTP AT ALL\r\n\r\n")
        response = http.client.HTTPResponse(connection)
        response.begin()
        assert response.status == 400
        assert response.getheader("content-type").startswith("text/plain")
    assert ready.get("/healthz").status_code == 200


def test_uploads_past_the_limit_are_refused_while_health_answers(ready, service):
    """8 more slow uploads than `max_concurrent_uploads`: those past the limit get 503 busy
    at once, the others 408 at the body deadline, and /healthz answers meanwhile."""
    limit = ServeConfig().max_concurrent_uploads
    until = time.monotonic() + BODY_TIMEOUT_S + 10
    uploads = [open_upload(service, 1000) for _ in range(limit + 8)]
    try:
        with ThreadPoolExecutor(len(uploads)) as pool:
            answers = pool.map(lambda upload: trickle(upload, every_s=1, until=until), uploads)
            health = ready.get("/healthz", timeout=3)
            codes = [answer and (answer[0], answer[1]["error"]["code"]) for answer in answers]
    finally:
        for upload in uploads:
            upload.close()
    assert health.status_code == 200
    assert set(codes) == {(503, "busy"), (408, "body_timeout")}
    assert codes.count((408, "body_timeout")) <= limit


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
    parameters = {p["name"]: p["schema"] for p in post["parameters"]}
    assert set(parameters) == {"beam_size", "num_captions", "captioner", "language"}
    # beam_size may be left out (the model's own beam): an integer in bounds, or null
    beam, null = parameters["beam_size"]["anyOf"]
    assert null == {"type": "null"} and "default" not in parameters["beam_size"]
    bounds = {name: (p.get("minimum"), p.get("maximum")) for name, p in parameters.items()}
    assert (beam["minimum"], beam["maximum"]) == bounds["num_captions"] == (1, 8)
    [language, null] = parameters["language"]["anyOf"]  # None: the captioner's, or en
    assert language["enum"] == ["en", "zh"] and null == {"type": "null"}
    assert "default" not in parameters["language"] and "default" not in parameters["captioner"]
    content = post["requestBody"]["content"]
    assert {"image/*", "application/octet-stream", "multipart/form-data"} <= set(content)
    assert content["multipart/form-data"]["schema"]["required"] == ["image"]
    assert {"200", "400", "413", "415", "422", "501", "503"} <= set(post["responses"])
    error = post["responses"]["422"]["content"]["application/json"]["schema"]["$ref"]
    assert error.endswith("/ErrorResponse")
    readyz = spec["paths"]["/readyz"]["get"]["responses"]
    assert readyz["503"]["content"]["application/json"]["schema"]["$ref"].endswith("/Readiness")


# --- Chinese beside English: a second application on the same Serve ------------------------

MULTI = "/multi"  # the route prefix of the application serving both captioners


@pytest.fixture(scope="module")
def zh_versions(platform_home, name, tiny_captioner, log_captioner):
    """Two versions of the Chinese model (`<name>-zh`): an English captioner registered there
    by mistake, the champion at first, and a Chinese one (its saved config says zh)."""
    english, english_vocab = tiny_captioner(CAPTIONS["coffee"], 0)
    chinese, chinese_vocab = tiny_captioner(ZH_CAPTION, ZH_SEED)
    chinese.config = chinese.config.model_copy(update={"language": "zh"})
    registered = []
    for model, vocab, variant in ((english, english_vocab, "en"), (chinese, chinese_vocab, "zh")):
        with start_run("serve-tests") as run:
            log_captioner(model, vocab)
        registered.append(
            registry.register(run.info.run_id, {"variant": variant}, name=f"{name}-zh")
        )
    registry.promote_if_better(registered[0], 0.1, EVAL_SET, name=f"{name}-zh")
    return registered


def status_of(client: httpx.Client, language: str, path: str = "/v1/models") -> dict:
    [status] = [s for s in client.get(MULTI + path).json()["models"] if s["language"] == language]
    return status


class TestChinese:
    """captioners [en, zh]: `Captioner` follows the module's English model, `CaptionerZh` the
    Chinese one. Deployed beside the module's application (Serve is up already: only the new
    replicas start), small, and deleted after these tests."""

    @pytest.fixture(scope="class")
    def multi(self, ready, name, zh_versions):
        config = ServeConfig(
            captioners=["en", "zh"],
            captioning=CaptioningSettings(
                models={"en": name, "zh": f"{name}-zh"}, poll_seconds=0.5
            ),
            admin_details=True,  # problems, runs, tags and metrics shown
        )
        small = {"ray_actor_options": {"num_cpus": 0.1}}  # beside the module's replicas
        serve.run(build(config, small), name="multilingual", route_prefix=MULTI)
        yield ready
        serve.delete("multilingual")

    def test_a_champion_writing_english_is_not_served_as_chinese(
        self, multi, name, zh_versions, coffee
    ):
        readiness = multi.get(MULTI + "/readyz")
        assert readiness.status_code == 503
        chinese = status_of(multi, "zh", "/readyz")
        assert not chinese["ready"] and chinese["model"] is None
        assert "writes 'en', not 'zh'" in chinese["problem"]
        assert status_of(multi, "en", "/readyz")["ready"]
        refused = multi.post(MULTI + "/v1/captions", params={"language": "zh"}, content=coffee)
        assert refused.status_code == 503 and error_code(refused) == "not_ready"
        assert "writes" not in refused.json()["error"]["message"]  # in /readyz, for admins
        english = status_of(multi, "en")["model"]
        assert english["run_id"] and english["metrics"] == {"val.loss": 1.0}
        assert english["tags"][registry.score_tag(EVAL_SET)] == "0.1"

        registry.promote_if_better(zh_versions[1], 0.9, EVAL_SET, name=f"{name}-zh")
        wait_until(lambda: multi.get(MULTI + "/readyz").status_code == 200, "the zh champion")

    def test_a_chinese_request_gets_chinese_words_from_the_chinese_champion(
        self, multi, name, zh_versions, coffee
    ):
        for chosen in ({"language": "zh"}, {"captioner": "zh"}):
            response = multi.post(
                MULTI + "/v1/captions",
                params={**chosen, "beam_size": 3, "num_captions": 2},
                content=coffee,
            )
            assert response.status_code == 200, response.text
            body = response.json()
            assert body["language"] == "zh" and body["captioner"] == "zh"
            assert body["model"] == {
                "name": f"{name}-zh",
                "version": str(zh_versions[1].version),
                "alias": "champion",
                "variant": "zh",
            }
            assert any(body["captions"]) and len(body["captions"]) == 2
            for caption, shown in zip(body["captions"], body["display"], strict=True):
                assert set(caption.split()) <= set(ZH_CAPTION.split())
                assert shown == caption.replace(" ", "")  # Han: no spaces between words

    def test_english_is_still_the_default(self, multi, name, coffee):
        for params in ({}, {"language": "en"}, {"captioner": "en"}):
            response = multi.post(MULTI + "/v1/captions", params=params, content=coffee)
            assert response.status_code == 200, response.text
            body = response.json()
            assert body["language"] == "en" and body["model"]["name"] == name
            assert body["captioner"] == "en"
            assert body["model"]["version"] == str(registry.champion_version(name).version)
            assert set(body["captions"][0].split()) <= set(" ".join(CAPTIONS.values()).split())
        unknown = multi.post(MULTI + "/v1/captions", params={"language": "fr"}, content=coffee)
        assert unknown.status_code == 422 and error_code(unknown) == "bad_parameter"
        crossed = {"captioner": "zh", "language": "en"}
        refused = multi.post(MULTI + "/v1/captions", params=crossed, content=coffee)
        assert refused.status_code == 422 and "writes 'zh', not 'en'" in refused.text

    def test_models_and_readyz_list_every_language(self, multi, name, zh_versions):
        for path in ("/v1/models", "/readyz"):
            models = multi.get(MULTI + path).json()["models"]
            assert {(s["captioner"], s["language"], s["model"]["name"]) for s in models} == {
                ("en", "en", name),
                ("zh", "zh", f"{name}-zh"),
            }
            assert all(s["ready"] and s["task"] == "captioning" for s in models)
        assert status_of(multi, "zh")["model"]["version"] == str(zh_versions[1].version)
        deployments = serve.status().applications["multilingual"].deployments
        assert set(deployments) == {"Api", "Captioner", "CaptionerZh"}


def test_concurrent_requests_all_succeed_and_share_batches(ready, coffee):
    # 8: at most what the ingress's handle queues (max_queued_requests) while the replica
    # takes them up, so none can be refused; beyond it a 503 busy is the designed answer.
    with ThreadPoolExecutor(8) as pool:
        responses = list(pool.map(lambda _: ready.post("/v1/captions", content=coffee), range(8)))
    assert [r.status_code for r in responses] == [200] * 8
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
    args = ServeConfig.model_validate(application["args"])
    # The deployments' settings live in their decorators only: the file overrides nothing.
    assert "deployments" not in application
    assert args.captioners == ["en"] and captionings()["en"].deployment == CaptionerDeployment.name
    # Slow uploads must leave ingress slots for health checks, with the file's limit too.
    assert Api.max_ongoing_requests > args.max_concurrent_uploads
    assert Api.max_ongoing_requests > ServeConfig().max_concurrent_uploads
    # And requests waiting for a model leave them too (max_in_flight), while slow uploads
    # leave slots for the requests already received.
    assert Api.max_ongoing_requests > args.max_in_flight > args.max_concurrent_uploads


def test_default_beam_must_be_allowed():
    with pytest.raises(ValueError, match="default_beam"):
        ServeConfig(max_beam=2, default_beam=3)


# --- behind the front door (nginx, conceptual.serve.front_door) ----------------------------
# A real nginx, run as this user under its own prefix on a free port, in front of this
# module's application. The attacks of issue 32's review, small-scale: each is cut off with
# its status while /healthz keeps answering. (Not in this file's last place: the load tests
# below are slow.)

HEADER_TIMEOUT_S = 2
PER_CLIENT = 4
WORKER_CONNECTIONS = 64


@pytest.fixture(scope="module")
def door(service, free_port):
    """The front door's URL, in front of the module's application."""
    config = FrontDoorConfig(
        listen=f"127.0.0.1:{free_port()}",
        upstream=service.removeprefix("http://"),
        worker_processes="1",
        worker_connections=WORKER_CONNECTIONS,
        connections_per_client=PER_CLIENT,
        header_timeout_s=HEADER_TIMEOUT_S,
        max_body_bytes=MAX_BODY,
    )
    front = FrontDoor(config)
    yield front.url
    front.stop()


def healthy(url: str) -> bool:
    response = httpx.get(f"{url}/healthz", timeout=3)
    return response.status_code == 200 and response.json() == {"status": "ok"}


def connect(url: str) -> socket.socket:
    address = httpx.URL(url)
    return socket.create_connection((address.host, address.port), timeout=30)


def status_line(connection: socket.socket) -> str:
    """The response's status line, or '' when the server closed without one."""
    data = b""
    while b"\r\n" not in data:
        try:
            chunk = connection.recv(4096)
        except ConnectionResetError:  # nginx resets a connection it timed out
            break
        if not chunk:
            break
        data += chunk
    return data.split(b"\r\n", 1)[0].decode()


def test_requests_pass_through_the_front_door(door, ready, coffee):
    assert healthy(door)
    assert httpx.get(f"{door}/readyz").status_code == 200
    captioned = httpx.post(f"{door}/v1/captions", content=coffee, timeout=WAIT_S)
    assert captioned.status_code == 200 and captioned.json()["captions"]
    refused = httpx.post(f"{door}/v1/captions", content=b"")
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "empty_body"


@pytest.mark.parametrize("where", ["header", "request line"])
def test_big_headers_are_refused(door, where):
    huge = "a" * (64 << 10)
    with connect(door) as connection:
        if where == "header":
            connection.sendall(
                f"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: {huge}\r\n\r\n".encode()
            )
        else:
            connection.sendall(f"GET /healthz?{huge} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        status = status_line(connection)
    assert status.split()[1] in {"400", "414", "431", "494"}, status
    assert healthy(door)


def test_unfinished_headers_are_cut_off_at_the_header_timeout(door):
    started = time.monotonic()
    with connect(door) as connection:
        connection.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Never: end")
        assert status_line(connection) in {"", "HTTP/1.1 408 Request Time-out"}
    assert time.monotonic() - started < HEADER_TIMEOUT_S + 3
    assert healthy(door)


def test_idle_connections_are_limited_and_closed(door):
    """More idle connections than the worker holds: all are closed by the header timeout,
    and /healthz answers meanwhile and after."""
    idle = [connect(door) for _ in range(2 * WORKER_CONNECTIONS)]
    try:
        time.sleep(0.5)
        started = time.monotonic()
        assert healthy(door)  # waits at most until the timeout frees the worker's slots
        assert time.monotonic() - started < HEADER_TIMEOUT_S + 2
        for connection in idle:  # each read ends when nginx closes it at its header timeout
            connection.settimeout(HEADER_TIMEOUT_S + 5)
            assert status_line(connection) in {"", "HTTP/1.1 408 Request Time-out"}
    finally:
        for connection in idle:
            connection.close()
    assert healthy(door)


def test_connections_past_the_per_client_limit_get_503(door):
    """Slow uploads from one address: past connections_per_client, 503 busy with
    Retry-After at once; health probes are not counted."""
    uploads = [connect(door) for _ in range(PER_CLIENT + 3)]
    try:
        statuses = []
        for connection in uploads:
            connection.sendall(b"POST /v1/captions HTTP/1.1\r\nHost: x\r\n"
                               b"Content-Length: 1000\r\n\r\nx")  # fmt: skip
            time.sleep(0.05)
        for connection in uploads[PER_CLIENT:]:
            connection.settimeout(5)
            statuses.append(status_line(connection))
        assert statuses == ["HTTP/1.1 503 Service Temporarily Unavailable"] * 3
        assert healthy(door)
    finally:
        for connection in uploads:
            connection.close()


def test_a_chunked_oversize_body_gets_413_before_it_is_all_sent(door):
    total, chunk = 64 * MAX_BODY, b"\xff" * (64 << 10)
    sent = 0
    with connect(door) as connection:
        connection.sendall(b"POST /v1/captions HTTP/1.1\r\nHost: x\r\n"
                           b"Transfer-Encoding: chunked\r\n\r\n")  # fmt: skip
        while sent < total and not select.select([connection], [], [], 0)[0]:  # no answer yet
            try:
                connection.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            except OSError:  # closed by the server after its answer
                break
            sent += len(chunk)
        connection.settimeout(5)
        status = status_line(connection)
    assert status.startswith("HTTP/1.1 413"), status
    assert sent < total / 4
    assert healthy(door)


# --- load (marked slow) ---------------------------------------------------------------------


@pytest.mark.slow
def test_slow_uploads_leave_health_and_good_requests_answered(ready, service, coffee):
    """Slow uploads straight to Serve (no front door), 8 fewer than max_concurrent_uploads,
    each declaring 1 MB and sending a byte every 5 s, for 20 s (each starting over when
    cut): /healthz and a good caption request still answer in time, and every slow upload is
    cut at the body deadline. (More would refuse the good upload too: busy, by design.)"""
    slow = ServeConfig().max_concurrent_uploads - 8
    stop_at = time.monotonic() + 20
    answers: list[tuple[int, dict] | None] = []

    opened = threading.Semaphore(0)

    def upload_slowly() -> None:
        while time.monotonic() < stop_at:
            with open_upload(service, 1_000_000) as connection:
                opened.release()
                answers.append(trickle(connection, every_s=5, until=stop_at))

    health_s: list[float] = []
    with ThreadPoolExecutor(slow) as pool:
        for _ in range(slow):
            pool.submit(upload_slowly)
        for _ in range(slow):  # every slow upload under way
            assert opened.acquire(timeout=30), "a slow upload did not start"
        while time.monotonic() < stop_at - 4:
            started = time.monotonic()
            try:
                healthy = ready.get("/healthz", timeout=10).status_code == 200
            except httpx.TimeoutException:
                healthy = False
            health_s.append(time.monotonic() - started if healthy else float("inf"))
            time.sleep(0.5)
        started = time.monotonic()
        captioned = ready.post("/v1/captions", content=coffee, timeout=10)
        caption_s = time.monotonic() - started
    assert captioned.status_code == 200 and caption_s < 5, (captioned.status_code, caption_s)
    assert max(health_s) < 1, f"/healthz took up to {max(health_s):.2f} s"
    cut = [answer for answer in answers if answer is not None]
    assert cut and {(status, body["error"]["code"]) for status, body in cut} == {
        (408, "body_timeout")
    }


def huge_png(side: int = math.isqrt(max_decoded_pixels(LEGACY_FEATURES.image_size))) -> bytes:
    """A flat side x side PNG, by default the largest a served image decodes to (JPEGs decode
    scaled down, so a PNG is the costly case): a small file of side**2 pixels."""
    buffer = io.BytesIO()
    Image.new("RGB", (side, side), (120, 80, 40)).save(buffer, "PNG")
    return buffer.getvalue()


def captioner_pids() -> list[int]:
    """The process ids of the Captioner replicas (named actors in Serve's namespace)."""
    names = [
        actor["name"]
        for actor in ray.util.list_named_actors(all_namespaces=True)
        if f"{APP_NAME}#{CaptionerDeployment.name}#" in actor["name"]
    ]
    replicas = [ray.get_actor(name, namespace="serve") for name in names]
    return ray.get([replica.__ray_call__.remote(lambda _: os.getpid()) for replica in replicas])


def resident_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        [kib] = [line.split()[1] for line in status if line.startswith("VmRSS:")]
    return int(kib) * 1024


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads Linux's /proc")
def test_concurrent_huge_images_stay_within_a_replicas_memory_bound(ready):
    """8 concurrent images of the largest size a replica decodes (4096x4096 PNGs): decoded
    one at a time and held within the replica's pixel budget, they add ~0.2 GB to it (8
    decodes at once would take ~0.8 GB; 7000x7000 ones, before the decoder's cap, 1.8 GB)."""
    image = huge_png()
    assert ready.post("/v1/captions", content=image).status_code == 200  # malloc's first growth
    pids = captioner_pids()
    baseline = {pid: resident_bytes(pid) for pid in pids}
    peak = dict(baseline)
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            for pid in pids:
                peak[pid] = max(peak[pid], resident_bytes(pid))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        with ThreadPoolExecutor(8) as pool:
            responses = list(
                pool.map(lambda _: ready.post("/v1/captions", content=image), range(8))
            )
    finally:
        done.set()
        sampler.join()
    assert [response.status_code for response in responses] == [200] * 8
    growth = max(peak[pid] - baseline[pid] for pid in pids)
    assert growth < 0.5e9, f"a replica grew by {growth / 1e9:.2f} GB"


def captioner_replicas() -> dict[str, int]:
    """The Captioner replicas that are up: their Serve names and process ids."""
    names = [
        actor["name"]
        for actor in ray.util.list_named_actors(all_namespaces=True)
        if f"{APP_NAME}#{CaptionerDeployment.name}#" in actor["name"]
    ]
    replicas = {}
    for replica_name in names:
        with contextlib.suppress(ValueError, ray.exceptions.RayActorError):
            replica = ray.get_actor(replica_name, namespace="serve")
            replicas[replica_name] = ray.get(
                replica.__ray_call__.remote(lambda _: os.getpid()), timeout=10
            )
    return replicas


@pytest.mark.slow
@pytest.mark.faults
def test_a_replica_killed_under_load_costs_503s_with_retry_after_never_a_drop(ready, coffee):
    """Three clients ask without pause; a Captioner replica's process is killed (SIGKILL, as
    a crash). Every answer is a 200 or a 503 with Retry-After (no 500, no dropped
    connection), and the replacement Serve starts serves within WAIT_S."""
    answers: list[tuple[float, int | str, str | None]] = []  # time, status or error, Retry-After
    stop = threading.Event()

    def keep_asking() -> None:
        with httpx.Client(base_url=str(ready.base_url), timeout=60) as http:
            while not stop.is_set():
                try:
                    response = http.post("/v1/captions", content=coffee)
                    answer = (response.status_code, response.headers.get("retry-after"))
                except httpx.HTTPError as error:  # a dropped connection
                    answer = (type(error).__name__, None)
                answers.append((time.monotonic(), *answer))

    clients = [threading.Thread(target=keep_asking) for _ in range(3)]
    for thread in clients:
        thread.start()
    try:
        wait_until(lambda: len(answers) >= 6, "answers before the crash")
        before = captioner_replicas()
        victim, pid = sorted(before.items())[0]
        os.kill(pid, signal.SIGKILL)
        killed_at = time.monotonic()
        wait_until(lambda: set(captioner_replicas()) - set(before), "a replacement replica")
        replaced_at = time.monotonic()
        wait_until(lambda: answers[-1][0] > replaced_at and answers[-1][1] == 200, "a 200 after")
    finally:
        stop.set()
        for thread in clients:
            thread.join()
    after = [a for a in answers if a[0] >= killed_at]
    failed = [a for a in after if a[1] != 200]
    served_again = min(t for t, status, _ in answers if t > replaced_at and status == 200)
    print(
        f"\n{len(before)} replica(s), {victim} killed: {len(failed)} of {len(after)} requests "
        f"after the crash failed ({sorted({str(a[1]) for a in failed})}); replacement up "
        f"{replaced_at - killed_at:.1f} s and serving {served_again - killed_at:.1f} s after it"
    )
    assert all(status == 200 or (status == 503 and retry) for _, status, retry in answers), {
        (status, retry) for _, status, retry in answers
    }
