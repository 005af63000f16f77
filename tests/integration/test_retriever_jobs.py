"""The retriever jobs' command lines (jobs/train_retriever.py, compare_retrievers.py,
evaluate_retriever.py) on a local Ray: what they refuse before training anything (exit 2,
the reason on standard error), and one comparison of two tiny text variants, whose MLflow
comparison run holds the variants' training runs as children and the markdown table.

The data is this module's own: a features output of four kinds of image, each kind with
its own feature centre and its own two captions, so a tiny text model learns something
in one epoch (one real training comparison only: the file stays quick)."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conceptual.records import FEATURES

pytestmark = pytest.mark.integration

CHANNELS = 8
KINDS = [
    ("a dog on the grass", "a brown dog running"),
    ("a cat on the sofa", "a small cat sleeping"),
    ("a boat on the lake", "a white boat sailing"),
    ("a car on the road", "a red car driving"),
]
TRAIN_IMAGES, VAL_IMAGES = 4, 2  # per kind
EXPERIMENT = "test-compare-retrievers"
TINY = [
    "model.embed_dim=16",
    "model.image_hidden=16",
    "model.text_d_model=16",
    "model.text_layers=1",
    "model.text_heads=2",
    "model.max_tokens=12",
    "model.dropout=0.0",
    "min_count=1",
    "lr=0.003",
    "batch_size=8",
    "epochs=1",
    "cpus_per_worker=0.5",
    "max_failures=0",
]


@pytest.fixture(scope="module")
def features_uri(tmp_path_factory) -> str:
    """24 images (16 train, 8 val) x 2 captions, centre crop only, and the _SUCCESS marker."""
    folder = tmp_path_factory.mktemp("retriever-jobs") / "features"
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(len(KINDS), CHANNELS))
    rows = []
    for kind, captions in enumerate(KINDS):
        for image in range(TRAIN_IMAGES + VAL_IMAGES):
            image_id = hashlib.sha1(f"{kind}-{image}".encode()).hexdigest()
            pooled = (centres[kind] + 0.3 * rng.normal(size=CHANNELS)).astype(np.float32)
            split = "val" if image < VAL_IMAGES else "train"
            for n, caption in enumerate(captions):
                rows.append(
                    {
                        "id": f"{kind}-{image}-{n}",
                        "image_id": image_id,
                        "split": split,
                        "caption": caption,
                        "crop": 0,
                        "pooled": pooled,
                    }
                )
    (folder / "features").mkdir(parents=True)
    table = pa.Table.from_pylist(rows, schema=FEATURES)
    pq.write_table(table, folder / "features" / "part-0.parquet", row_group_size=16)
    # The features job's summary: the CNN settings a model trained on them saves.
    summary = {"model": "efficientnet-lite0", "image_size": 256}
    (folder / "features.json").write_text(json.dumps(summary))
    (folder / "_SUCCESS").write_text("{}")
    return str(folder)


def experiment_runs(name: str) -> list | None:
    """The runs of an MLflow experiment; None when the experiment was never made."""
    from mlflow import MlflowClient

    from conceptual import tracking

    tracking.configure()
    client = MlflowClient()
    experiment = client.get_experiment_by_name(name)
    return None if experiment is None else client.search_runs([experiment.experiment_id])


def test_train_retriever_refuses_speech_without_clips(platform_home, features_uri, capsys):
    from conceptual.jobs import train_retriever

    argv = ["--features", features_uri, "modality=speech", "experiment=test-refused-train"]
    assert train_retriever.main([*argv, *TINY]) == 2
    captured = capsys.readouterr()
    assert "error: modality=speech needs spoken captions: --speech URI" in captured.err
    assert "model:" not in captured.out
    assert experiment_runs("test-refused-train") is None  # no run: nothing trained


@pytest.mark.parametrize(
    "variant, message",
    [
        ("mms loss=mms", "a variant is 'name: key=value ...', not 'mms loss=mms'"),
        ("lossy: los=mms", "variant 'lossy'"),
    ],
)
def test_compare_retrievers_refuses_a_bad_variant_before_training(
    platform_home, features_uri, capsys, variant, message
):
    from conceptual.jobs import compare_retrievers

    argv = ["--features", features_uri, "--eval-features", features_uri, "--split", "val"]
    variants = ["--variant", "good: loss=mms", "--variant", variant]
    overrides = ["modality=text", "experiment=test-refused-compare", *TINY]
    assert compare_retrievers.main([*argv, *variants, *overrides]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and "variant 1/" not in captured.out
    assert experiment_runs("test-refused-compare") is None  # not even the comparison run


def test_evaluate_retriever_refuses_a_model_that_is_not_there(
    platform_home, features_uri, tmp_path, capsys
):
    from conceptual.jobs import evaluate_retriever

    missing = str(tmp_path / "no-such-model")
    argv = ["--model", missing, "--features", features_uri, "--split", "val"]
    assert evaluate_retriever.main([*argv, "experiment=test-refused-evaluate"]) == 2
    err = capsys.readouterr().err
    assert "error:" in err and "no-such-model" in err
    assert experiment_runs("test-refused-evaluate") is None


@pytest.mark.slow  # two trainings; test_train_retriever trains and registers by default
def test_compare_retrievers_trains_both_variants_as_children_of_one_run(
    ray_local, platform_home, features_uri, capsys
):
    import mlflow

    from conceptual.jobs import compare_retrievers
    from conceptual.tracking import PARENT_TAG

    argv = ["--features", features_uri, "--eval-features", features_uri, "--split", "val"]
    variants = ["--variant", "mms: loss=mms", "--variant", "triplet: loss=triplet"]
    overrides = ["modality=text", f"experiment={EXPERIMENT}", *TINY]
    code = compare_retrievers.main([*argv, *variants, *overrides])
    captured = capsys.readouterr()
    assert code == 0, captured.err[-3000:]

    out = captured.out
    assert "variant 1/2 mms" in out and "variant 2/2 triplet" in out
    lines = out.splitlines()
    header = next(line for line in lines if line.startswith("| variant |"))
    assert "text_to_image.R@1" in header and "image_to_text.R@10" in header
    assert "| mean_R@10 | p vs best |" in header
    rows = [line for line in lines if line.startswith(("| mms |", "| triplet |"))]
    assert sorted(row.split(" | ")[1] for row in rows) == ["mms", "triplet"]
    assert any(line.startswith("| chance |") for line in lines)
    assert "comparison run" in out

    runs = experiment_runs(EXPERIMENT)
    [parent] = [r for r in runs if r.data.tags.get("job") == "compare_retrievers"]
    children = [r for r in runs if r.data.tags.get(PARENT_TAG) == parent.info.run_id]
    trained = [r for r in children if r.data.tags.get("job") == "train_retriever"]
    assert sorted(r.data.tags["variant"] for r in trained) == ["text-mms", "text-triplet"]
    assert all(r.info.status == "FINISHED" for r in trained)
    assert {r.data.params["loss"] for r in trained} == {"mms", "triplet"}
    evaluated = [r for r in children if r.data.tags.get("job") == "evaluate_retriever"]
    assert len(evaluated) == 2  # each variant scored on the held-out split, also a child

    artifacts = {a.path for a in mlflow.MlflowClient().list_artifacts(parent.info.run_id)}
    assert {"comparison.md", "comparison.json"} <= artifacts
    table = mlflow.artifacts.load_text(f"runs:/{parent.info.run_id}/comparison.md")
    assert table.strip() in out  # the printed table is the logged one
    assert parent.data.tags["best_variant"] in ("mms", "triplet")
    # Each variant's mean R@10 with its interval, the runner-up's p-value against the best.
    scored = mlflow.artifacts.load_dict(f"runs:/{parent.info.run_id}/comparison.json")
    columns = scored["columns"]
    for row in scored["data"]:
        values = dict(zip(columns, row))
        assert values["mean_R@10.ci95_low"] <= values["mean_R@10"] <= values["mean_R@10.ci95_high"]
    assert evaluated[0].data.metrics["text_to_image.R_10.ci95_high"] >= 0


@pytest.mark.slow  # 50 s; the text retriever trains in the default run, and test_every_job submits
# train_contrastive, evaluate_contrastive and compare_contrastive
def test_the_contrastive_family_trains_registers_and_is_scored_beside_the_retriever(
    ray_local, platform_home, features_uri, capsys
):
    """The sixth family (pipelines/families/contrastive/train_contrastive.py), run by the
    jobs the family table builds for it: InfoNCE with a learned temperature, registered as
    `contrastive`, then scored by evaluate_contrastive on the held-out split with the
    retriever's R@k keys."""
    import mlflow

    from conceptual.jobs import evaluate_contrastive, train_contrastive

    experiment = "test-contrastive"
    argv = ["--features", features_uri, f"experiment={experiment}", *TINY, "epochs=2"]
    argv.append("min_eval_size=1")  # the champion rule on these 8 dev photos
    assert train_contrastive.main(argv) == 0, capsys.readouterr().err[-3000:]
    out = capsys.readouterr().out
    assert "models:/contrastive/1" in out

    [trained] = [r for r in experiment_runs(experiment) if r.data.tags.get("job")]
    assert trained.data.tags["job"] == "train_contrastive"
    assert trained.data.tags["variant"] == "text-infonce"
    assert trained.data.params["loss"] == "infonce"
    assert "margin.start" not in trained.data.params  # InfoNCE has no margin
    assert "mean_R_10" in trained.data.metrics  # MLflow spells @ as _
    client = mlflow.MlflowClient()
    champion = client.get_model_version_by_alias("contrastive", "champion")
    assert str(champion.version) == "1"

    argv = ["--model", "models:/contrastive@champion", "--features", features_uri]
    assert evaluate_contrastive.main([*argv, "--split", "val", f"experiment={experiment}"]) == 0
    out = capsys.readouterr().out
    assert "text_to_image.R@1" in out and "image_to_text.R@10" in out
    scored = [r for r in experiment_runs(experiment) if "text_to_image.R_10" in r.data.metrics]
    assert scored and 0 <= scored[0].data.metrics["text_to_image.R_10"] <= 1
    assert scored[0].data.tags["job"] == "evaluate_contrastive"  # its own job, not the retriever's


def test_the_contrastive_family_refuses_spoken_captions(platform_home, features_uri, capsys):
    """The family's jobs offer no --speech (it is text-image), and one given is named."""
    from conceptual.jobs import train_contrastive

    argv = ["--features", features_uri, "--speech", features_uri, "experiment=test-refused-c"]
    with pytest.raises(SystemExit) as refused:
        train_contrastive.main([*argv, *TINY])
    assert refused.value.code == 2
    assert "unrecognized arguments: --speech" in capsys.readouterr().err
    assert experiment_runs("test-refused-c") is None
    with pytest.raises(SystemExit):
        train_contrastive.main(["--help"])
    assert "--speech" not in capsys.readouterr().out
