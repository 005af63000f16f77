"""The pipeline job: the captioner's steps, then the retriever's (speech, train_retriever,
index), each in order, then a rerun that skips what is done, and a changed key that reruns
its step and those that read it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def candidates(tmp_path_factory, captioned_folder) -> str:
    """The demo's good photos with captions that fit them, as candidates with their image
    bytes (the import job's output): curation needs no fetch."""
    from conceptual.jobs import import_captions

    root = tmp_path_factory.mktemp("pipeline-input")
    captioned_folder(root / "dataset", captions_per_photo=3)
    output = root / "import"  # beside its input, not around it
    assert import_captions.main(["--folder", str(root / "dataset"), "--output", str(output)]) == 0
    return str(output / "candidates")


def settings(output, *extra: str) -> list[str]:
    return [
        f"input={output[0]}",
        f"output={output[1]}",
        "model_name=captioner-pipeline-test",
        "experiment=test-pipeline",
        "curate.entity_frequency.more_than=0",
        "curate.split.train=0.6",
        "curate.split.val=0.2",
        "curate.split.test=0.2",
        "train.model.d_model=32",
        "train.model.layers=1",
        "train.model.heads=2",
        "train.model.ffn=64",
        "train.min_count=1",
        "train.epochs=1",
        "train.batch_size=16",
        "train.eval_metrics=[CIDEr]",
        "train.beam=2",
        "train.cpus_per_worker=0.5",
        "evaluate.metrics=[CIDEr]",
        "evaluate.beam=2",
        *extra,
    ]


def run_job(capsys, args: list[str]) -> dict:
    from conceptual.jobs import pipeline

    assert pipeline.main(args) == 0, capsys.readouterr().err[-3000:]
    out = capsys.readouterr().out
    summary = re.search(r"^summary:\s+(\S+)", out, re.M).group(1)  # the file it names
    return json.loads(Path(summary).read_text())


def test_steps_run_once_and_a_changed_key_reruns_from_its_step(
    ray_local, platform_home, candidates, tmp_path, capsys
):
    paths = (candidates, str(tmp_path / "out"))
    first = run_job(capsys, settings(paths))
    assert [s for s, r in first.items() if r["skipped"]] == []
    assert first["curate"]["result"]["kept"] > 0
    assert str(first["register"]["result"]["version"]) == "1"
    assert "CIDEr" in first["evaluate"]["result"]["scores"]
    assert (tmp_path / "out" / "curated" / "_SUCCESS").exists()
    assert (tmp_path / "out" / "features" / "_SUCCESS").exists()

    again = run_job(capsys, settings(paths))
    assert all(r["skipped"] for r in again.values())
    assert again["train"]["result"] == first["train"]["result"]

    changed = run_job(capsys, settings(paths, "train.epochs=2"))
    assert [s for s, r in changed.items() if not r["skipped"]] == ["train", "register", "evaluate"]
    assert str(changed["register"]["result"]["version"]) == "2"

    # Every step's run is a child of its pipeline's run, in the pipeline's experiment.
    assert steps_under_first_pipeline_run("test-pipeline") == {
        "curate",
        "features",
        "train_captioner",
        "evaluate_captioner",
    }


def steps_under_first_pipeline_run(experiment_name: str) -> set[str]:
    """The steps of the runs under the experiment's first pipeline run."""
    import mlflow

    client = mlflow.MlflowClient()
    experiment = client.get_experiment_by_name(experiment_name)
    pipelines = client.search_runs([experiment.experiment_id], "tags.job = 'pipeline'")
    first_run = min(pipelines, key=lambda r: r.info.start_time)
    children = client.search_runs(
        [experiment.experiment_id], f"tags.`mlflow.parentRunId` = '{first_run.info.run_id}'"
    )
    return {r.data.tags["job"] for r in children}


# A speech retriever as small as it gets, one epoch (test_train_retriever.py's settings).
RETRIEVER = [
    "steps=[curate,features,speech,train_retriever,index]",
    "train_retriever.model.embed_dim=16",
    "train_retriever.model.image_hidden=16",
    "train_retriever.model.speech_channels=[8,16]",
    "train_retriever.audio.seconds=1.0",
    "train_retriever.audio.n_mfcc=32",
    "train_retriever.audio.n_mels=32",
    "train_retriever.audio.time_mask=10",
    "train_retriever.audio.freq_mask=4",
    "train_retriever.batch_size=8",
    "train_retriever.epochs=1",
    "train_retriever.cpus_per_worker=0.5",
    "train_retriever.max_failures=0",
    "speech.examples=1",
]


def run_retriever_steps(capsys, paths, name: str, *extra: str) -> dict:
    """The retriever's steps in experiment `name`, registering versions of `name`; the
    first run of an output runs them all."""
    return run_job(
        capsys, settings(paths, *RETRIEVER, f"retriever_name={name}", f"experiment={name}", *extra)
    )


@pytest.mark.slow  # the pipeline's second path (93 s): the default run keeps the captioner's steps
def test_the_retriever_steps_run_once_and_an_index_key_reruns_only_the_index(
    ray_local, platform_home, candidates, tmp_path, capsys
):
    import mlflow

    from conceptual.retrieval_index import INDEX_TAG

    out, name = tmp_path / "out", "retriever-pipeline-test"
    paths = (candidates, str(out))
    first = run_retriever_steps(capsys, paths, name)
    assert list(first) == ["curate", "features", "speech", "train_retriever", "index"]
    assert [s for s, r in first.items() if r["skipped"]] == []
    assert first["speech"]["result"]["clips"] == first["curate"]["result"]["kept"]
    registered = first["train_retriever"]["result"]["registered"]
    assert (registered["name"], str(registered["version"])) == (name, "1")
    index = first["index"]["result"]
    assert index["registered"] == {"name": name, "version": "1"}
    assert index["modality"] == "speech" and index["counts"]["clips"] > 0
    for folder in ("curated", "features", "clips", f"index/{name}"):
        assert (out / folder / "_SUCCESS").exists(), folder
    client = mlflow.MlflowClient()
    # each retriever's own index folder: a text retriever's beside it would not overwrite it
    assert client.get_model_version(name, "1").tags[INDEX_TAG] == str(out / "index" / name)

    again = run_retriever_steps(capsys, paths, name)
    assert all(r["skipped"] for r in again.values())

    changed = run_retriever_steps(capsys, paths, name, "index.splits=[test]")
    assert [s for s, r in changed.items() if not r["skipped"]] == ["index"]
    assert changed["index"]["result"]["counts"]["images"] < index["counts"]["images"]

    assert steps_under_first_pipeline_run(name) == {
        "curate",
        "features",
        "synthesize_speech",
        "train_retriever",
        "build_index",
    }


@pytest.mark.slow  # two trainings, over two minutes: the test above trains once
def test_a_changed_retriever_key_reruns_it_and_the_index_only(
    ray_local, platform_home, candidates, tmp_path, capsys
):
    name = "retriever-pipeline-slow-test"
    paths = (candidates, str(tmp_path / "out"))
    first = run_retriever_steps(capsys, paths, name)
    assert [s for s, r in first.items() if r["skipped"]] == []

    changed = run_retriever_steps(capsys, paths, name, "train_retriever.epochs=2")
    assert [s for s, r in changed.items() if not r["skipped"]] == ["train_retriever", "index"]
    assert str(changed["train_retriever"]["result"]["registered"]["version"]) == "2"
    assert changed["index"]["result"]["registered"] == {"name": name, "version": "2"}


@pytest.mark.parametrize(
    "steps, message",
    [
        ("[curate,train]", "step train reads the output of features: add it to steps="),
        ("[features,curate]", "steps must be in pipeline order, each once: [curate,features]"),
        ("[curate,features,train_retriever]", "step train_retriever reads the output of speech"),
    ],
)
def test_a_step_list_missing_a_prerequisite_or_out_of_order_is_refused(
    candidates, tmp_path, capsys, steps, message
):
    from conceptual.jobs import pipeline

    args = settings((candidates, str(tmp_path / "out")), f"steps={steps}")
    assert pipeline.main(args) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # refused before any step ran


def readme_pipeline_example(repo) -> list[str]:
    """The arguments of docs/pipeline.md's first command."""
    command = shell_lines(repo / "docs" / "pipeline.md", "# One pipeline job")[0]
    return command[3:]  # after `python -m conceptual.jobs.pipeline`


def shell_lines(document: Path, heading: str) -> list[list[str]]:
    """The `python` commands of the first shell block under `heading` in `document`, split
    as the shell splits them (continued lines joined, comments dropped)."""
    import shlex

    section = ("\n" + document.read_text()).split(f"\n{heading}\n", 1)[1]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0].replace("\\\n", " ")
    lines = [shlex.split(line, comments=True) for line in block.splitlines()]
    return [words for words in lines if words and words[0] == "python"]


