"""A retriever served with another version's index is told the whole command that builds
its own, from the same features and clips, into a folder of its own."""

from __future__ import annotations

from mlflow.entities.model_registry import ModelVersion

from conceptual.serve.retriever_deployment import build_index_command


def test_the_hint_is_a_command_to_paste():
    version = ModelVersion("retriever-speech", "1", creation_timestamp=0)
    command = build_index_command(version, "/d/features", "/d/clips", "/d/index/retriever-speech")
    assert command == (
        "python -m conceptual.jobs.build_index --model models:/retriever-speech/1 "
        "--data /d/features --speech /d/clips --output /d/index/retriever-speech"
    )
    assert "--speech" not in build_index_command(version)
