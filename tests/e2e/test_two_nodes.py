"""A real two-node Ray cluster on this machine, set up as infra/ documents one: a head and a
second node (`ray start --address=...`, with a custom resource `node2`), data and
checkpoints on the S3 endpoint, MLflow as a tracking server (SQLite runs, artifacts on S3).
The stages run through `ray job submit`. `make test-cluster` runs these; the fault tests
among them (`faults`: an NLP actor killed, object storage stopped mid-write, the second
node's raylet killed) also run with `make test-faults`."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from mlflow_server import MlflowServer  # tests/mlflow_server.py
from ray_cli import Node, agent_ports, free_port, output_of, ray_env, start_head, submit
from waiting import wait_until  # tests/waiting.py

pytestmark = [pytest.mark.e2e, pytest.mark.cluster, pytest.mark.slow]

BUCKET = "s3://conceptual"


@pytest.fixture(scope="module")
def tracking_server(tmp_path_factory, s3_endpoint):
    """`mlflow server`: runs in SQLite, artifacts proxied to the S3 endpoint."""
    folder = tmp_path_factory.mktemp("mlflow")
    env = {"MLFLOW_S3_ENDPOINT_URL": s3_endpoint}
    server = MlflowServer(folder, free_port(), f"{BUCKET}/mlartifacts", env).start()
    yield server.url
    server.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, platform_home, s3_endpoint, tracking_server):
    """The head and `node2`, 2 CPUs each. Every Ray process sees the S3 endpoint and the
    tracking server through its environment, as the pods of infra/kuberay do."""
    from ray.util.state import list_nodes

    folder = tmp_path_factory.mktemp("ray")
    env = ray_env(MLFLOW_TRACKING_URI=tracking_server)
    small = ["--num-cpus=2", f"--object-store-memory={400 << 20}"]
    head, address, gcs = start_head(folder, env, *small, '--resources={"head": 1}')
    # A second raylet on one machine needs ports of its own for what the head took.
    node2_port = free_port()
    node2 = Node(
        [
            f"--address=127.0.0.1:{gcs}",
            *small,
            '--resources={"node2": 1}',
            f"--node-manager-port={node2_port}",
            *agent_ports(),
        ],
        env,
        folder / "node2.log",
    )

    def both_up() -> bool:
        assert node2.alive(), f"node2 exited; see {node2.log}"
        return len(list_nodes(address=address, filters=[("state", "=", "ALIVE")])) == 2

    wait_until(both_up, "two nodes", 120, step_s=2)
    nodes = {
        "node2" if n.resources_total.get("node2") else "head": n.node_id
        for n in list_nodes(address=address)
    }
    yield {"address": address, "env": env, "nodes": nodes, "node2_port": node2_port}
    node2.stop()
    head.stop()


def run(cluster, *args: str, **options) -> subprocess.CompletedProcess:
    return submit(cluster["address"], cluster["env"], *args, **options)


def job_nodes(cluster, submission_id: str) -> dict[str, set[str]]:
    """The nodes where each of a job's actor classes was placed and each of its task names
    (an actor's method calls among them) finished, as the state API reports them."""
    from ray.job_submission import JobSubmissionClient
    from ray.util.state import list_actors, list_tasks

    job_id = JobSubmissionClient(cluster["address"]).get_job_info(submission_id).job_id
    of_job = {"address": cluster["address"], "filters": [("job_id", "=", job_id)]}
    names = {v: k for k, v in cluster["nodes"].items()}
    placed: dict[str, set[str]] = {}
    for actor in list_actors(**of_job, detail=True, limit=10_000):
        if actor.node_id:
            placed.setdefault(actor.class_name, set()).add(names[actor.node_id])
    for task in list_tasks(**of_job, detail=True, limit=10_000):
        if task.state == "FINISHED" and task.node_id:
            placed.setdefault(task.name, set()).add(names[task.node_id])
    return placed


def candidate_ids(output: str) -> dict[str, list[str]]:
    from conceptual import storage

    ids = {}
    for part in ("curated", "rejected"):
        fs, _ = storage.resolve(output)
        ids[part] = [
            i
            for path in storage.list_files(storage.join(output, part))
            if path.endswith(".parquet")
            for i in pq.read_table(path, filesystem=fs, columns=["id"]).column("id").to_pylist()
        ]
    return ids


@pytest.fixture(scope="module")
def demo_images(tmp_path_factory):
    from conceptual_demo.images import build_images
    from conceptual_demo.server import serve_directory

    catalogue = build_images(tmp_path_factory.mktemp("images"))
    with serve_directory(catalogue.directory) as server:
        yield catalogue, server.url


def upload_candidates(rows: list, tmp_path: Path, name: str) -> tuple[str, list[str]]:
    """The rows as a Conceptual Captions TSV on S3, and the candidate ids of its lines."""
    from conceptual import storage
    from conceptual.records import candidate_id
    from conceptual_demo.corpus import write_candidates

    local, uri = tmp_path / f"{name}.tsv", f"{BUCKET}/{name}/in.tsv"
    write_candidates(rows, str(local), fmt="cc_tsv")
    storage.write_bytes(uri, local.read_bytes())
    lines = local.read_text().splitlines()
    return uri, [candidate_id(url, text) for text, url in (line.split("\t") for line in lines)]


def assert_each_candidate_once(output: str, expected: list[str]) -> None:
    """Every candidate id in curated or rejected exactly once: the id lists, not counts."""
    ids = candidate_ids(output)
    written = ids["curated"] + ids["rejected"]
    assert sorted(written) == sorted(expected), (
        f"missing {len(set(expected) - set(written))}, unexpected "
        f"{len(set(written) - set(expected))}, written twice {len(written) - len(set(written))}"
    )


def test_local_outputs_are_refused_on_two_nodes(cluster, tmp_path):
    (tmp_path / "in.tsv").write_text("A dog runs on the grass.\thttp://127.0.0.1:9/a.jpg\n")
    result = run(cluster, "conceptual.jobs.curate", "--input", str(tmp_path / "in.tsv"),
                 "--output", str(tmp_path / "out"), "with_images=false")  # fmt: skip
    assert result.returncode != 0, output_of(result)
    assert "this Ray cluster has 2 nodes" in result.stdout + result.stderr
    assert f"--output {tmp_path / 'out'}" in result.stdout + result.stderr
    assert not (tmp_path / "out").exists()


# The NLP stage runs inside the row guard (pipelines/dataflow/steps.py), whose class Ray names;
# in a text-only curation it is the only actor.
NLP_ACTOR = "MapWorker(MapBatches(GuardedActor))"
TRAIN_WORKER = "RayTrainWorker"


@pytest.fixture(scope="module")
def curated(cluster, demo_images, tmp_path_factory):
    """The demo's candidates with their photos, curated from S3 to S3 by the cluster: the
    output (which the training test reads), the candidate ids, the input and the settings
    that fetch from the demo's server."""
    from conceptual_demo.images import demo_candidates, fetch_overrides

    catalogue, url = demo_images
    rows = demo_candidates(catalogue, url, 300, seed=5)
    source, expected = upload_candidates(rows, tmp_path_factory.mktemp("photos"), "photos")
    output = f"{BUCKET}/photos/out"
    result = run(cluster, "conceptual.jobs.curate", "--input", source, "--output", output,
                 "entity_frequency.more_than=1", *fetch_overrides(catalogue),
                 "split.train=0.6", "split.val=0.2", "split.test=0.2")  # fmt: skip
    assert result.returncode == 0, output_of(result)
    return output, expected, source, fetch_overrides(catalogue)


def test_curation_with_photos_from_s3_to_s3_writes_each_candidate_once(curated):
    from conceptual import storage

    output, expected, _, _ = curated
    assert storage.read_json(f"{output}/_SUCCESS")["input"] == len(expected)
    assert_each_candidate_once(output, expected)


def test_curation_spreads_its_nlp_over_both_nodes(cluster, tmp_path):
    """Two NLP actors of 2 CPUs each cannot share a node; both parse batches."""
    submission, output, expected = text_job(
        cluster, tmp_path, "spread", 6000, options=("resources.cpus_per_actor=2",)
    )
    status, log = finished(cluster, submission)
    assert status == "SUCCEEDED", log[-4000:]
    placed = job_nodes(cluster, submission)
    assert placed.get(f"{NLP_ACTOR}.submit") == {"head", "node2"}, sorted(placed)
    assert_each_candidate_once(output, expected)


TINY_MODEL = [
    "model.d_model=32", "model.layers=1", "model.heads=2", "model.ffn=64", "min_count=1",
    "optimizer=adamw", "batch_size=4", "eval_metrics=[CIDEr]", "beam=2",
    "cpus_per_worker=0.5",
]  # fmt: skip


@pytest.mark.faults
def test_training_puts_a_worker_on_each_node_and_resumes_from_s3_when_one_dies(
    cluster, curated, tracking_server, tmp_path
):
    """Two workers, STRICT_SPREAD over the two nodes; checkpoints on S3; a worker exits in
    epoch 3 (the training core's fault hook) and the group resumes from the checkpoint of
    epoch 2; runs and the registered model on the tracking server, artifacts on S3."""
    import mlflow

    from conceptual import storage
    from conceptual.pipelines.training.training import FAIL_AT_EPOCH_ENV, FAIL_MARKER_ENV

    features = f"{BUCKET}/photos/features"
    result = run(cluster, "conceptual.jobs.features", "--data", curated[0], "--output", features)
    assert result.returncode == 0, output_of(result)

    marker, submission = tmp_path / "worker-died", f"train-{uuid.uuid4().hex[:8]}"
    result = run(cluster, "conceptual.jobs.train_captioner", "--features", features,
                 "--model-name", "captioner-cluster", *TINY_MODEL, "epochs=3", "workers=2",
                 "placement_strategy=STRICT_SPREAD", f"storage={BUCKET}/train", "keep_checkpoints=true",
                 "experiment=cluster-train", submission_id=submission,
                 runtime_env={"env_vars": {FAIL_AT_EPOCH_ENV: "3",
                                           FAIL_MARKER_ENV: str(marker)}})  # fmt: skip
    assert result.returncode == 0, output_of(result)
    assert marker.exists()  # a worker did die in epoch 3
    assert job_nodes(cluster, submission)[TRAIN_WORKER] == {"head", "node2"}
    checkpoints = [f for f in storage.list_files(f"{BUCKET}/train") if "/checkpoint_" in f]
    assert any(f.endswith("progress.json") for f in checkpoints)

    client = mlflow.MlflowClient(tracking_server)
    version = client.get_model_version_by_alias("captioner-cluster", "champion")
    run_info = client.get_run(version.run_id)
    assert run_info.info.artifact_uri.startswith("mlflow-artifacts:")
    # Resumed, not restarted: epoch 1 was evaluated once, and every epoch was.
    epochs = [m.step for m in client.get_metric_history(version.run_id, "CIDEr")]
    assert epochs.count(1) == 1 and sorted(set(epochs)) == [1, 2, 3]
    stored = storage.list_files(f"{BUCKET}/mlartifacts")
    assert any(f.endswith("model/model.safetensors") for f in stored)


def test_the_pipeline_job_runs_on_the_cluster_and_a_resubmission_skips_every_step(
    cluster, curated, tracking_server
):
    """The captioner's steps as one submitted job, from S3 to S3, training on both nodes;
    submitted again, every step's manifest matches and nothing runs."""
    import mlflow

    _, _, source, fetching = curated
    settings = [
        "--config", "configs/pipeline.yaml", f"input={source}", f"output={BUCKET}/pipeline",
        "model_name=captioner-cluster-pipeline", "experiment=cluster-pipeline",
        "curate.entity_frequency.more_than=1", *(f"curate.{key}" for key in fetching),
        "curate.split.train=0.6", "curate.split.val=0.2", "curate.split.test=0.2",
        *(f"train.{key}" for key in TINY_MODEL), "train.epochs=1", "train.workers=2",
        "train.placement_strategy=STRICT_SPREAD", f"train.storage={BUCKET}/train-pipeline",
        "evaluate.metrics=[CIDEr]", "evaluate.beam=2",
    ]  # fmt: skip

    def steps() -> dict:
        result = run(cluster, "conceptual.jobs.pipeline", *settings)
        assert result.returncode == 0, output_of(result)
        out = result.stdout
        return json.loads(out[out.rindex("\n{\n") + 1 : out.rindex("}") + 1])

    first = steps()
    assert [step for step, r in first.items() if r["skipped"]] == []
    assert str(first["register"]["result"]["version"]) == "1"
    again = steps()
    assert all(r["skipped"] for r in again.values()), again
    client = mlflow.MlflowClient(tracking_server)
    experiment = client.get_experiment_by_name("cluster-pipeline")
    parents = client.search_runs([experiment.experiment_id], "tags.job = 'pipeline'")
    children = client.search_runs(
        [experiment.experiment_id], f"tags.`mlflow.parentRunId` = '{parents[-1].info.run_id}'"
    )
    assert {r.data.tags["job"] for r in children} >= {"curate", "train_captioner"}


# ---------------------------------------------------------------- faults


def status_of(cluster, submission_id: str) -> str:
    from ray.job_submission import JobSubmissionClient

    return str(JobSubmissionClient(cluster["address"]).get_job_status(submission_id))


def finished(
    cluster, submission_id: str, fault: str | None = None, timeout: float = 600
) -> tuple[str, str]:
    """Wait for a submitted job to end (after `fault`: it must have been running then); its
    final status and its log."""
    from ray.job_submission import JobSubmissionClient

    if fault:
        assert status_of(cluster, submission_id) == "RUNNING", f"{fault} after the job ended"
    seconds = wait_until(
        lambda: status_of(cluster, submission_id) in {"SUCCEEDED", "FAILED", "STOPPED"},
        submission_id,
        timeout,
    )
    status = status_of(cluster, submission_id)
    print(f"\n{fault or submission_id}: the job ended {status} {seconds:.0f} s later")
    return status, JobSubmissionClient(cluster["address"]).get_job_logs(submission_id)


def alive_actor(cluster, submission_id: str, class_name: str, node: str | None = None):
    """An actor of the job's class that is up (on `node` when given), or None."""
    from ray.job_submission import JobSubmissionClient
    from ray.util.state import list_actors

    job_id = JobSubmissionClient(cluster["address"]).get_job_info(submission_id).job_id
    if job_id is None:
        return None
    filters = [("job_id", "=", job_id), ("state", "=", "ALIVE")]
    for actor in list_actors(address=cluster["address"], filters=filters, detail=True):
        if (
            actor.class_name == class_name
            and actor.pid
            and (node is None or actor.node_id == cluster["nodes"][node])
        ):
            return actor
    return None


def text_job(
    cluster, tmp_path, name: str, rows: int, env: dict | None = None, options: tuple = ()
) -> tuple:
    """A text-only curation of `rows` generated candidates by two NLP actors, in input
    ranges of 64 KiB (about 600 candidates), submitted without waiting: (submission id,
    output URI, the candidate ids)."""
    from conceptual_demo.corpus import generate_candidates

    source, expected = upload_candidates(generate_candidates(rows, seed=rows), tmp_path, name)
    output, submission = f"{BUCKET}/{name}/out", f"{name}-{uuid.uuid4().hex[:8]}"
    result = run(cluster, "conceptual.jobs.curate", "--input", source, "--output", output,
                 "with_images=false", "resources.nlp_actors=2", "resources.batch_size=128",
                 f"resources.range_bytes={64 << 10}", *options, submission_id=submission,
                 wait=False, runtime_env={"env_vars": env} if env else None)  # fmt: skip
    assert result.returncode == 0, output_of(result)
    return submission, output, expected


@pytest.mark.faults
def test_a_killed_nlp_actor_loses_and_repeats_no_candidate(cluster, tmp_path):
    submission, output, expected = text_job(cluster, tmp_path, "nlp-kill", 6000)
    actor = None

    def nlp_running() -> bool:
        nonlocal actor
        actor = alive_actor(cluster, submission, NLP_ACTOR)
        return actor is not None

    wait_until(nlp_running, "an NLP actor", 300, step_s=0.5)
    time.sleep(2)  # parsing its first batches
    os.kill(actor.pid, signal.SIGKILL)
    status, log = finished(cluster, submission, f"NLP actor (pid {actor.pid}) killed")
    assert status == "SUCCEEDED", log[-4000:]
    assert_each_candidate_once(output, expected)


class Endpoint:
    """A TCP proxy in front of the S3 endpoint that can go down as a restarting store does:
    `stop()` closes its port and cuts every open connection, `start()` opens the same port
    again. The objects stay (the store behind it keeps them)."""

    def __init__(self, target: str):
        self.target = ("127.0.0.1", int(target.rsplit(":", 1)[1]))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.accepted = 0
        self._open: set[socket.socket] = set()
        self._server: socket.socket | None = None
        self.start()

    def start(self) -> None:
        self._server = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, args=(self._server,), daemon=True).start()

    def stop(self) -> None:
        self._server.close()
        for conn in list(self._open):
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()

    def _accept(self, server: socket.socket) -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return  # stopped
            self.accepted += 1
            upstream = socket.create_connection(self.target)
            for a, b in ((client, upstream), (upstream, client)):
                self._open.add(a)
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(1 << 16):
                sink.sendall(data)
        self._open.discard(source)
        for conn in (source, sink):
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)


