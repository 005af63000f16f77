"""MLflow helpers: where runs go, and the few calls every job makes.

Default (the embedded platform): a SQLite database and an artifact folder in the state
directory (conceptual.paths). Point MLFLOW_TRACKING_URI at a tracking server to share runs.
Every experiment the platform creates against a local database keeps its artifacts in that
folder, never in `<cwd>/mlruns` (MLflow's fallback): under `ray job submit --working-dir`
the working directory is Ray's temporary copy, deleted with the session.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import re
import time
from collections.abc import Iterator, Mapping
from typing import Any

import mlflow
from mlflow.tracking import MlflowClient

from conceptual import services
from conceptual.config import Config, flatten, to_yaml
from conceptual.paths import state_dir
from conceptual.storage import TrackingUnreachable
from conceptual.uris import redact, redact_text

MAX_PARAM_CHARS = 6000  # MLflow's limit on a param value
PARENT_TAG = "mlflow.parentRunId"  # how MLflow nests runs
# The tag naming the job that logged a run (`curate`, `train_captioner`: search
# `tags.job = 'curate'`); runs logged before this release carry it as OLD_JOB_TAG.
JOB_TAG, OLD_JOB_TAG = "job", "stage"


def tracking_uri() -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{state_dir() / 'mlflow.db'}"


def local_artifact_root(uri: str | None = None) -> str | None:
    """Where the platform's experiments keep their artifacts when tracking is a local database
    (`sqlite:`, the embedded default or a user's own); None for a tracking server, which
    decides where its artifacts go. Decided by the URI, not by whether MLFLOW_TRACKING_URI
    is set: MLflow's set_tracking_uri() sets that variable itself."""
    if not (uri or tracking_uri()).startswith("sqlite:"):
        return None
    return (state_dir() / "mlartifacts").as_uri()


def printable_tracking_uri() -> str:
    """The tracking URI as jobs print it: without any credentials it carries."""
    return redact(tracking_uri())


def configure() -> str:
    """Point MLflow at the platform's tracking store (a local database is created on first
    use; a tracking server must answer first: check_reachable), its client's retries and
    timeouts set for the job (MLFLOW_CLIENT)."""
    uri = tracking_uri()
    for key, value in MLFLOW_CLIENT.items():
        os.environ.setdefault(key, value)
    if (root := local_artifact_root(uri)) and uri not in _created_stores:
        create_local_store(uri, root)
    elif uri.startswith(("http://", "https://")) and uri not in _answered:
        check_reachable(uri)
        _answered.add(uri)
    mlflow.set_tracking_uri(uri)
    return uri


_created_stores: set[str] = set()
_answered: set[str] = set()
# A tracking server gets this long to answer an experiment lookup, twice, before a job says
# it cannot be reached: MLflow's own client retries for over four minutes before it says so.
REACH_TIMEOUT_S, REACH_ATTEMPTS = 5.0, 2
# One call of MLflow's REST API, its answer small: a server whose /health answers may still
# hang on its API, or trickle the answer (MLflow's client then waited 120 s a request).
PROBE = "/api/2.0/mlflow/experiments/get-by-name?experiment_name=Default"
PROBE_BYTES = 1 << 20


def check_reachable(uri: str) -> None:
    """TrackingUnreachable unless the tracking server at `uri` answers an experiment lookup
    (any answer below 500, a 404 or 401 too, shows the server and its API are there), all
    of it read within REACH_TIMEOUT_S, in REACH_ATTEMPTS tries: about 10 s at the most."""
    for _ in range(REACH_ATTEMPTS):
        if (problem := _answer_problem(uri)) is None:
            return
    raise TrackingUnreachable(
        f"the tracking server {redact(uri)} cannot be reached ({redact(problem)}): start it, "
        "or point MLFLOW_TRACKING_URI at one that answers (unset, runs go to the local database)"
    )


def _answer_problem(uri: str) -> str | None:
    """What is wrong with the tracking server at `uri` (an http(s) URI), or None when it
    answers PROBE below 500 in time."""
    try:
        status, _ = services.request(uri.rstrip("/") + PROBE, REACH_TIMEOUT_S, PROBE_BYTES)
    except services.ServiceDown as exc:  # refused, timed out, unknown host, bad URL
        return str(exc)
    return None if status < 500 else f"it answers {status}"


# MLflow's client, for the whole job (a user's own settings win): a few tries of a bounded
# wait each, about a minute in all for a server that stops answering midway, where its
# defaults (7 retries, backoff factor 2, 120 s a request) gave 16 minutes.
MLFLOW_CLIENT = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "15",
}


