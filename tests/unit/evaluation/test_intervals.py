"""Bootstrap intervals and paired p-values (conceptual.intervals), and the caption metrics and
R@k recomputed per resample (conceptual.resampled_metrics, evaluate_retriever): each checked
against a case with a known answer, or against pycocoevalcap scoring the resample itself."""

import numpy as np
import pytest

from conceptual.intervals import (
    BootstrapConfig,
    against_best,
    interval,
    interval_cell,
    mean_over,
    p_cell,
    paired_p_value,
    resample_counts,
    with_intervals,
)
from conceptual.metrics import caption_scores, find_java


def test_resamples_are_reproducible_draws_of_every_image():
    config = BootstrapConfig(samples=200, seed=7)
    counts = resample_counts(30, config)
    assert counts.shape == (200, 30) and (counts.sum(axis=1) == 30).all()
    assert (counts == resample_counts(30, config)).all()
    assert (counts != resample_counts(30, BootstrapConfig(samples=200, seed=8))).any()
    # Every image is drawn once per resample on average.
    assert counts.mean() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="no test images"):
        resample_counts(0, config)


def test_the_interval_of_a_mean_is_the_normal_one():
    """For a mean over 400 images the percentile interval is the textbook one:
    mean +- 1.96 standard errors (within the Monte Carlo error of 4,000 resamples)."""
    rng = np.random.default_rng(0)
    per_image = rng.exponential(size=400)
    counts = resample_counts(400, BootstrapConfig(samples=4000))
    resampled = mean_over(counts, per_image)
    error = per_image.std() / np.sqrt(len(per_image))
    low, high = interval(resampled)
    assert low == pytest.approx(per_image.mean() - 1.96 * error, abs=0.2 * error)
    assert high == pytest.approx(per_image.mean() + 1.96 * error, abs=0.2 * error)

    scores = with_intervals({"score": per_image.mean(), "other": 1.0}, {"score": resampled})
    assert list(scores) == ["score", "score.ci95_low", "score.ci95_high", "other"]
    assert interval_cell(scores, "score") == f"{per_image.mean():.3f} [{low:.3f}, {high:.3f}]"
    assert interval_cell(scores, "other") == "1.000"
    assert interval_cell(scores, "missing") == "n/a"


def test_paired_p_values_against_the_best():
    counts = resample_counts(50, BootstrapConfig(samples=999))
    rng = np.random.default_rng(1)
    a = rng.random(50)
    same, better = mean_over(counts, a), mean_over(counts, a + 0.5)
    assert paired_p_value(same, same) == 1.0
    assert paired_p_value(better, same) == 2 / 1000  # better on every resample
    # A small noisy difference is inside the noise.
    noisy = mean_over(counts, a + rng.normal(0, 0.3, 50))
    assert paired_p_value(noisy, same) > 0.05
    p_values = against_best([0.1, None, 0.6, 0.1], [same, None, better, same])
    assert p_values == [2 / 1000, None, None, 2 / 1000]
    assert p_cell(None) == "" and p_cell(0.002) == "0.002" and p_cell(0.4) == "0.400 ~"


HYPOTHESES = [
    "a dog runs on the green grass",  # a reference word for word: METEOR's special case
    "a man is riding a bike",
    "two children play in water",
    "a black dog",
    "a woman in a red shirt",
    "people on the street",
]
REFERENCES = [
    ["a brown dog running through grass", "a dog runs on the green grass"],
    ["a man rides a bicycle down the street", "a person on a bike"],
    ["kids playing in a pool", "two kids splash in the water", "children swim"],
    ["a black dog jumps over a log", "a dog"],
    ["a woman wearing a red shirt smiles", "a lady in red"],
    ["a crowd walks down a city street", "people walking on a street at night"],
]


def literal_resample(counts_row):
    """The resample as a set of its own: every drawn image once per draw."""
    drawn = np.repeat(np.arange(len(HYPOTHESES)), counts_row)
    return (
        {i: HYPOTHESES[image] for i, image in enumerate(drawn)},
        {i: REFERENCES[image] for i, image in enumerate(drawn)},
    )