def first_output_file(output: str) -> Callable[[], bool]:
    from conceptual import storage

    return lambda: (
        storage.exists(f"{output}/curated") and bool(storage.list_files(f"{output}/curated"))
    )


@pytest.mark.faults
def test_object_storage_stopped_mid_write_is_retried_to_a_complete_output(
    cluster, s3_endpoint, tmp_path
):
    from conceptual import storage

    endpoint = Endpoint(s3_endpoint)
    submission, output, expected = text_job(
        cluster, tmp_path, "s3-restart", 3000, {"AWS_ENDPOINT_URL": endpoint.url}
    )
    wait_until(first_output_file(output), "the first output file", 300, step_s=0.1)
    endpoint.stop()
    time.sleep(8)  # a store restarting
    before = endpoint.accepted
    endpoint.start()
    status, log = finished(cluster, submission, "S3 endpoint down for 8 s")
    print(f"connections after the restart: {endpoint.accepted - before}")
    assert status == "SUCCEEDED", log[-4000:]
    assert endpoint.accepted > before  # the job did go on through the restarted endpoint
    assert storage.exists(f"{output}/_SUCCESS")
    assert_each_candidate_once(output, expected)
    endpoint.stop()


@pytest.mark.faults
def test_object_storage_that_stays_down_fails_the_job_and_marks_nothing_complete(
    cluster, s3_endpoint, tmp_path
):
    from conceptual import storage

    endpoint = Endpoint(s3_endpoint)
    env = {"AWS_ENDPOINT_URL": endpoint.url, "CONCEPTUAL_S3_ATTEMPTS": "2"}
    submission, output, _ = text_job(cluster, tmp_path, "s3-down", 3000, env)
    wait_until(first_output_file(output), "the first output file", 300, step_s=0.1)
    endpoint.stop()
    status, log = finished(cluster, submission, "S3 endpoint down for good")
    print(next(line for line in log.splitlines() if line.startswith("error:")))
    assert status == "FAILED"
    assert "error: object storage" in log, log[-4000:]
    assert not storage.exists(f"{output}/_SUCCESS")


