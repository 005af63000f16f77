"""`ray job submit` against `ray start --head`, exactly as a user runs the jobs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from ray_cli import REPO, output_of, ray_env, start_head
from ray_cli import submit as submit_to

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory, platform_home):
    """A one-node cluster, as `ray start --head` makes it."""
    env = ray_env()
    head, address, _ = start_head(tmp_path_factory.mktemp("ray"), env, "--num-cpus=2")
    yield {"address": address, "env": env}
    head.stop()


def submit(cluster, *args: str, **options) -> subprocess.CompletedProcess:
    return submit_to(cluster["address"], cluster["env"], *args, **options)


def test_curate_and_features_jobs_submitted_to_a_cluster(ray_cluster, tmp_path):
    """The whole funnel as a user runs it: images fetched by the cluster from an HTTP server
    on 127.0.0.1, then the features of what was kept."""
    from conceptual_demo.corpus import write_candidates
    from conceptual_demo.images import build_images, demo_candidates, fetch_overrides
    from conceptual_demo.server import serve_directory

    catalogue = build_images(tmp_path / "images")
    out = tmp_path / "out"
    with serve_directory(catalogue.directory) as server:
        rows = demo_candidates(catalogue, server.url, 300, seed=3)
        write_candidates(rows, str(tmp_path / "in.tsv"), fmt="cc_tsv")
        result = submit(
            ray_cluster,
            "conceptual.jobs.curate",
            "--input",
            str(tmp_path / "in.tsv"),
            "--output",
            str(out),
            "entity_frequency.more_than=1",
            *fetch_overrides(catalogue),
        )
    assert result.returncode == 0, output_of(result)
    stats = json.loads((out / "stats.json").read_text())
    assert stats["input"] == 300 and 0 < stats["kept"] < 300
    assert {"fetch", "image", "overlap"} <= set(stats["rejected"])
    assert (out / "_SUCCESS").exists()
    assert "kept" in result.stdout and "mlflow" in result.stdout

    features = submit(
        ray_cluster,
        "conceptual.jobs.features",
        "--data",
        str(out),
        "--output",
        str(tmp_path / "features"),
    )
    assert features.returncode == 0, output_of(features)
    summary = json.loads((tmp_path / "features" / "features.json").read_text())
    assert summary["images"] == stats["kept"] and summary["grid"] == 8


@pytest.mark.slow  # a second submission (46 s): the default run keeps curate and features submitted
def test_relative_paths_of_a_submitted_job_mean_the_working_dir_itself(ray_cluster, tmp_path):
    """`--working-dir .` from the repository root: `examples/candidates.tsv` is the
    repository's file, not one in Ray's temporary copy. From another folder a relative path
    is refused, since nothing written into the copy outlives the job."""
    out = tmp_path / "out"
    result = submit(
        ray_cluster,
        "conceptual.jobs.curate",
        "--input",
        "examples/candidates.tsv",
        "--output",
        str(out),
        "with_images=false",
        "entity_frequency.more_than=2",
    )
    assert result.returncode == 0, output_of(result)
    assert f"curate: {REPO / 'examples' / 'candidates.tsv'} -> {out}" in result.stdout
    assert json.loads((out / "stats.json").read_text())["kept"] > 0

    elsewhere = tmp_path / "project"
    elsewhere.mkdir()
    (elsewhere / "in.tsv").write_text("A dog runs on the grass.\thttp://127.0.0.1:9/a.jpg\n")
    refused = submit(
        ray_cluster,
        "conceptual.jobs.curate",
        "--input",
        "in.tsv",
        "--output",
        "out",
        working_dir=elsewhere,
    )
    assert refused.returncode != 0
    assert "absolute path or an s3:// URI" in refused.stdout + refused.stderr


@pytest.mark.slow  # a third submission (about 40 s): the default run keeps curate and features submitted
def test_hypernymize_job_submitted_to_a_cluster(ray_cluster, tmp_path):
    lines = ["Crowd at a concert in Los Angeles", "", "#tbt www.example.com"]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n")
    result = submit(
        ray_cluster, "conceptual.jobs.hypernymize", "--filters", str(tmp_path / "in.txt")
    )
    assert result.returncode == 0, output_of(result)
    out = [
        line
        for line in result.stdout.splitlines()
        if line == "crowd at a concert" or line.startswith("REJECT\t")
    ]
    assert out[0] == "crowd at a concert"
    assert out[1] == "REJECT\ttext\tempty"
    assert out[2].startswith("REJECT\ttext\t")


TINY_MODEL = [
    "model.d_model=32",
    "model.layers=1",
    "model.heads=2",
    "model.ffn=64",
    "min_count=1",
    "optimizer=adamw",
    "epochs=1",
    "batch_size=16",
    "eval_metrics=[CIDEr]",
    "beam=2",
    "cpus_per_worker=0.5",
    "min_eval_size=1",  # the champion rule on these few dev photos
]


# Three minutes on two cores: the default run keeps curate and features submitted (above),
# and the captioning jobs run in-process in tests/integration/test_train_captioner.py.
@pytest.mark.slow
def test_captioning_jobs_submitted_to_a_cluster(
    ray_cluster, tmp_path, platform_home, captioned_folder
):
    """Import a captioned folder, features, train and register, evaluate, caption, and
    compare the four variants: every captioning stage as a submitted job."""
    catalogue = captioned_folder(tmp_path / "dataset", captions_per_photo=4)

    def run(*args: str) -> str:
        result = submit(ray_cluster, *args)
        assert result.returncode == 0, output_of(result)
        return result.stdout

    data, features = str(tmp_path / "data"), str(tmp_path / "features")
    run("conceptual.jobs.import_captions", "--folder", str(tmp_path / "dataset"), "--output",
        data, "--curated", "splits.train=0.6", "splits.val=0.2", "splits.test=0.2")  # fmt: skip
    run("conceptual.jobs.features", "--data", data, "--output", features)
    name = "captioner-e2e"
    out = run("conceptual.jobs.train_captioner", "--features", features, "--model-name", name,
              *TINY_MODEL)  # fmt: skip
    # Registered; whether it is the champion depends on its dev CIDEr after one epoch (a zero
    # makes none), which is the champion rule's test, not this one's: use the version.
    assert f"registered: models:/{name}/1" in out and "champion: " in out
    assert_artifacts_outlive_the_session(platform_home, name)
    model = f"models:/{name}/1"
    out = run("conceptual.jobs.evaluate_captioner", "--model", model, "--features", features,
              "--split", "test", "metrics=[CIDEr,BLEU-4]")  # fmt: skip
    assert "baseline [95% interval]" in out and "  CIDEr " in out  # the table
    photo = catalogue.path(catalogue.of_kind("good")[0])
    out = run("conceptual.jobs.caption", "--model", model, str(photo))
    assert any(line.startswith(f"{photo}\t") for line in out.splitlines())
    out = run("conceptual.jobs.compare_captioners", "--features", features, "--model-name",
              name, *TINY_MODEL, "experiment=e2e-comparison")  # fmt: skip
    for variant in ("rnn-1x1", "rnn-8x8", "transformer-1x1", "transformer-8x8"):
        assert f"| {variant} |" in out


def assert_artifacts_outlive_the_session(home: Path, model_name: str) -> None:
    """Every experiment, and the registered model's files, under the platform's home: not
    in the job's working copy, which Ray deletes with the session."""
    import mlflow

    from conceptual.registry import resolve

    mlflow.set_tracking_uri(f"sqlite:///{home / 'mlflow.db'}")
    for experiment in mlflow.search_experiments():
        location = experiment.artifact_location.removeprefix("file://")
        assert location.startswith(str(home / "mlartifacts")), (experiment.name, location)
    model_dir = Path(resolve(f"models:/{model_name}/1"))
    assert (model_dir / "model.safetensors").is_file()
    client = mlflow.MlflowClient()
    version = client.get_model_version(model_name, "1")
    source = client.get_run(version.run_id).info.artifact_uri.removeprefix("file://")
    assert source.startswith(str(home / "mlartifacts")) and "runtime_resources" not in source
