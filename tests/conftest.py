"""Shared fixtures. Tiers: unit (default, no Ray), integration and e2e (marked), realdata
(reads ../shared/data, skipped when absent), benchmark (tests/benchmarks only)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("RAY_DATA_DISABLE_PROGRESS_BARS", "1")

REPO = Path(__file__).resolve().parents[1]
REAL_DATA_ABSENT = "real data not present"


def real_data_dir() -> Path | None:
    """../shared/data (or $CONCEPTUAL_REAL_DATA) when present; a user's clone has none."""
    path = Path(os.environ.get("CONCEPTUAL_REAL_DATA", REPO.parent / "shared" / "data"))
    return path if path.is_dir() else None


@pytest.fixture(scope="session")
def real_data() -> Path:
    path = real_data_dir()
    if path is None:
        pytest.skip(f"{REAL_DATA_ABSENT} (set CONCEPTUAL_REAL_DATA or check out ../shared)")
    return path


@pytest.hookimpl(hookwrapper=True, tryfirst=True)  # outermost: after pytest's own summary
def pytest_terminal_summary(terminalreporter):
    """One line at the end of a run that lacked ../shared/data, just above the counts: how
    many tests it skipped for that, and how to include them, so a partial run is never read
    as a full one."""
    yield
    absent = [
        report
        for report in terminalreporter.stats.get("skipped", [])
        if isinstance(report.longrepr, tuple) and REAL_DATA_ABSENT in report.longrepr[2]
    ]
    if absent:
        terminalreporter.write_line(
            f"{len(absent)} tests skipped because the real data is absent: check out "
            "../shared beside this clone, or set CONCEPTUAL_REAL_DATA=/path/to/shared/data, "
            "to include them",
            yellow=True,
            bold=True,
        )


@pytest.fixture(scope="session")
def nlp():
    from conceptual.assets import load_spacy

    return load_spacy()


@pytest.fixture(scope="session")
def tiny_captioner():
    """make(caption, seed) -> (Captioner, Vocabulary): an untrained, tiny 8x8 Transformer
    whose vocabulary is the caption's words. Seeded: an untrained model's beams depend on
    its weights, which would otherwise depend on whichever tests ran before."""
    import torch

    from conceptual.models.captioner import Captioner, CaptionerConfig
    from conceptual.models.vocab import Vocabulary

    def make(caption: str, seed: int = 0):
        torch.manual_seed(seed)
        vocab = Vocabulary.build([caption] * 4, min_count=1)
        config = CaptionerConfig(
            architecture="transformer",
            features="8x8",
            vocab_size=len(vocab),
            d_model=16,
            layers=1,
            heads=2,
            ffn=32,
        )
        return Captioner(config).eval(), vocab

    return make


@pytest.fixture(scope="session")
def log_captioner():
    """log(model, vocab, beam=4) -> "runs:/<id>/model": a captioner saved (evaluated at
    `beam`) as the active MLflow run's `model` artifacts, where a training run leaves its
    best model, ready to register."""
    import tempfile

    import mlflow

    from conceptual.models.saving import save_model

    def log(model, vocab, beam: int = 4) -> str:
        run = mlflow.active_run()
        assert run is not None, "log_captioner needs an active MLflow run"
        with tempfile.TemporaryDirectory() as directory:
            mlflow.log_artifacts(str(save_model(model, vocab, directory, beam=beam)), "model")
        return f"runs:/{run.info.run_id}/model"

    return log


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def captioned_folder():
    """A function writing the demo's good photos with fitting captions as an importable
    folder (captions.csv, images/); it returns the catalogue."""
    from conceptual_demo.images import write_captioned_folder

    return write_captioned_folder


@pytest.fixture(scope="session")
def free_port():
    """A function returning a free TCP port on 127.0.0.1."""
    return _free_port


@pytest.fixture(scope="session")
def repo() -> Path:
    """The repository root."""
    return REPO


@pytest.fixture(scope="session")
def platform_home(tmp_path_factory) -> Path:
    """A private state directory (MLflow SQLite, artifacts, NLP assets stay shared) for the
    whole test session, so tests never touch the developer's own runs."""
    home = tmp_path_factory.mktemp("conceptual-home")
    from conceptual.assets import nltk_data_dir

    shared_nltk = nltk_data_dir()  # resolved before CONCEPTUAL_HOME moves
    os.environ["CONCEPTUAL_HOME"] = str(home)
    os.environ["NLTK_DATA"] = str(shared_nltk)
    os.environ.pop("MLFLOW_TRACKING_URI", None)
    return home


@pytest.fixture(scope="session")
def s3_endpoint(platform_home):
    """An S3 API endpoint on 127.0.0.1 (moto's server), with a bucket named `conceptual`.
    The AWS_* variables are set before Ray starts, so Ray workers inherit them."""
    from moto.server import ThreadedMotoServer

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    os.environ.update(
        AWS_ENDPOINT_URL=endpoint,
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="us-east-1",
    )
    import boto3

    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="conceptual")
    yield endpoint
    server.stop()


@pytest.fixture(scope="session")
def ray_local(s3_endpoint):
    """One local Ray for the whole session (starting Ray costs seconds)."""
    import ray

    from conceptual.runtime import init_ray

    os.environ.pop("RAY_ADDRESS", None)
    init_ray(num_cpus=2)
    yield
    ray.shutdown()
