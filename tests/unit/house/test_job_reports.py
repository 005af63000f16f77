"""What the features and evaluate_captioner jobs print (the demo runs both): lines as every
job's, and the pipeline's compact table of held-out scores, not raw JSON."""

from __future__ import annotations

from conceptual.pipelines.families.captioner.evaluate_captioner import held_out_table
from conceptual.pipelines.features.features import described

SUMMARY = {
    "curated": "/tmp/cur",
    "records": 130,
    "images": 120,
    "skipped_without_image": 10,
    "rejected": {},
    "rows": 120,
    "crops_per_image": 1,
    "augmentation": "paper",
    "model": "efficientnet-lite0",
    "image_size": 224,
    "grid": 7,
    "seconds": 12.34,
}


def scores(cider: float, bleu: float) -> dict[str, float]:
    return {
        "CIDEr": cider,
        "CIDEr.ci95_low": cider - 0.5,
        "CIDEr.ci95_high": cider + 0.5,
        "BLEU-4": bleu,
        "BLEU-4.ci95_low": bleu - 0.1,
        "BLEU-4.ci95_high": bleu + 0.1,
    }


def evaluation(model: dict, baseline: dict | None) -> dict:
    return {
        "scores": model,
        "baseline": baseline,
        "unavailable": {"SPICE": "needs CoreNLP's jars"},
        "eval_set": "features#test:5:ab12",
        "images": 5,
        "run_id": "r1",
    }


def test_the_features_job_prints_lines_not_a_dict():
    text = described(SUMMARY)
    assert text.splitlines() == [
        "images:   120 of 130 records, 10 without an image  (12.3 s)",
        "cnn:      efficientnet-lite0 at 224 px (7x7 grid)",
    ]
    crops = described({**SUMMARY, "crops_per_image": 5, "skipped_without_image": 0})
    assert "records  (" in crops and "4 crops per image besides its centre (paper)" in crops


def test_the_evaluation_is_the_pipelines_table():
    text = held_out_table(evaluation(scores(2.62, 0.3), scores(2.33, 0.2)))
    lines = text.splitlines()
    assert lines[0] == "evaluate: 5 held-out images (features#test:5:ab12)"
    assert "baseline [95% interval]" in lines[1]
    assert lines[2].split() == ["CIDEr", "2.620", "[2.120,", "3.120]", "2.330", "[1.830,", "2.830]"]
    assert lines[4].split()[:2] == ["SPICE", "n/a"]
    assert "ci95" not in text and "{" not in text and len(lines) == 5  # no note: the model wins


def test_the_evaluation_says_when_the_baseline_wins():
    text = held_out_table(evaluation(scores(2.33, 0.3), scores(2.62, 0.2)))
    [note] = [line for line in text.splitlines() if line.startswith("note:")]
    assert "baseline beats the model on CIDEr (CIDEr 2.620 vs 2.330)" in note
    assert "BLEU-4" not in note  # the model wins that one
    everywhere = held_out_table(evaluation(scores(2.33, 0.2), scores(2.62, 0.3)))
    assert "beats the model on every metric (CIDEr 2.620 vs 2.330)" in everywhere
    assert "note:" not in held_out_table(evaluation(scores(2.33, 0.3), None))
