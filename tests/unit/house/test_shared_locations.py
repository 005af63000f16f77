"""On a cluster of several nodes, a job refuses what only one node's disk holds."""

from __future__ import annotations

import pytest

from conceptual import runtime
from conceptual.storage import StorageError


@pytest.fixture
def nodes(monkeypatch):
    monkeypatch.delenv(runtime.SHARED_FILESYSTEM_ENV, raising=False)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000")

    def set_nodes(count: int) -> None:
        monkeypatch.setattr(runtime, "alive_nodes", lambda: count)

    return set_nodes


def test_one_node_takes_local_paths(nodes, monkeypatch):
    nodes(1)
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    runtime.require_shared({"--output": "/data/out", "storage": "/state/train"})


def test_several_nodes_refuse_a_local_output_and_name_it(nodes):
    nodes(2)
    with pytest.raises(StorageError) as refused:
        runtime.require_shared({"--input": "s3://conceptual/in.tsv", "--output": "/data/out"})
    message = str(refused.value)
    assert "2 nodes" in message and "--output /data/out is on one machine's disk" in message
    assert "--input" not in message  # what is on S3 is fine
    assert "s3://" in message and runtime.SHARED_FILESYSTEM_ENV in message


def test_several_nodes_refuse_a_local_mlflow_database(nodes, monkeypatch):
    nodes(3)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:////state/mlflow.db")
    with pytest.raises(StorageError, match="MLflow tracking sqlite:////state/mlflow.db"):
        runtime.require_shared({"storage": "s3://conceptual/train"})


def test_several_nodes_take_object_storage_and_a_tracking_server(nodes):
    nodes(2)
    runtime.require_shared({"--output": "s3://conceptual/out", "unset": None})


def test_a_shared_filesystem_is_declared(nodes, monkeypatch):
    nodes(2)
    monkeypatch.setenv(runtime.SHARED_FILESYSTEM_ENV, "1")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:////nfs/mlflow.db")
    runtime.require_shared({"--output": "/nfs/out"})