# A tracking server that goes down while a model trains costs the run nothing: meanwhile
# each call tries once, briefly (MLflow's client retries 7 times with backoff, minutes),
# metrics it did not take are sent again later (send_metrics), and once trained the run
# waits up to CONCEPTUAL_TRACKING_WAIT_S seconds (default 600) for the server to come back
# (wait_for_store) before it fails, its model saved locally by then.
IMPATIENT = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "5"}
WAIT_ENV = "CONCEPTUAL_TRACKING_WAIT_S"


@contextlib.contextmanager
def impatient() -> Iterator[None]:
    """MLflow's calls in this block give up after one short try (this process's setting)."""
    saved = {k: os.environ.get(k) for k in IMPATIENT}
    os.environ.update(IMPATIENT)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def send_metrics(run_id: str, metrics: list[list[Any]]) -> list[list[Any]]:
    """Log `metrics` ([key, value, timestamp ms, step] each) to the run; returns those a
    tracking store that is down did not take (all or none), for the next call to send."""
    from mlflow.entities import Metric
    from mlflow.exceptions import MlflowException

    if not metrics:
        return []
    try:
        MlflowClient().log_batch(run_id, metrics=[Metric(*m) for m in metrics])
    except (MlflowException, OSError):
        return metrics
    return []


def wait_for_store(saved_at: str) -> None:
    """Return once the tracking server answers again (at once for a local database);
    TrackingUnreachable after CONCEPTUAL_TRACKING_WAIT_S seconds, naming where the model
    that could not be logged is saved."""
    uri = tracking_uri()
    if not uri.startswith(("http://", "https://")):
        return
    wait_s = float(os.environ.get(WAIT_ENV, 600))
    deadline = time.monotonic() + wait_s
    problem = _answer_problem(uri)
    if problem is not None:
        print(f"the tracking server {redact(uri)} is down ({redact(problem)}); waiting", flush=True)
    while problem is not None:
        if time.monotonic() > deadline:
            raise TrackingUnreachable(
                f"the tracking server {redact(uri)} has not answered for {wait_s:.0f} s "
                f"({redact(problem)}), so the run could not be logged; the trained model is "
                f"saved at {saved_at} ({WAIT_ENV} sets how long to wait)"
            )
        time.sleep(1.0)
        problem = _answer_problem(uri)


def create_local_store(uri: str, artifact_root: str) -> None:
    """Open (creating on first use) a local database with its default artifact root set, so
    that even MLflow's own `Default` experiment, made with the tables, keeps its artifacts
    under `artifact_root` and not under whatever the working directory is then. One process
    at a time, under a lock file beside the database: jobs submitted side by side to a fresh
    home would each create the tables, and all but one fail on a table another just made."""
    import fcntl

    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
    from sqlalchemy.engine import make_url

    database = make_url(uri).database
    with contextlib.ExitStack() as held:
        if database and database != ":memory:":
            lock = held.enter_context(open(f"{os.path.abspath(database)}.lock", "a"))
            fcntl.flock(lock, fcntl.LOCK_EX)  # released as the file closes
        SqlAlchemyStore(uri, artifact_root)
    _created_stores.add(uri)


# MLflow 3 sorts experiments into kinds by this tag: the platform's are model development
# (runs, metrics, models), not GenAI (traces), which is what MLflow assumes of an untagged one.
KIND_TAG, KIND = "mlflow.experimentKind", "custom_model_development"