@pytest.mark.slow  # a text curation of 1,000 candidates; tests/integration/test_jobs_cli.py
# curates the same sample in the default run
def test_the_readme_example_keeps_captions_and_shows_the_funnel(
    ray_local, platform_home, repo, tmp_path, capsys, monkeypatch
):
    from conceptual.jobs import pipeline

    monkeypatch.chdir(repo)  # the README's relative paths
    args = [a.replace("output=out/", f"output={tmp_path}/") for a in readme_pipeline_example(repo)]
    assert any(a.startswith(f"output={tmp_path}/") for a in args)
    assert pipeline.main(args) == 0
    out = capsys.readouterr().out
    assert "stage" in out and "entering" in out  # the funnel
    summary = Path(re.search(r"^summary:\s+(\S+)", out, re.M).group(1))
    kept = json.loads(summary.read_text())["curate"]["result"]["kept"]
    assert kept > 200
    assert re.search(rf"^curated:\s+\S+/curated/curated\s+\({kept} records\)", out, re.M)


def test_a_text_only_curation_before_the_steps_that_read_photos_is_refused(
    candidates, tmp_path, capsys
):
    from conceptual.jobs import pipeline

    args = settings((candidates, str(tmp_path / "out")), "curate.with_images=false")
    assert pipeline.main(args) == 2  # the default steps: features reads photos
    assert "curate.with_images=false curates text only" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_nothing_kept_stops_the_pipeline_with_the_hint_and_its_run_failed(
    ray_local, platform_home, candidates, tmp_path, capsys
):
    from mlflow import MlflowClient

    from conceptual.jobs import pipeline

    experiment = "test-pipeline-stopped"
    args = settings(
        (candidates, str(tmp_path / "out")),
        "curate.with_images=false",  # text alone: the quickest curation that keeps nothing
        "curate.entity_frequency.more_than=100000",
        "steps=[curate,speech]",
        f"experiment={experiment}",
    )
    assert pipeline.main(args) == 1
    captured = capsys.readouterr()
    assert "the entity_frequency stage rejected the last" in captured.out
    assert "curate kept none of the" in captured.err and "speech has nothing" in captured.err

    client = MlflowClient()
    runs = client.search_runs([client.get_experiment_by_name(experiment).experiment_id])
    parent = next(r for r in runs if r.data.tags["job"] == "pipeline")
    assert parent.info.status == "FAILED"
    assert parent.info.run_name.startswith("pipeline candidates [curate,speech] 20")
    curate_run = next(r for r in runs if r.data.tags["job"] == "curate")
    assert curate_run.info.run_name.startswith("curate 20")  # its step and time


