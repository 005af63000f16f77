"""The learned alignment rule's keys (alignment.*, overlap.rule), how it combines with the
label rule, and alignment.keep_fraction as a global step: a threshold decided over the
scores of every batch, then the rows below it rejected, low_alignment."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from pydantic import ValidationError

from conceptual.pipelines.curation.alignment_rule import (
    alignment_threshold,
    mark_low_alignment,
    score_tally,
)
from conceptual.pipelines.curation.curation import global_steps, stages
from conceptual.pipelines.curation.curation_config import CurationConfig
from conceptual.pipelines.dataflow.rows import table
from conceptual.records import IN_FLIGHT, Rejection
from conceptual.vision.alignment import AlignmentConfig, combined

SCORER = "models:/contrastive@champion"
NO_LABEL = Rejection("no_label_overlap", "labels: tabby")


def curation(**keys) -> CurationConfig:
    """A CurationConfig from dotted keys, as the jobs' overrides give them."""
    tree: dict = {}
    for key, value in keys.items():
        *parents, last = key.split("__")
        node = tree
        for parent in parents:
            node = node.setdefault(parent, {})
        node[last] = value
    return CurationConfig.model_validate(tree)


def test_the_default_is_the_papers_label_rule_and_no_scorer():
    config = CurationConfig()
    assert config.overlap.rule == "labels" and config.alignment.scorer is None
    assert not config.embeds_images
    assert "alignment" not in stages(config)


@pytest.mark.parametrize(
    "keys, problem",
    [
        ({"alignment__min_score": 0.2, "alignment__keep_fraction": 0.3}, "not both"),
        ({"alignment__min_score": 0.2}, "need alignment.scorer"),
        ({"alignment__scorer": SCORER, "alignment__min_score": 0.2}, "overlap.rule=labels"),
        ({"alignment__scorer": SCORER, "overlap__rule": "alignment"}, "needs alignment.scorer"),
        (
            {
                "alignment__scorer": SCORER,
                "alignment__keep_fraction": 0.3,
                "overlap__rule": "either",
                "overlap__enabled": False,
            },
            "overlap.enabled=false",
        ),
        ({"alignment__scorer": SCORER, "with_images": False}, "with_images=true"),
        ({"alignment__keep_fraction": 0.0}, "greater than 0"),
    ],
)
def test_keys_that_cannot_work_together_are_refused(keys, problem):
    with pytest.raises(ValidationError, match=problem):
        curation(**keys)


def test_a_scorer_over_pooled_vectors_asks_the_vision_step_for_embeddings():
    assert curation(alignment__scorer=SCORER).embeds_images
    assert curation(alignment__scorer="/models/contrastive").embeds_images
    # open_clip reads the decoded image: no CNN embedding is made for it
    assert not AlignmentConfig(scorer="open_clip:ViT-B-32@/w.pt").reads_embeddings


@pytest.mark.parametrize(
    "rule, labels, score, expected",
    [
        ("labels", None, 0.1, None),  # the paper's rule: the score decides nothing
        ("labels", NO_LABEL, 0.9, "no_label_overlap"),
        ("alignment", NO_LABEL, 0.9, None),  # the score alone
        ("alignment", None, 0.1, "low_alignment"),
        ("both", NO_LABEL, 0.9, "no_label_overlap"),
        ("both", None, 0.1, "low_alignment"),
        ("both", None, 0.9, None),
        ("either", NO_LABEL, 0.9, None),  # one rule keeping it is enough
        ("either", None, 0.1, None),
        ("either", NO_LABEL, 0.1, "low_alignment"),
    ],
)
def test_overlap_rule_combines_the_label_rule_and_the_score(rule, labels, score, expected):
    rejection = combined(rule, labels, score, threshold=0.5)
    assert (rejection and rejection.reason) == expected
    if rule == "either" and expected:  # the detail says both rules failed it
        assert "0.1000 < 0.5000" in rejection.detail and "tabby" in rejection.detail


def test_without_a_threshold_here_the_score_rejects_nothing():
    # keep_fraction: the vision step only scores; `either` defers the label rule's verdict
    assert combined("alignment", None, 0.1, None) is None
    assert combined("either", NO_LABEL, 0.1, None) is None
    assert combined("both", NO_LABEL, 0.1, None).reason == "no_label_overlap"