def ensure_experiment(name: str) -> str:
    """The id of experiment `name`, created as a model-development one (KIND_TAG) on first
    use; one made before the tag existed gets it, one whose kind a user chose keeps it."""
    configure()
    client = MlflowClient()
    experiment = client.get_experiment_by_name(name)
    if experiment is None:
        root = local_artifact_root(client.tracking_uri)
        location = f"{root}/{name}" if root else None
        return client.create_experiment(name, artifact_location=location, tags={KIND_TAG: KIND})
    if KIND_TAG not in experiment.tags:
        client.set_experiment_tag(experiment.experiment_id, KIND_TAG, KIND)
    return experiment.experiment_id


# The run that runs started meanwhile belong to (the pipeline job's), as MLflow's parent tag.
_parent_run: contextvars.ContextVar[str | None] = contextvars.ContextVar("parent", default=None)


@contextlib.contextmanager
def children_of(run_id: str) -> Iterator[None]:
    """Every run that start_run() opens in this block is a child of `run_id`."""
    token = _parent_run.set(run_id)
    try:
        yield
    finally:
        _parent_run.reset(token)


@contextlib.contextmanager
def start_run(
    experiment: str,
    run_name: str | None = None,
    tags: Mapping[str, str] | None = None,
    job: str | None = None,
) -> Iterator[mlflow.ActiveRun]:
    """A run in `experiment` (a child of the pipeline's run inside children_of) of `job`
    (JOB_TAG), named `run_name`, by default after its job and the time ("train_captioner
    2026-11-25 17:02:11"), not MLflow's random "sassy-mule-971": runs are told apart in the UI."""
    experiment_id = ensure_experiment(experiment)
    parent = _parent_run.get()
    tags = {
        **({PARENT_TAG: parent} if parent else {}),
        **({JOB_TAG: job} if job else {}),
        **(tags or {}),
    }
    run_name = run_name or timed_name(tags.get(JOB_TAG, experiment))
    with mlflow.start_run(experiment_id=experiment_id, run_name=run_name, tags=tags) as run:
        try:
            yield run
        except TrackingUnreachable:
            # Ending the run would retry for minutes against the store that is down.
            with impatient(), contextlib.suppress(Exception):
                mlflow.end_run("FAILED")
            raise


def job_of(run: Any) -> str | None:
    """The job that logged `run` (an MLflow Run): its JOB_TAG, or the tag that runs logged
    before that name carry."""
    return run.data.tags.get(JOB_TAG) or run.data.tags.get(OLD_JOB_TAG)


def timed_name(what: str) -> str:
    """`what` and the local time to the second, as runs are named."""
    return f"{what} {time.strftime('%Y-%m-%d %H:%M:%S')}"


def log_config(cfg: Config, skip: tuple[str, ...] = ()) -> None:
    """The full resolved config: every leaf as a param (but the keys in `skip`, which do not
    apply to this run), and the YAML as an artifact, both without the credentials of any
    URL in them (`service.url=http://user:pass@host` is logged as `http://***@host`)."""
    log_params({k: v for k, v in flatten(cfg).items() if k not in skip})
    mlflow.log_text(redact_text(to_yaml(cfg)), "config.yaml")


def log_params(params: Mapping[str, Any]) -> None:
    """Params of the active run, each without the credentials of any URL in it (an input
    `s3://key:secret@bucket/...` as much as a config's): the one way jobs log params
    (tests/unit/house/test_architecture.py holds every other module to it)."""
    mlflow.log_params({k: _param_value(redact_text(str(v))) for k, v in params.items()})


def _param_value(value: Any) -> str:
    text = str(value)
    return text if len(text) <= MAX_PARAM_CHARS else text[: MAX_PARAM_CHARS - 3] + "..."


def metric_key(*parts: str) -> str:
    """MLflow names allow letters, digits, `_-./` and spaces; anything else becomes `_`
    (an evaluation set named by its URI, for one)."""
    return ".".join(re.sub(r"[^\w\-./ ]", "_", p) for p in parts)