@pytest.mark.slow  # every step of both systems, then a second captioner: minutes
@pytest.mark.timeout(2400)  # 15 min on 2 busy cores; 900 s was reached at the second training
def test_the_readme_getting_started_runs_every_step_then_a_comparison_run(
    ray_local, platform_home, repo, tmp_path, monkeypatch, capsys
):
    """The README's getting-started path as written: the example folder, its import, the
    pipeline job with examples/pipeline_small.yaml (every step, a champion of each
    system), then "Compare two runs": a second captioner beside the first, both in the
    `pipeline` experiment with the registered checkpoint's `best.CIDEr`."""
    import yaml
    from mlflow import MlflowClient

    from conceptual.jobs import import_captions, pipeline
    from conceptual.pipelines.pipeline import JOB_STEPS
    from conceptual_demo import example

    readme = repo / "README.md"
    commands = shell_lines(readme, "## From data to an endpoint")
    commands += shell_lines(readme, "## Compare two runs")
    assert len(commands) == 4, commands
    monkeypatch.chdir(repo)
    jobs = {"conceptual_demo.example": example, "conceptual.jobs.import_captions": import_captions}
    jobs["conceptual.jobs.pipeline"] = pipeline
    outputs, summaries = [], []  # each run's summary.json, read before the next overwrites it
    for command in commands:
        args = [a.replace("out/", f"{tmp_path}/") for a in command[3:]]
        assert jobs[command[2]].main(args) == 0, command
        outputs.append(capsys.readouterr().out)
        found = re.search(r"^summary:\s+(\S+)", outputs[-1], re.M)
        summaries.append(found and json.loads(Path(found.group(1)).read_text()))
    first = outputs[2]
    summary, again = summaries[2], summaries[3]
    steps = yaml.safe_load((repo / "examples" / "pipeline_small.yaml").read_text())["steps"]
    assert list(summary) == steps == [s for s in JOB_STEPS if s in steps]
    assert summary["register"]["result"]["promoted"]
    assert summary["train_retriever"]["result"]["registered"]["promoted"]
    cell = r"\d+\.\d{3} \[\d+\.\d{3}, \d+\.\d{3}\]"  # a score and its 95% interval
    assert re.search(rf"^  CIDEr\s+{cell}\s+{cell}$", first, re.M)  # model beside baseline
    assert summary["evaluate"]["result"]["images"] == 5  # the example's own test split

    # The comparison run: curation and features skipped, a second captioner trained.
    assert again["curate"]["skipped"] and again["features"]["skipped"]
    assert not again["train"]["skipped"] and not again["evaluate"]["skipped"]
    client = MlflowClient()
    experiment = client.get_experiment_by_name("pipeline").experiment_id
    runs = client.search_runs([experiment], "tags.job = 'train_captioner'")
    assert sorted(r.data.tags["variant"] for r in runs) == ["rnn-1x1", "rnn-8x8"]
    assert all("best.CIDEr" in r.data.metrics for r in runs)
