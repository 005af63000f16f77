"""Credentials in any URL of a config (`service.url=http://apiuser:SECRET@host`) reach no
param, no artifact and no line a job writes (issue 57): the run's params and config.yaml go
through the redaction the jobs' output does (conceptual.uris.redact_text)."""

from __future__ import annotations

import time
from pathlib import Path

import mlflow
import pytest
from mlflow.tracking import MlflowClient
from stand_in_services import StandIn, hang  # tests/stand_in_services.py

from conceptual import logs, tracking
from conceptual.fluency.translation import ServiceTranslator
from conceptual.pipelines.features.translate import ServiceConfig, TranslateConfig
from conceptual.uris import redact_text

SECRET = "SECRET-pw-57"


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A private state directory: MLflow's database and the jobs' logs in it."""
    monkeypatch.setenv("CONCEPTUAL_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    previous = mlflow.get_tracking_uri()
    yield tmp_path / "home"
    mlflow.set_tracking_uri(previous)


def test_a_config_s_url_credentials_reach_no_param_artifact_or_line(home, tmp_path, capsys):
    url = f"http://apiuser:{SECRET}@127.0.0.1:9/"
    config = TranslateConfig(translator="service", service=ServiceConfig(url=url))
    with logs.job_output("unit") as log, tracking.start_run("test-redaction") as run:
        tracking.log_config(config)
        print(f"translating with {config.service.url}")
    client = MlflowClient()
    params = client.get_run(run.info.run_id).data.params
    saved = client.download_artifacts(run.info.run_id, "config.yaml", str(tmp_path))
    artifact = Path(saved).read_text()
    captured = capsys.readouterr()
    assert params["service.url"] == "http://***@127.0.0.1:9/"
    assert "url: http://***@127.0.0.1:9/" in artifact
    assert "translating with http://***@127.0.0.1:9/" in captured.out
    for text in (*params.values(), artifact, captured.out, captured.err, log.read_text()):
        assert SECRET not in text


def test_a_translate_job_whose_service_does_not_answer_shows_no_password(
    home, tmp_path, monkeypatch, capsys
):
    from conceptual.jobs import translate

    monkeypatch.setattr(ServiceTranslator, "CHECK_S", 1.0)
    monkeypatch.setenv("CONCEPTUAL_TRANSLATE_KEY", "k-57")
    (tmp_path / "en" / "curated").mkdir(parents=True)
    with StandIn({"/translate": hang}) as server:
        url = server.url.replace("http://", f"http://apiuser:{SECRET}@")
        argv = ["--data", str(tmp_path / "en"), "--output", str(tmp_path / "zh"), "--to", "zh"]
        assert translate.main([*argv, "translator=service", f"service.url={url}"]) == 2
    err = capsys.readouterr().err
    logged = "".join(p.read_text() for p in (home / "logs").glob("translate-*.log"))
    assert "error: the translation service http://***@127.0.0.1:" in err
    assert SECRET not in err + logged


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("http://apiuser:pa@ss@host/x", "http://***@host/x"),  # an @ in the password
        ("[http://a:b@h1,https://c:d@h2]", "[http://***@h1,https://***@h2]"),
        ("http://host/path?to=x@y", "http://host/path?to=x@y"),  # no userinfo
    ],
)
def test_userinfo_is_hidden_wherever_a_url_is_in_a_text(text, shown):
    assert redact_text(text) == shown


def test_redacting_a_long_word_takes_no_time():
    """Tried at every letter, the pattern took time quadratic in a word's length: 1.7 s for
    20,000 letters, most of a minute for these."""
    started = time.monotonic()
    assert redact_text("a" * 100_000 + " http://u:p@h") == "a" * 100_000 + " http://***@h"
    assert time.monotonic() - started < 5


def test_a_jobs_own_params_hide_credentials_too(home):
    """An input URI is a job's param, not its config's: it goes through the same redaction
    (tracking.log_params, which every job uses; tests/unit/house/test_architecture.py)."""
    with tracking.start_run("test-redaction") as run:
        tracking.log_params({"data_uri": f"s3://AKIA:{SECRET}@bucket/cur", "rows": 3})
    params = MlflowClient().get_run(run.info.run_id).data.params
    assert params == {"data_uri": "s3://***@bucket/cur", "rows": "3"}
