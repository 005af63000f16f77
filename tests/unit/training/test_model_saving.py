import json

import pytest
import torch
from safetensors.torch import load_file

from conceptual.models.captioner import Captioner, CaptionerConfig
from conceptual.models.inference import ImageCaptioner
from conceptual.models.saving import (
    DEFAULT_BEAM,
    LEGACY_FEATURES,
    FeatureSettings,
    SavedCaptioner,
    load,
    save_model,
)
from conceptual.models.vocab import Vocabulary

CAPTIONS = ["a dog on the beach", "a cat on a sofa"]


def trained_looking(architecture, kind, vocab):
    """A small model whose weights are not the ones a fresh model would get."""
    torch.manual_seed(0)
    config = CaptionerConfig(
        architecture=architecture,
        feature_map=kind,
        vocab_size=len(vocab),
        feature_dim=16,
        d_model=32,
        layers=1,
        heads=4,
        ffn=64,
    )
    model = Captioner(config).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.1)
    return model


@pytest.mark.parametrize("architecture, kind", [("rnn", "1x1"), ("transformer", "8x8")])
def test_round_trip_gives_identical_logits(tmp_path, architecture, kind):
    vocab = Vocabulary.build(CAPTIONS, min_count=1)
    model = trained_looking(architecture, kind, vocab)
    save_model(model, vocab, tmp_path / "model")
    saved = load(tmp_path / "model")
    loaded, loaded_vocab = saved.model, saved.vocab
    assert isinstance(saved, SavedCaptioner)
    assert loaded.config == model.config and not loaded.training
    assert loaded_vocab.tokens == vocab.tokens
    features = torch.randn(2, 1 if kind == "1x1" else 64, 16)
    tokens = torch.tensor([vocab.encode(c) for c in ["a dog on a sofa", "a cat on the beach"]])
    assert torch.equal(loaded(features, tokens), model(features, tokens))


def test_the_tied_word_matrix_is_saved_once(tmp_path):
    vocab = Vocabulary.build(CAPTIONS, min_count=1)
    save_model(trained_looking("transformer", "1x1", vocab), vocab, tmp_path)
    weights = load_file(tmp_path / "model.safetensors")
    assert [name for name, w in weights.items() if w.shape == (len(vocab), 32)] == ["embed.weight"]


def test_refuses_an_unknown_format_version(tmp_path):
    vocab = Vocabulary.build(CAPTIONS, min_count=1)
    save_model(trained_looking("rnn", "1x1", vocab), vocab, tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    saved["format_version"] = 99
    (tmp_path / "config.json").write_text(json.dumps(saved))
    with pytest.raises(ValueError, match="format version 99; this code reads versions 1, 2"):
        load(tmp_path)


def test_refuses_a_vocabulary_of_another_size(tmp_path):
    vocab = Vocabulary.build(CAPTIONS, min_count=1)
    model = trained_looking("rnn", "1x1", vocab)
    with pytest.raises(ValueError, match="vocabulary"):
        save_model(model, Vocabulary.build(CAPTIONS, min_count=2), tmp_path)


def test_reads_a_version_1_model_whose_config_says_features(tmp_path):
    """Models registered before the config was nested name the feature map `features`."""
    vocab = Vocabulary.build(CAPTIONS, min_count=1)
    model = trained_looking("transformer", "8x8", vocab)
    save_model(model, vocab, tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    saved["format_version"] = 1
    saved["config"]["features"] = saved["config"].pop("feature_map")
    (tmp_path / "config.json").write_text(json.dumps(saved))
    loaded = load(tmp_path).model
    assert loaded.config == model.config and loaded.config.feature_map == "8x8"


def test_a_captioner_keeps_the_image_size_of_its_features(tmp_path):
    vocab = Vocabulary.build(CAPTIONS, min_count=1)
    features = FeatureSettings(model="efficientnet-lite0", image_size=224)
    save_model(trained_looking("transformer", "8x8", vocab), vocab, tmp_path, features)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["features"] == {"model": "efficientnet-lite0", "image_size": 224}
    assert load(tmp_path).features == features


def test_a_captioner_saved_without_its_features_reads_as_the_old_defaults(tmp_path):
    """Captioners saved before the entry existed were trained on 256 px EfficientNet-lite0."""
    vocab = Vocabulary.build(CAPTIONS, min_count=1)
    save_model(trained_looking("rnn", "1x1", vocab), vocab, tmp_path)
    assert "features" not in json.loads((tmp_path / "config.json").read_text())
    assert load(tmp_path).features == LEGACY_FEATURES
    assert LEGACY_FEATURES == FeatureSettings(model="efficientnet-lite0", image_size=256)


def test_a_captioner_of_a_cnn_this_code_cannot_load_is_named(tmp_path):
    vocab = Vocabulary.build(CAPTIONS, min_count=1)
    save_model(trained_looking("rnn", "1x1", vocab), vocab, tmp_path, LEGACY_FEATURES)
    saved = json.loads((tmp_path / "config.json").read_text())
    saved["features"]["model"] = "efficientnet-lite4"
    (tmp_path / "config.json").write_text(json.dumps(saved))
    saved = load(tmp_path)  # the model loads: evaluation over saved features needs no CNN
    with pytest.raises(ValueError, match="'efficientnet-lite4', which this code cannot load"):
        _ = saved.features


def test_a_captioner_keeps_the_beam_it_was_evaluated_at(tmp_path):
    """Serving and the caption job decode at the saved beam by default (the paper's 5 for
    the fluency captioner), so a caption they write is one the evaluation scored."""
    vocab = Vocabulary.build(CAPTIONS, min_count=1)
    save_model(trained_looking("rnn", "1x1", vocab), vocab, tmp_path / "five", beam=5)
    assert json.loads((tmp_path / "five" / "config.json").read_text())["decoding"] == {"beam": 5}
    assert load(tmp_path / "five").beam == 5
    assert ImageCaptioner(tmp_path / "five").beam == 5
    assert ImageCaptioner(tmp_path / "five", beam=2).beam == 2  # asked for: another beam

    save_model(trained_looking("rnn", "1x1", vocab), vocab, tmp_path / "old")
    saved = json.loads((tmp_path / "old" / "config.json").read_text())
    del saved["decoding"]  # as saved before the entry existed
    (tmp_path / "old" / "config.json").write_text(json.dumps(saved))
    assert load(tmp_path / "old").beam == DEFAULT_BEAM == 4


def test_a_captioners_features_are_the_vision_steps_vectors_and_caption_alike(tmp_path):
    """Recaptioning reads its scorer's image vectors from the captioner's own CNN pass (its
    `features`, which `captions` decodes from): they are what the vision step's extractor
    gives the same photo."""
    import numpy as np
    from PIL import Image

    from conceptual.vision.cnn import FeatureExtractor

    vocab = Vocabulary.build(CAPTIONS, min_count=1)
    save_model(trained_looking("rnn", "1x1", vocab), vocab, tmp_path / "m")
    captioner = ImageCaptioner(tmp_path / "m")
    rng = np.random.default_rng(0)
    images = [Image.fromarray(rng.integers(0, 256, (300, 240, 3), np.uint8)) for _ in range(3)]
    extracted = captioner.features(images)
    pooled = np.stack([vector for vector, _ in extracted])
    np.testing.assert_allclose(pooled, FeatureExtractor().pooled(images), rtol=1e-5, atol=1e-6)