def batch(scores, matched=None, rejected=()) -> pa.Table:
    rows = [
        dict.fromkeys(IN_FLIGHT.names)
        | {
            "id": str(i),
            "alt_text": "a cat",
            "caption": "a cat",
            "position": i,
            "alignment_score": score,
            "matched": (matched or {}).get(i, []),
        }
        for i, score in enumerate(scores)
    ]
    for i in rejected:
        rows[i].update(stage="fetch", reason="fetch_failed", alignment_score=None)
    return table(rows)


def test_keep_fraction_is_a_quantile_over_every_batch():
    # Ten scored pairs in three batches (and a row never scored): the top 40% of the ten
    # are the four best, wherever they are.
    batches = [
        batch([0.9, 0.1, None]),
        batch([0.5, 0.3, 0.7, 0.2]),
        batch([0.8, 0.4, 0.6, 0.0]),
    ]
    tallies = pa.concat_tables([score_tally(b) for b in batches])
    kwargs, report = alignment_threshold(tallies, 0.4, "alignment", SCORER)
    assert kwargs == {"threshold": pytest.approx(0.6), "rule": "alignment"}
    assert report["scored"] == 10 and report["threshold"] == pytest.approx(0.6)
    out = [mark_low_alignment(b, **kwargs) for b in batches]
    kept = [r["alignment_score"] for b in out for r in b.to_pylist() if r["reason"] is None]
    assert sorted(s for s in kept if s is not None) == pytest.approx([0.6, 0.7, 0.8, 0.9])
    rejected = [r for b in out for r in b.to_pylist() if r["reason"] == "low_alignment"]
    assert len(rejected) == 6 and all(r["stage"] == "alignment" for r in rejected)
    assert rejected[0]["detail"] == "alignment score 0.1000 < 0.6000"
    # the row never scored stays in the running: no score, no verdict on it here
    assert out[0].to_pylist()[2]["reason"] is None


def test_already_rejected_rows_count_in_the_distribution_but_stay_as_they_were():
    scored = batch([0.9, 0.2, 0.1, 0.8])
    scored = table(
        [
            r | ({"stage": "overlap", "reason": "no_labels"} if i == 0 else {})
            for i, r in enumerate(scored.to_pylist())
        ]
    )
    kwargs, _ = alignment_threshold(score_tally(scored), 0.5, "both", SCORER)
    assert kwargs["threshold"] == pytest.approx(0.8)  # 0.9, rejected, still counted
    out = mark_low_alignment(scored, **kwargs).to_pylist()
    assert [r["reason"] for r in out] == ["no_labels", "low_alignment", "low_alignment", None]
    assert out[1]["alignment_score"] == pytest.approx(0.2)  # the score stays in the record


def test_with_either_a_pair_the_labels_kept_is_not_rejected_for_its_score():
    scored = batch([0.9, 0.2, 0.1], matched={1: ["cat"]})
    out = mark_low_alignment(scored, threshold=0.5, rule="either").to_pylist()
    assert [r["reason"] for r in out] == [None, None, "low_alignment"]
    assert "no_label_overlap" in out[2]["detail"]


def test_nothing_scored_rejects_nothing():
    empty = batch([None, None])
    kwargs, report = alignment_threshold(score_tally(empty), 0.3, "alignment", SCORER)
    assert kwargs["threshold"] is None and report["scored"] == 0
    assert mark_low_alignment(empty, **kwargs).equals(empty)


def test_the_funnel_has_an_alignment_stage_where_a_rule_decides_by_score():
    per_row = curation(alignment__scorer=SCORER, alignment__min_score=0.2, overlap__rule="both")
    assert stages(per_row)[stages(per_row).index("image") :][:3] == (
        "image",
        "overlap",
        "alignment",
    )
    top = curation(
        alignment__scorer=SCORER, alignment__keep_fraction=0.3, overlap__rule="alignment"
    )
    assert "alignment" in stages(top) and "overlap" not in stages(top)
    assert global_steps(top)[0].name == "alignment"  # first: its tally counts every pair
    assert "alignment" not in [s.name for s in global_steps(per_row)]
    scores_only = curation(alignment__scorer=SCORER)  # recorded, the label rule decides
    assert "alignment" not in stages(scores_only) and "overlap" in stages(scores_only)
    assert np.isclose(top.alignment.keep_fraction, 0.3)
