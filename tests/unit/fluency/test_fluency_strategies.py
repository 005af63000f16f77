"""Fluency-guided captioner training (docs/spec/fluency.md) on constructed batches: each
strategy's weights, and which rows reach the workers."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
import torch

from conceptual.models.captioner import CaptionerSettings
from conceptual.models.losses import sample_weights
from conceptual.models.vocab import Vocabulary
from conceptual.pipelines.families.captioner.train_captioner import CaptionerTrainConfig, _examples

SCORES = torch.tensor([0.9, 0.51, 0.5, 0.3, 0.05, 0.0])


def test_none_and_only_weights():
    assert sample_weights(SCORES, "none").tolist() == [1.0] * 6
    assert sample_weights(SCORES, "only").tolist() == [1, 1, 0, 0, 0, 0]  # above 0.5


def test_weighted_loss_keeps_fluent_captions_whole_and_scales_the_rest_by_their_score():
    torch.testing.assert_close(
        sample_weights(SCORES, "weighted"), torch.tensor([1.0, 1.0, 0.5, 0.3, 0.05, 0.0])
    )


def test_rejection_sampling_accepts_a_caption_when_its_score_beats_u_below_one_half():
    generator = torch.Generator().manual_seed(0)
    u = torch.rand(SCORES.shape, generator=generator) * 0.5
    generator.manual_seed(0)
    weights = sample_weights(SCORES, "rejection", generator)
    expected = (SCORES > 0.5) | (SCORES > u)
    assert weights.tolist() == expected.float().tolist()


def test_rejection_sampling_draws_anew_each_time_with_acceptance_2f():
    """Over many draws a caption of score f < 0.5 enters with probability 2f; a fluent one
    always; a score of 0 never."""
    scores = torch.tensor([0.9, 0.4, 0.1, 0.0]).repeat(20_000, 1)
    generator = torch.Generator().manual_seed(1)
    accepted = sample_weights(scores.flatten(), "rejection", generator).view(-1, 4).mean(0)
    torch.testing.assert_close(accepted, torch.tensor([1.0, 0.8, 0.2, 0.0]), atol=0.01, rtol=0)


def batch() -> pa.Table:
    return pa.table(
        {
            "split": ["train", "train", "val", "train"],
            "caption": ["一只 狗", "一只 猫", "一条 船", "一辆 车"],
            "pooled": [[float(i)] * 2 for i in range(4)],
            "grid": [[float(i)] * 8 for i in range(4)],
            "fluency": pa.array([0.9, 0.2, 0.9, 0.7], pa.float32()),
        }
    )


@pytest.mark.parametrize(
    "strategy, rows, reads_fluency",
    [("none", 3, False), ("only", 2, False), ("rejection", 3, True), ("weighted", 3, True)],
)
def test_rows_for_each_strategy(strategy, rows, reads_fluency):
    """ "only" drops unfluent rows before the workers; rejection and weighting hand the
    score to the loss; the dev split never trains."""
    vocab = Vocabulary.build(batch()["caption"].to_pylist(), min_count=1)
    settings = CaptionerSettings(feature_map="1x1", max_tokens=5)
    examples = _examples(batch(), vocab, settings, (1, 2), np.float32, strategy)
    assert examples["features"].shape == (rows, 1, 2)
    assert examples["tokens"].shape == (rows, 5)
    assert ("fluency" in examples) is reads_fluency
    if strategy == "only":
        assert examples["features"][:, 0, 0].tolist() == [0.0, 3.0]
    if reads_fluency:
        assert examples["fluency"].dtype == np.float32
        np.testing.assert_allclose(examples["fluency"], [0.9, 0.2, 0.7], rtol=1e-6)


def test_a_fluency_strategy_needs_translated_captions():
    with pytest.raises(ValueError, match="set language"):
        CaptionerTrainConfig(fluency="rejection")
    assert CaptionerTrainConfig(language="zh", fluency="rejection").fluency == "rejection"
