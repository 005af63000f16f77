"""What issue 34 adds to retriever training, without Ray: the distillation loss on a
constructed batch, the growing margin's schedule, and warm starts one tower at a time."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from test_retriever_model import TINY  # the same tiny towers (pytest puts this folder on the path)

from conceptual.config import load
from conceptual.models.losses import distillation_loss
from conceptual.models.retriever import DualEncoder, RetrieverConfig
from conceptual.models.saving import save_retriever
from conceptual.models.vocab import Vocabulary
from conceptual.pipelines.families.retriever.train_retriever import (
    MarginConfig,
    RetrieverTrainConfig,
    Teacher,
    retriever_config,
    tower_weights,
)

VOCAB = Vocabulary([*Vocabulary.build([]).tokens, *(f"w{i}" for i in range(20))])  # 24 ids


def scaled(targets, queries):
    return targets @ queries.T * 20


def test_cosine_distillation_is_zero_on_the_teacher_and_one_when_orthogonal():
    targets = F.normalize(torch.randn(4, 8), dim=-1)
    groups = torch.arange(4)
    assert distillation_loss(targets * 3, targets, groups, "cosine", scaled).item() == (
        pytest.approx(0, abs=1e-6)
    )
    orthogonal = torch.eye(8)[:4], torch.eye(8)[4:]
    assert distillation_loss(*orthogonal, groups, "cosine", scaled).item() == pytest.approx(1)


def test_mms_distillation_rewards_each_clip_nearest_its_own_caption():
    targets = torch.eye(8)[:4]
    groups = torch.arange(4)
    right = distillation_loss(targets, targets, groups, "mms", scaled)
    swapped = distillation_loss(targets[[1, 0, 3, 2]], targets, groups, "mms", scaled)
    assert right.item() < 1e-6 < 10 < swapped.item()
    # Two clips of one caption: their copies are masked, not each other's negatives.
    same = torch.stack([targets[0], targets[0], targets[1], targets[2]])
    masked = distillation_loss(same, same, torch.tensor([0, 0, 1, 2]), "mms", scaled)
    assert masked.item() < 1e-6


def test_the_margin_grows_every_fraction_of_a_step_up_to_its_cap():
    paper = MarginConfig(every=1000, max=math.inf)
    assert paper.at(999) == 0.001 and paper.at(1000) == pytest.approx(0.001 * 1.002)
    ours = MarginConfig()  # ten growths a step, capped where the paper's run ended
    assert ours.at(0) == 0.001
    assert ours.at(30) == pytest.approx(0.001 * 1.002**300)
    assert ours.at(300) == pytest.approx(0.001 * 1.002**3000, rel=0.01)
    assert ours.at(100_000) == 0.4
    assert MarginConfig.model_validate(0.01).start == 0.01  # margin=X: the start alone


def test_init_is_the_whole_model_or_one_tower_each():
    config = load(RetrieverTrainConfig, None, ["init=runs:/abc/model"])
    assert config.init.model == "runs:/abc/model" and config.init.towers() == {}
    config = load(RetrieverTrainConfig, None, ["init.speech=/s", "init.image=/i"])
    assert config.init.model is None and config.init.towers() == {"image": "/i", "speech": "/s"}


def saved(tmp_path, name, modality, **overrides):
    model = DualEncoder(RetrieverConfig(modality=modality, **TINY))
    for parameter in model.parameters():
        torch.nn.init.normal_(parameter)
    if modality == "text":
        save_retriever(model, tmp_path / name, vocab=VOCAB)
    else:
        save_retriever(model, tmp_path / name, audio={"seconds": 0.2, "n_mfcc": 16})
    return model, str(tmp_path / name)


def test_each_tower_loads_from_its_own_saved_model(tmp_path):
    text, text_dir = saved(tmp_path, "text", "text")
    speech, speech_dir = saved(tmp_path, "speech", "speech")
    config = RetrieverConfig(modality="speech", **TINY)
    weights = tower_weights({"image": text_dir, "speech": speech_dir}, config)
    model = DualEncoder(config)
    model.load_state_dict(weights)
    for name, tensor in text.image.state_dict().items():
        assert torch.equal(model.image.state_dict()[name], tensor)
    for name, tensor in speech.query.state_dict().items():
        assert torch.equal(model.query.state_dict()[name], tensor)
    assert torch.equal(model.log_scale, text.log_scale)  # the scale its image scores had
    only_speech = tower_weights({"speech": speech_dir}, config)
    assert not torch.equal(only_speech["image.mlp.0.weight"], text.image.mlp[0].weight)


def test_a_tower_that_does_not_fit_is_refused_before_training(tmp_path):
    _, text_dir = saved(tmp_path, "text", "text")
    _, speech_dir = saved(tmp_path, "speech", "speech")
    config = RetrieverConfig(modality="speech", **TINY)
    with pytest.raises(ValueError, match="is a text retriever"):
        tower_weights({"speech": text_dir}, config)
    with pytest.raises(ValueError, match="trains a speech tower"):
        tower_weights({"text": text_dir}, config)
    wider = config.model_copy(update={"image_hidden": 32})
    with pytest.raises(ValueError, match="does not fit this run's model settings"):
        tower_weights({"image": speech_dir}, wider)
    assert tower_weights({}, config) is None


def test_a_taught_speech_model_takes_the_teachers_image_tower_and_space(tmp_path):
    text, _ = saved(tmp_path, "text", "text")
    teacher = Teacher(text, VOCAB)
    run = RetrieverTrainConfig(modality="speech", model={"embed_dim": 64, "image_hidden": 32})
    config = retriever_config(run, 12, None, teacher)
    assert (config.embed_dim, config.image_hidden) == (8, 16)
    model = DualEncoder(config.model_copy(update={"n_mfcc": 16, "frames": 21}))
    model.load_state_dict(tower_weights({}, model.config, teacher))
    features = torch.randn(3, 12)
    assert torch.equal(model.eval().embed_images(features), text.embed_images(features))
    embedded = teacher.embed_captions(["w1 w2", "w3"])
    assert embedded.shape == (2, 8)
