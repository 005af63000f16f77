"""The evaluation jobs' warning (pipelines/evaluation/evaluation.py, contamination_warning): a model
whose training data no curation decontaminated against the scored set is warned of, read
from the lineage chain's curation reports (lineage_chain.trace's shape)."""

from __future__ import annotations

import json

from conceptual.pipelines.evaluation.evaluation import (
    contaminated,
    curation_reports,
    folder,
    scored_sources,
)


def chain(curation: dict) -> dict:
    """A model's chain: trained on features made from the curation at /d/cur."""
    curated = {"uri": "/d/cur", "part": "curated", "origin": {"kind": "curation", **curation}}
    features = {
        "uri": "/d/feat",
        "origin": {"kind": "features"},
        "written_by": {"run_id": "f", "reads": [curated]},
    }
    return {"model": {"uri": "models:/m/1"}, "run": {"run_id": "t", "reads": [features]}}


def test_a_curation_not_decontaminated_against_the_scored_set_is_warned_of():
    plain = curation_reports(chain({"kept": 10}))
    assert plain == [("/d/cur", {"kind": "curation", "kept": 10})]
    assert contaminated(plain, {"/d/coco_test"})
    against = {"against": [{"path": "/d/coco_test/curated", "images": 5, "fingerprint": "f"}]}
    cleaned = curation_reports(chain({"decontaminate": against}))
    assert not contaminated(cleaned, {"/d/coco_test"})
    assert contaminated(cleaned, {"/d/flickr_test"})  # cleaned against another set


def test_a_split_of_the_training_curation_is_clean_only_with_near_duplicates_removed():
    # scored on the test split of the curation the model trained on
    assert contaminated(curation_reports(chain({})), {"/d/cur"})
    near = curation_reports(chain({"near_duplicates": {"enabled": True, "rejected": 3}}))
    assert not contaminated(near, {"/d/cur"})


def test_a_scored_set_is_known_by_its_features_and_the_data_they_came_from(tmp_path):
    features = tmp_path / "feat"
    (features / "features").mkdir(parents=True)
    (features / "features.json").write_text(json.dumps({"curated": "/d/coco_test/curated"}))
    assert scored_sources(str(features / "features")) == {str(features), "/d/coco_test"}
    assert folder("/d/x/") == folder("/d/x/curated") == "/d/x"