@pytest.mark.faults
def test_the_second_node_dying_mid_run_loses_and_repeats_no_candidate(cluster, tmp_path):
    """Last in this module: node2 stays down."""
    submission, output, expected = text_job(cluster, tmp_path, "node-kill", 6000)
    wait_until(
        lambda: alive_actor(cluster, submission, NLP_ACTOR, "node2") is not None,
        "an NLP actor on node2",
        300,
        step_s=0.5,
    )
    time.sleep(2)
    os.kill(raylet_pid(cluster["node2_port"]), signal.SIGKILL)
    status, log = finished(cluster, submission, "node2's raylet killed")
    if status != "SUCCEEDED":  # the bar: the job completes, or a rerun does
        print(f"the job ended {status}; rerunning it on the head alone")
        rerun = text_job(cluster, tmp_path, "node-kill", 6000)
        status, log = finished(cluster, rerun[0])
    assert status == "SUCCEEDED", log[-4000:]
    assert_each_candidate_once(output, expected)


def raylet_pid(node_manager_port: int) -> int:
    """The raylet serving that port, found in /proc (this machine's processes)."""
    flag = f"--node_manager_port={node_manager_port}".encode()
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            args = cmdline.read_bytes().split(b"\0")
            if args[0].endswith(b"raylet") and flag in args:
                return int(cmdline.parent.name)
    raise AssertionError(f"no raylet with {flag.decode()}")
