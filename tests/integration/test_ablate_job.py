"""The ablation job end to end on a handful of shared Flickr8k photos: two curation variants
of the same candidates, a contrastive model trained on each with one seed and a tiny budget,
both scored on the same held-out photos; one comparison run with a child run per variant
(its funnel, and its curation, training and evaluation runs below it), the table in
OUTPUT/; a rerun curates nothing again."""

from __future__ import annotations

import json

import pytest
from ablation_inputs import imported  # tests/ablation_inputs.py

pytestmark = [pytest.mark.integration, pytest.mark.realdata, pytest.mark.slow]

VARIANTS = "variants={one-per-photo: '', every-caption: 'dedup.by_url=false dedup.by_image=false'}"
SETTINGS = [
    "experiment=test-ablate",
    VARIANTS,
    "curate.image.min_side=100",  # the shared Flickr8k photos are 200 px on their long side
    "curate.entity_frequency.more_than=0",
    "curate.resources.nlp_actors=1",
    "curate.resources.vision_actors=1",
    "features.actors=1",
    *(
        f"train.{key}"
        for key in (
            "model.embed_dim=16 model.image_hidden=16 model.text_d_model=16 model.text_layers=1 "
            "model.text_heads=2 model.max_tokens=16 min_count=1 batch_size=8 epochs=1 "
            "cpus_per_worker=0.5 max_failures=0 seed=0"
        ).split()
    ),
]


def test_two_curations_trained_and_scored_on_the_same_held_out_photos(
    ray_local, platform_home, real_data, tmp_path, capsys
):
    import mlflow

    from conceptual import tracking
    from conceptual.jobs import ablate

    candidates, eval_features = imported(
        # Half the photos `val` (the candidates state their split, and curation keeps it):
        # with one caption a photo left by deduplication, a fifth of 12 can leave none.
        real_data,
        tmp_path / "inputs",
        candidates=12,
        held_out=8,
        noise=0.5,
        val_share=0.5,
    )
    out = tmp_path / "out"
    args = [f"input={candidates}", f"eval_features={eval_features}", f"output={out}", *SETTINGS]
    capsys.readouterr()
    assert ablate.main(args) == 0, capsys.readouterr().err[-3000:]
    printed = capsys.readouterr().out

    rows = json.loads((out / "ablation.json").read_text())
    by_name = {row["variant"]: row for row in rows}
    assert set(by_name) == {"one-per-photo", "every-caption"}
    # The same candidates for both; without dedup every caption of a photo is kept, with it one.
    assert by_name["one-per-photo"]["input"] == by_name["every-caption"]["input"]
    assert by_name["every-caption"]["kept"] > by_name["one-per-photo"]["kept"]
    assert by_name["one-per-photo"]["funnel"]["deduplicate"]  # what dedup rejected, by reason
    assert by_name["every-caption"]["overrides"] == "dedup.by_url=false dedup.by_image=false"
    for row in rows:
        assert row["mean_R@10.ci95_low"] <= row["mean_R@10"] <= row["mean_R@10.ci95_high"]
        assert row["eval_set"] == rows[0]["eval_set"]  # one held-out set for every model
    assert rows[0]["mean_R@10.p_vs_best"] is None and 0 <= rows[1]["mean_R@10.p_vs_best"] <= 1
    assert (out / "ablation.md").read_text().startswith("| variant | overrides | kept |")
    assert (out / "ablation.png").stat().st_size > 0
    assert "| every-caption |" in printed

    client = mlflow.MlflowClient()
    experiment = client.get_experiment_by_name("test-ablate").experiment_id
    parent = client.search_runs(
        [experiment], "tags.job = 'ablate' and attributes.run_name = 'comparison'"
    )
    assert len(parent) == 1
    assert {"comparison.json", "comparison.md", "comparison.png"} <= {
        a.path for a in client.list_artifacts(parent[0].info.run_id)
    }

    def children(run_id: str) -> list:
        return client.search_runs([experiment], f"tags.`{tracking.PARENT_TAG}` = '{run_id}'")

    variant_runs = {run.info.run_name: run for run in children(parent[0].info.run_id)}
    assert set(variant_runs) == set(by_name)
    for name, run in variant_runs.items():
        assert run.data.metrics["kept"] == by_name[name]["kept"]
        assert tracking.metric_key("mean_R@10") in run.data.metrics
        funnel = mlflow.artifacts.load_dict(f"runs:/{run.info.run_id}/funnel.json")
        assert funnel["kept"] == by_name[name]["kept"]
        below = {r.data.tags.get("job") for r in children(run.info.run_id)}
        assert below == {"pipeline", "train_contrastive", "evaluate_contrastive"}

    # A rerun curates and extracts nothing again: the pipeline's fingerprints match.
    assert ablate.main(args) == 0, capsys.readouterr().err[-3000:]
    for name in by_name:
        summary = json.loads((out / "variants" / name / "summary.json").read_text())
        assert summary["curate"]["skipped"] and summary["features"]["skipped"]
    rerun = json.loads((out / "ablation.json").read_text())
    assert {r["variant"]: r["kept"] for r in rerun} == {n: r["kept"] for n, r in by_name.items()}
