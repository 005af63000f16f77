"""The seventh family end to end through the generic jobs, with no job file of its own:
`train --family attend` trains a Show, Attend and Tell captioner on features, registers it
as captioner-attend by the champion rule, `evaluate --family attend` scores it, and the
captioner that the serving deployment and the caption job run captions with it."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest
from test_train_captioner import job_overrides, write_features

MODEL = "test-attend"


@pytest.fixture(scope="module")
def trained(ray_local, platform_home, tmp_path_factory):
    from conceptual.jobs import family_verb

    features = write_features(tmp_path_factory.mktemp("attend-features"))
    overrides = job_overrides(model={"architecture": "rnn"}, epochs=3)
    overrides = [o for o in overrides if not o.startswith(("model.layers", "model.heads"))]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = family_verb("train")(
            ["--family", "attend", "--features", features, "--model-name", MODEL, *overrides]
        )
    return code, out.getvalue(), features


def test_train_registers_it_as_its_own_kind(trained):
    import mlflow

    from conceptual.pipelines.families import FAMILIES
    from conceptual.pipelines.families.attend.train_attend import AttendCore
    from conceptual.registry import resolve

    code, out, _ = trained
    assert code == 0, out
    assert "champion: first_champion" in out
    client = mlflow.MlflowClient()
    version = client.get_model_version_by_alias(MODEL, "champion")
    assert version.tags["variant"] == "attend-8x8"
    assert client.get_run(version.run_id).data.tags["job"] == "train_attend"
    directory = Path(resolve(f"models:/{MODEL}@champion"))
    assert json.loads((directory / "config.json").read_text())["kind"] == "attend-captioner"
    assert isinstance(FAMILIES["attend"].load(directory).model.core, AttendCore)
    local = Path(re.search(r"^model:\s+(\S+)", out, re.M).group(1))
    assert (local / "model.safetensors").is_file()


def test_evaluate_scores_it_as_a_captioner(trained, capsys):
    import mlflow

    from conceptual.jobs import family_verb

    _, _, features = trained
    argv = ["--family", "attend", "--model", f"models:/{MODEL}@champion", "--features", features]
    assert family_verb("evaluate")([*argv, "--split", "val", "metrics=[CIDEr]", "--json"]) == 0
    out = capsys.readouterr().out
    result = json.loads(out[: out.index("\n}") + 2])
    assert result["images"] == 8 and result["scores"]["CIDEr"] >= 0
    assert mlflow.MlflowClient().get_run(result["run_id"]).data.tags["job"] == "evaluate_attend"


def test_the_served_captioner_captions_with_it(trained):
    """What a CaptionerDeployment bound to the `attend` captioning key loads (serving's
    load_captioner with the family's saved form): captions from features."""
    import numpy as np
    from mlflow import MlflowClient

    from conceptual.pipelines.families import FAMILIES, captionings, family_of
    from conceptual.registry import resolve
    from conceptual.serve.captioner_deployment import load_captioner

    entry = captionings()["attend"]
    assert family_of(entry) is FAMILIES["attend"]
    version = MlflowClient().get_model_version_by_alias(MODEL, "champion")
    directory = Path(resolve(f"models:/{MODEL}@champion"))
    captioner = load_captioner(directory, version, "en", kind=family_of(entry).saved())
    grid = np.random.default_rng(0).normal(size=(64 * 16,)).astype(np.float32)
    (captions,) = captioner.captions_of([(grid.reshape(64, 16).mean(0), grid)])
    assert captions and isinstance(captions[0], str)
