"""External services fail in seconds when they stop answering (issue 57), against stand-ins
on 127.0.0.1 that hang or trickle: the tracking check is one experiment lookup read whole
within its deadline (a /health that answers proves nothing of the API), MLflow's own client
is bounded for the whole job, and the translation service is checked as the job starts and
given a total deadline per batch, a batch that timed out never tried again row by row (a
256-row batch took two hours that way)."""

from __future__ import annotations

import base64
import time

import mlflow
import pyarrow as pa
import pytest
from stand_in_services import StandIn, answer, hang, trickle  # tests/stand_in_services.py

from conceptual import tracking
from conceptual.fluency.translation import ServiceTranslator
from conceptual.pipelines.dataflow.set_aside import Guarded
from conceptual.pipelines.features.translate import (
    ServiceConfig,
    TranslateConfig,
    TranslateOperator,
    make_translator,
)
from conceptual.records import CURATED_LANGUAGE
from conceptual.services import ServiceDown
from conceptual.storage import TrackingUnreachable

SECRET = "SECRET-pw-57"
LOOKUP = "/api/2.0/mlflow/experiments/get-by-name"
STALLS = [hang, trickle()]
STALL_IDS = ["hangs", "trickles"]


def with_password(url: str) -> str:
    return url.replace("http://", f"http://admin:{SECRET}@")


@pytest.fixture
def quick(monkeypatch):
    """Deadlines of a second, so that a test waits out a few of them."""
    monkeypatch.setattr(tracking, "REACH_TIMEOUT_S", 1.0)
    monkeypatch.setattr(ServiceTranslator, "CHECK_S", 1.0)


# --- the tracking server ----------------------------------------------------------------


@pytest.mark.parametrize("api", STALLS, ids=STALL_IDS)
def test_a_tracking_server_whose_api_stalls_behind_its_health_check_is_refused_in_seconds(
    api, quick
):
    with StandIn({"/health": answer(200, b"OK"), LOOKUP: api}) as server:
        started = time.monotonic()
        with pytest.raises(TrackingUnreachable) as refused:
            tracking.check_reachable(with_password(server.url))
        took = time.monotonic() - started
    assert f"{server.url.replace('http://', 'http://***@')} cannot be reached (timed out)" in str(
        refused.value
    )
    assert SECRET not in str(refused.value)
    assert took < 20 and len(server.requests[LOOKUP]) == tracking.REACH_ATTEMPTS


def test_the_check_is_one_experiment_lookup_and_any_answer_below_500_passes(quick):
    missing = {"error_code": "RESOURCE_DOES_NOT_EXIST"}
    with StandIn({LOOKUP: [answer(404, missing), answer(503, b"")]}) as server:
        tracking.check_reachable(with_password(server.url))
        (lookup,) = server.requests[LOOKUP]
        with pytest.raises(TrackingUnreachable, match=r"\(it answers 503\)"):
            tracking.check_reachable(server.url)
    assert (lookup.method, lookup.path) == ("GET", tracking.PROBE)
    # The server's own credentials go with it, as MLflow's client sends them.
    assert (
        lookup.headers["Authorization"]
        == "Basic " + base64.b64encode(f"admin:{SECRET}".encode()).decode()
    )


def test_mlflow_s_client_is_bounded_for_the_whole_job_and_a_user_s_setting_wins(
    monkeypatch, tmp_path
):
    from mlflow.environment_variables import (
        MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR,
        MLFLOW_HTTP_REQUEST_MAX_RETRIES,
        MLFLOW_HTTP_REQUEST_TIMEOUT,
    )

    for key in tracking.MLFLOW_CLIENT:
        monkeypatch.setenv(key, "")  # restored after the test, whatever configure sets
        monkeypatch.delenv(key)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "7")
    monkeypatch.setenv("CONCEPTUAL_HOME", str(tmp_path))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    previous = mlflow.get_tracking_uri()
    try:
        tracking.configure()
    finally:
        mlflow.set_tracking_uri(previous)
    # MLflow's defaults: 7 retries, backoff factor 2, 120 s a request (16 minutes a call).
    assert MLFLOW_HTTP_REQUEST_MAX_RETRIES.get() == 2
    assert MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR.get() == 1
    assert MLFLOW_HTTP_REQUEST_TIMEOUT.get() == 7


# --- the translation service ------------------------------------------------------------


def translations(request) -> dict:
    import json

    return {"translatedText": [f"译文{n}" for n, _ in enumerate(json.loads(request.body)["q"])]}


def service(url: str, monkeypatch, timeout_s: float = 1.0) -> TranslateConfig:
    monkeypatch.setenv("CONCEPTUAL_TRANSLATE_KEY", "k-57")
    return TranslateConfig(
        translator="service", service=ServiceConfig(url=url, timeout_s=timeout_s)
    )


@pytest.mark.parametrize("stall", STALLS, ids=STALL_IDS)
def test_a_translation_service_that_stalls_is_refused_before_any_work(stall, quick, monkeypatch):
    with StandIn({"/translate": stall}) as server:
        config = service(with_password(server.url), monkeypatch, timeout_s=30)
        started = time.monotonic()
        with pytest.raises(ServiceDown) as refused:
            make_translator(config, None, "zh")
        took = time.monotonic() - started
    message = str(refused.value)
    assert "did not answer within 1 s (timed out)" in message and "http://***@127.0.0.1" in message
    assert SECRET not in message and took < 15


@pytest.mark.parametrize("stall", STALLS, ids=STALL_IDS)
def test_a_batch_the_service_does_not_answer_in_time_fails_the_job_not_row_by_row(
    stall, quick, monkeypatch, tmp_path
):
    """The translate job's actor as Ray Data runs it (set_aside.Guarded): the check passes,
    the batch stalls; one request for it, then ServiceDown, and no row set aside."""
    with StandIn({"/translate": [answer(200, translations), stall]}) as server:
        kwargs = {"config": service(server.url, monkeypatch), "cn_dir": None, "target": "zh"}
        rejected = tmp_path / "rejected"
        kwargs["rejected"] = str(rejected)
        actor = Guarded(TranslateOperator, kwargs, "translate", str(rejected), CURATED_LANGUAGE)
        batch = pa.table({"caption": ["a dog runs", "a cat sleeps", "two kids play"]})
        started = time.monotonic()
        with pytest.raises(ServiceDown, match="did not answer within 1 s"):
            actor(batch)
        took = time.monotonic() - started
    assert len(server.requests["/translate"]) == 2  # the check, and the batch once
    assert not rejected.exists() and took < 15
