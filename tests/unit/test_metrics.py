import pytest

from conceptual.metrics import caption_scores


def test_identical_captions_score_perfectly_and_unrelated_ones_do_not():
    refs = {
        0: ["a dog runs on the beach"],
        1: ["a man rides a red bike"],
        2: ["two cats sleep on a sofa"],
    }
    same = caption_scores({k: v[0] for k, v in refs.items()}, refs)
    assert same["BLEU-4"] == pytest.approx(1.0, abs=1e-6) and same["ROUGE-L"] == pytest.approx(1.0)
    assert same["CIDEr"] > 5  # CIDEr-D of exact matches is 10 before the length penalty
    other = caption_scores(
        {0: "a man rides a red bike", 1: "two cats sleep on a sofa", 2: "a dog runs on the beach"},
        refs,
    )
    assert other["CIDEr"] < 0.5 and other["BLEU-4"] < same["BLEU-4"]


def test_empty_hypothesis_scores_zero_not_an_error():
    scores = caption_scores({0: ""}, {0: ["a dog"]}, metrics=("BLEU-1", "CIDEr"))
    assert scores == {"BLEU-1": pytest.approx(0.0, abs=1e-6), "CIDEr": 0.0}


def test_mismatched_ids_and_unknown_metrics_are_errors():
    with pytest.raises(ValueError, match="same ids"):
        caption_scores({0: "a"}, {1: ["a"]})
    with pytest.raises(ValueError, match="unknown"):
        caption_scores({0: "a"}, {0: ["a"]}, metrics=("SPICE",))
