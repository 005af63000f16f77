"""The four-view fluency classifier on tiny inputs (conceptual.fluency.model), its saved form,
the in-process scorer, and the held-out scoring helpers of pipelines/families/fluency/evaluate_fluency.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from conceptual.fluency.model import (
    VIEWS,
    FluencyConfig,
    FluencyModel,
    encode,
    predict,
    scores,
)
from conceptual.models.losses import fluency_loss
from conceptual.models.vocab import PAD, Vocabulary

VIEW_TEXTS = {
    "zh_words": ["一只 狗 在 跑 。", "两个 孩子 在 踢 足球", "一只 猫 。"],
    "zh_pos": ["m n p v x", "m n p v n", "m n x"],
    "en_words": ["A dog runs .", "Two children play soccer", None],
    "en_pos": ["DT NN VBZ .", "CD NNS VBP NN", None],
}


def tiny(seed: int = 0) -> tuple[FluencyModel, dict[str, Vocabulary]]:
    torch.manual_seed(seed)
    vocabs = {
        view: Vocabulary.build([t for t in texts if t], 1) for view, texts in VIEW_TEXTS.items()
    }
    config = FluencyConfig(
        embed_dim=8,
        hidden=8,
        dropout=0.0,
        max_tokens=10,
        vocab_sizes={view: len(vocab) for view, vocab in vocabs.items()},
    )
    return FluencyModel(config).eval(), vocabs


def columns(vocabs, max_tokens: int = 10) -> dict[str, np.ndarray]:
    return encode(VIEW_TEXTS, vocabs, max_tokens)


def tensors(cols: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    return {k: torch.as_tensor(v) for k, v in cols.items()}


def test_encode_pads_each_view_and_counts_its_ids():
    _, vocabs = tiny()
    cols = columns(vocabs)
    assert {k: v.shape for k, v in cols.items()} == {
        **{view: (3, 10) for view in VIEWS},
        "lengths": (3, 4),
    }
    # <bos>, the words, <eos>; a missing view is all padding, length 0.
    assert cols["lengths"].tolist() == [[7, 7, 6, 6], [7, 7, 6, 6], [5, 5, 0, 0]]
    assert (cols["en_words"][2] == PAD).all()


def test_logits_per_view_and_the_score_is_the_mean_of_the_present_views():
    model, vocabs = tiny()
    batch = tensors(columns(vocabs))
    logits = model(**batch)
    assert logits.shape == (3, 4, 2)
    p = model.probabilities(**batch).detach().numpy()
    assert p.shape == (3, 4) and ((p > 0) & (p < 1)).all()
    s = scores(p, batch["lengths"])
    assert s.dtype == np.float32
    np.testing.assert_allclose(s[:2], p[:2].mean(axis=1), rtol=1e-6)
    np.testing.assert_allclose(s[2], p[2, :2].mean(), rtol=1e-6)  # no source: Chinese views
    assert scores(p, np.zeros((3, 4), dtype=np.int64)).tolist() == [0.0, 0.0, 0.0]  # no view


def test_a_view_reads_its_last_real_token_so_padding_changes_nothing():
    model, vocabs = tiny()
    narrow = predict(model, columns(vocabs, max_tokens=8))
    wide = predict(model, columns(vocabs, max_tokens=30))
    np.testing.assert_allclose(narrow, wide, rtol=1e-5, atol=1e-6)
    # A row scored alone gives what it gives in its batch (the batch is cut to its longest).
    alone = predict(model, {k: v[2:] for k, v in columns(vocabs).items()})
    np.testing.assert_allclose(alone[0], narrow[2], rtol=1e-5, atol=1e-6)
    # Missing source views do not touch the Chinese ones.
    cols = columns(vocabs)
    cols["en_words"][0], cols["en_pos"][0], cols["lengths"][0, 2:] = PAD, PAD, 0
    np.testing.assert_allclose(predict(model, cols)[0, :2], narrow[0, :2], rtol=1e-5)


def test_the_loss_leaves_out_missing_views_and_trains_each_one():
    model, vocabs = tiny()
    model.train()
    batch = tensors(columns(vocabs))
    label = torch.tensor([1, 0, 1])
    logits = model(**batch)
    value = fluency_loss(logits, batch["lengths"], label)
    present = batch["lengths"] > 0
    expected = torch.nn.functional.cross_entropy(
        logits[present], label[:, None].expand(3, 4)[present]
    )
    torch.testing.assert_close(value, expected)
    value.backward()
    assert all(model.views[v].out.weight.grad.abs().sum() > 0 for v in VIEWS)


def test_config_needs_a_vocabulary_per_view():
    with pytest.raises(ValueError, match="vocab_sizes"):
        FluencyConfig(vocab_sizes={"zh_words": 10})


def test_saved_model_loads_with_its_vocabularies_and_scores_the_same(tmp_path):
    from conceptual.models.saving import SavedCaptioner, SavedFluency, load, save_fluency

    model, vocabs = tiny()
    save_fluency(model, vocabs, tmp_path / "fluency")
    saved = load(tmp_path / "fluency")
    assert isinstance(saved, SavedFluency)
    loaded, loaded_vocabs = saved.model, saved.vocabs
    assert {v: x.tokens for v, x in loaded_vocabs.items()} == {
        v: x.tokens for v, x in vocabs.items()
    }
    np.testing.assert_array_equal(
        predict(loaded, columns(loaded_vocabs)), predict(model, columns(vocabs))
    )
    with pytest.raises(ValueError, match="holds a fluency, not a captioner"):
        load(tmp_path / "fluency", kind=SavedCaptioner)
    wrong = {**vocabs, "zh_pos": Vocabulary.build(["a b"], 1)}
    with pytest.raises(ValueError, match="vocabulary"):
        save_fluency(model, wrong, tmp_path / "wrong")


def test_the_scorer_scores_sentences_with_and_without_a_source(tmp_path):
    from conceptual.fluency.scorer import FluencyScorer
    from conceptual.models.saving import save_fluency

    model, vocabs = tiny()
    save_fluency(model, vocabs, tmp_path / "fluency")
    scorer = FluencyScorer(tmp_path / "fluency")
    chinese = ["一只狗在跑。", "一只狗在跑。", "", None]
    english = ["A dog runs .", None, "A dog runs .", None]
    p, lengths = scorer.view_probabilities(chinese, english)
    assert (lengths > 0).tolist() == [
        [True, True, True, True],
        [True, True, False, False],
        [False, False, True, True],
        [False, False, False, False],
    ]
    s = scorer.score(chinese, english)
    assert s.shape == (4,) and s[3] == 0.0
    np.testing.assert_allclose(s[1], p[1, :2].mean(), rtol=1e-6)
    np.testing.assert_allclose(s[2], p[2, 2:].mean(), rtol=1e-6)
    assert scorer.score(["一只狗在跑。"])[0] == pytest.approx(s[1])  # no sources given


def test_held_out_scores_and_the_length_rule():
    from conceptual.metrics import auc, binary_scores
    from conceptual.pipelines.families.fluency.evaluate_fluency import length_rule

    labels = np.array([True, True, False, False, False])
    assert binary_scores(np.array([True, False, True, False, False]), labels) == {
        "precision": 0.5,
        "recall": 0.5,
        "F1": 0.5,
        "predicted_fluent": 0.4,
    }
    assert binary_scores(np.zeros(5, bool), labels)["F1"] == 0.0
    assert auc(np.array([0.9, 0.8, 0.1, 0.2, 0.3]), labels) == 1.0
    assert auc(np.array([0.5] * 5), labels) == 0.5  # ties count half
    assert np.isnan(auc(np.ones(3), np.ones(3, bool)))
    # Shorter sentences are the fluent ones here; two of five are: at most 5 words.
    lengths = np.array([[5, 5, 5, 5], [7, 7, 6, 6], [9, 9, 6, 6], [11, 11, 6, 6], [12, 12, 6, 6]])
    dev = {"columns": {"lengths": lengths}, "labels": labels}
    assert length_rule(dev) == (True, 5)
    assert length_rule({**dev, "labels": ~labels}) == (False, 7)
