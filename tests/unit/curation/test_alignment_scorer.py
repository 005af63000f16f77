"""The alignment scorer (conceptual.vision.alignment): a saved text dual encoder loaded by
its path scores its own pairs above mismatched ones, with the model's own cosines, in
batches; a scorer that cannot be had is an error naming what to train or install."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch
from alignment_scorers import fitted, saved_scorer

from conceptual.models.saving import FeatureSettings, save_retriever
from conceptual.vision.alignment import (
    RetrieverScorer,
    ScorerError,
    load_scorer,
    parse_open_clip,
)
from conceptual.vision.cnn import FEATURE_CHANNELS

CAPTIONS = ["a dog runs", "a cat sleeps", "two men ride bikes", "a boat on water", "kids play"]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    images = torch.randn(
        len(CAPTIONS), FEATURE_CHANNELS, generator=torch.Generator().manual_seed(1)
    )
    path = saved_scorer(tmp_path_factory.mktemp("scorer") / "contrastive", CAPTIONS, images.numpy())
    model, _ = fitted(CAPTIONS, images.numpy())  # the same model, as trained
    return model, images, path


def test_a_saved_dual_encoder_scores_its_own_pairs_above_mismatched_ones(saved):
    model, images, path = saved
    scorer = load_scorer(str(path), device="cpu", batch_size=2)  # 5 pairs: three batches
    assert isinstance(scorer, RetrieverScorer) and scorer.reads == "embedding"
    true = scorer.score(images.numpy(), CAPTIONS)
    shifted = scorer.score(images.numpy(), CAPTIONS[1:] + CAPTIONS[:1])  # another's caption
    assert true.dtype == np.float32 and true.shape == (len(CAPTIONS),)
    assert (true > shifted).all()
    # The model's own cosines: its scores divided by its learned scale.
    with torch.no_grad():
        z = model(images, torch.as_tensor(scorer.vocab.encode_array(CAPTIONS, 32)))
    cosines = (z.diagonal() / model.log_scale.exp()).detach().numpy()
    assert np.allclose(true, cosines, atol=1e-5)
    assert np.all(np.abs(true) <= 1.0 + 1e-6)


def test_scores_do_not_depend_on_the_batch_size(saved):
    *_, images, path = saved
    one, many = load_scorer(str(path), "cpu", 1), load_scorer(str(path), "cpu", 64)
    assert np.allclose(one.score(images.numpy(), CAPTIONS), many.score(images.numpy(), CAPTIONS))


def test_wrong_image_vectors_are_refused(saved):
    *_, images, path = saved
    with pytest.raises(ValueError, match="image vectors"):
        load_scorer(str(path), "cpu").score(images.numpy()[:, :100], CAPTIONS)


def test_a_missing_scorer_names_what_to_train(tmp_path):
    with pytest.raises(ScorerError, match="conceptual.jobs.train_contrastive"):
        load_scorer(str(tmp_path / "nothing-here"))
    with pytest.raises(ScorerError, match="train_contrastive"):
        load_scorer(str(tmp_path))  # a folder, but no saved model in it


def test_a_scorer_over_other_features_is_refused(tmp_path):
    model, vocab = fitted(CAPTIONS, np.zeros((len(CAPTIONS), FEATURE_CHANNELS)), steps=0)
    other = FeatureSettings(model="efficientnet-lite0", image_size=224)
    save_retriever(model, tmp_path / "m", vocab, features=other)
    with pytest.raises(ScorerError, match="224 px"):
        load_scorer(str(tmp_path / "m"))


def test_open_clip_uris_name_an_architecture_and_weights():
    assert parse_open_clip("ViT-B-32@/models/b32.pt") == ("ViT-B-32", "/models/b32.pt")
    assert parse_open_clip("ViT-B-32@laion2b_s34b_b79k") == ("ViT-B-32", "laion2b_s34b_b79k")
    for spec in ("ViT-B-32", "@x.pt", "ViT-B-32@"):
        with pytest.raises(ScorerError, match="open_clip:ARCH@PATH_OR_TAG"):
            parse_open_clip(spec)


@pytest.mark.skipif(
    importlib.util.find_spec("open_clip") is not None, reason="open_clip is installed here"
)
def test_open_clip_without_the_package_names_what_to_install():
    with pytest.raises(ScorerError, match=r"pip install 'conceptual\[open_clip\]'"):
        load_scorer("open_clip:ViT-B-32@/models/b32.pt")
