"""The fluency paper's captioner recipe (configs/recipes/fluency_captioner.yaml): the image
as the LSTM's first input, L2-normalized features, the vocabulary's threshold and the
learning rate's decay every ten epochs."""

import pytest
import torch

from conceptual.config import load
from conceptual.models.captioner import Captioner, CaptionerConfig
from conceptual.pipelines.families.captioner.train_captioner import CaptionerTrainConfig
from conceptual.pipelines.training.training import epoch_learning_rate


@pytest.fixture
def recipe(repo) -> CaptionerTrainConfig:
    return load(CaptionerTrainConfig, repo / "configs" / "recipes" / "fluency_captioner.yaml")


def test_the_recipe_is_the_papers_captioner(recipe):
    model = recipe.model
    assert (model.architecture, model.feature_map, model.d_model) == ("rnn", "1x1", 512)
    assert model.image_input == "first_step" and model.l2_normalize
    assert recipe.language == "zh" and recipe.min_count == 5 and recipe.beam == 5
    assert (recipe.lr, recipe.lr_decay, recipe.lr_decay_epochs) == (0.001, 0.999, 10)
    assert recipe.lr_schedule == "exponential_epochs"
    # "We use SGD with mini-batches" (section 3.2): plain SGD, not Adam
    assert recipe.optimizer == "sgd" and recipe.momentum == 0.0


def test_the_recipes_optimizer_is_plain_sgd(recipe):
    from conceptual.pipelines.training.training import make_optimizer

    optimizer = make_optimizer(recipe, tiny(), torch.device("cpu"))
    assert type(optimizer) is torch.optim.SGD
    assert optimizer.defaults["lr"] == 0.001 and optimizer.defaults["momentum"] == 0.0


def test_the_rate_decays_by_0999_every_ten_epochs(recipe):
    rates = [epoch_learning_rate(recipe, epoch) for epoch in (0, 9, 10, 19, 20)]
    assert rates == pytest.approx([1e-3, 1e-3, 0.999e-3, 0.999e-3, 0.999**2 * 1e-3])


def tiny(**settings) -> Captioner:
    torch.manual_seed(0)
    config = CaptionerConfig(
        architecture="rnn", feature_map="1x1", d_model=8, dropout=0.0, vocab_size=11,
        feature_dim=4, **settings,
    )  # fmt: skip
    return Captioner(config).eval()


def test_the_image_is_the_caption_lstms_first_input():
    model = tiny(image_input="first_step")
    assert model.core.encoder is None  # one LSTM: no encoder weights saved untrained
    assert not any(name.startswith("core.encoder") for name in model.state_dict())
    features = torch.randn(3, 1, 4)
    tokens = torch.tensor([[1, 5, 6, 2]] * 3)
    # Reading the image, then the words, in one pass of the caption LSTM (x_-1, x_0, ...).
    inputs = torch.cat([model.project(features), model.embed(tokens) * model.embed_scale], 1)
    out, _ = model.core.decoder(inputs)
    expected = torch.nn.functional.linear(out[:, 1:], model.embed.weight)
    torch.testing.assert_close(model(features, tokens), expected)
    assert "core.encoder.weight_ih_l0" in tiny().state_dict()  # the default keeps its encoder


def test_l2_normalized_features_make_the_image_scale_irrelevant():
    features, tokens = torch.randn(2, 1, 4), torch.tensor([[1, 5, 2], [1, 6, 2]])
    normalized = tiny(l2_normalize=True)
    torch.testing.assert_close(normalized(features, tokens), normalized(7 * features, tokens))
    plain = tiny()
    assert not torch.allclose(plain(features, tokens), plain(7 * features, tokens))


def test_old_saved_configs_load_with_the_previous_behaviour():
    config = CaptionerConfig.model_validate({"architecture": "rnn", "vocab_size": 5})
    assert config.image_input == "state" and not config.l2_normalize


def test_compare_fluency_trains_every_captioner_with_the_recipe(repo):
    from conceptual.jobs.compare_fluency import with_train_config
    from conceptual.pipelines.families.fluency.compare_fluency import FluencyComparisonConfig

    path = str(repo / "configs" / "recipes" / "fluency_captioner.yaml")
    overrides = ["train.epochs=3", "rerank=2"]
    config = with_train_config(FluencyComparisonConfig(rerank=2), path, overrides)
    assert config.train.model.image_input == "first_step" and config.train.epochs == 3
    assert config.rerank == 2 and config.strategies == FluencyComparisonConfig().strategies
    assert with_train_config(config, None, overrides) is config
