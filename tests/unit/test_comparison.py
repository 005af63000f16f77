"""The comparison driver's shared parts: one variant parser for every family, one rule for
which variants are registered."""

import pytest

from conceptual.config import ConfigError
from conceptual.pipelines.compare_captioners import NAMED
from conceptual.pipelines.comparison import parse_variant, to_register
from conceptual.pipelines.train_captioner import TrainConfig


def test_a_captioner_variant_is_its_name_or_its_overrides():
    shared = TrainConfig(epochs=3, experiment="shared")
    name, config = parse_variant("rnn-8x8", shared, NAMED)
    assert name == "rnn-8x8"
    assert (config.model.architecture, config.model.feature_map) == ("rnn", "8x8")
    assert (config.epochs, config.experiment) == (3, "shared")
    name, config = parse_variant("wide: model.d_model=64 model.architecture=rnn", shared, NAMED)
    assert name == "wide" and (config.model.d_model, config.model.architecture) == (64, "rnn")
    assert config.model.feature_map == shared.model.feature_map


def test_an_unknown_captioner_variant_names_the_known_ones():
    with pytest.raises(ConfigError, match="unknown variant 'cnn-4x4'; the variants are rnn-1x1"):
        parse_variant("cnn-4x4", TrainConfig(experiment="x"), NAMED)


def test_the_best_all_or_no_variant_is_registered():
    ranked = ["first", "second", "third"]
    assert list(to_register(ranked, "best")) == ["first"]
    assert list(to_register(ranked, "all")) == ranked
    assert list(to_register(ranked, "none")) == []
    with pytest.raises(ConfigError, match="register must be one of"):
        to_register(ranked, "winners")