def resamples():
    counts = resample_counts(len(HYPOTHESES), BootstrapConfig(samples=10, seed=3))
    counts[0] = 1  # the test set itself
    return counts


def test_caption_metrics_are_recomputed_exactly_on_every_resample():
    """CIDEr's document frequencies and BLEU's brevity penalty come from the resampled
    images: each resample's value is what pycocoevalcap gives scoring the resample as a
    test set of its own."""
    metrics = ["BLEU-1", "BLEU-4", "ROUGE-L", "CIDEr"]
    counts = resamples()
    hypotheses, references = dict(enumerate(HYPOTHESES)), dict(enumerate(REFERENCES))
    report = caption_scores(hypotheses, references, metrics, counts)
    for metric in metrics:
        assert report["resampled"][metric][0] == pytest.approx(report[metric], abs=1e-12)
    for row in (1, 2, 3):
        literal = caption_scores(*literal_resample(counts[row]), metrics)
        for metric in metrics:
            assert report["resampled"][metric][row] == pytest.approx(literal[metric], abs=1e-12)
    assert "resampled" not in caption_scores(hypotheses, references, metrics)


@pytest.mark.skipif(find_java() is None, reason="METEOR needs Java")
def test_meteor_scores_each_resample_s_summed_statistics():
    """METEOR's corpus score is not the mean of its segment scores; each resample's value
    is what METEOR gives the resample as a test set of its own (one Java process)."""
    from conceptual import resampled_metrics
    from conceptual.metrics import _meteor, coco_tokenize

    def tokenized(hypotheses, references):
        return (
            {i: [coco_tokenize(r) for r in refs] for i, refs in references.items()},
            {i: [coco_tokenize(h)] for i, h in hypotheses.items()},
        )

    counts = resamples()
    gts, res = tokenized(dict(enumerate(HYPOTHESES)), dict(enumerate(REFERENCES)))
    with _meteor() as meteor:
        resampled = resampled_metrics.meteor(meteor, gts, res, counts)
        whole, segments = meteor.compute_score(gts, res)
        assert resampled[0] == pytest.approx(whole, abs=1e-12)
        assert whole != pytest.approx(np.mean(segments))
        for row in (1, 2):
            literal, _ = meteor.compute_score(*tokenized(*literal_resample(counts[row])))
            assert resampled[row] == pytest.approx(literal, abs=1e-12)


def test_recall_is_resampled_by_image_with_all_its_queries():
    """Two images: the one caption of image 0 finds it, none of the three of image 1 does;
    image 0 is found from its side, image 1 is not. R@1 over a resample is the share of
    the drawn images' queries that found theirs."""
    from conceptual.metrics import recall_at_k
    from conceptual.pipelines.families.retriever.evaluate_retriever import (
        SELECT_BY,
        resampled_recall,
    )

    query_image = np.array([0, 1, 1, 1])
    relevant = np.eye(2, dtype=bool)[query_image]
    # Every caption ranks image 0 first; image 1 ranks caption 0 first.
    scores = np.array([[0.95, 0.9], [0.8, 0.2], [0.7, 0.3], [0.6, 0.1]])
    counts = np.array([[1, 1], [2, 0], [0, 2]])
    resampled = resampled_recall(scores, relevant, query_image, "text", counts)
    assert resampled["text_to_image.R@1"].tolist() == [0.25, 1.0, 0.0]
    assert resampled["image_to_text.R@1"].tolist() == [0.5, 1.0, 0.0]
    assert resampled["text_to_image.R@5"].tolist() == [1.0, 1.0, 1.0]
    assert resampled[SELECT_BY].tolist() == [1.0, 1.0, 1.0]
    # The test set itself (every image once) gives recall_at_k's value.
    assert resampled["text_to_image.R@1"][0] == recall_at_k(scores, relevant, (1,))[1]
    assert resampled["image_to_text.R@1"][0] == recall_at_k(scores.T, relevant.T, (1,))[1]
