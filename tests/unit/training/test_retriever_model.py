import itertools
import json
import math

import numpy as np
import pytest
import torch

from conceptual.metrics import chance_recall, recall_at_k
from conceptual.models.captioner import Captioner, CaptionerConfig
from conceptual.models.losses import margin_at, match_mask, mms_loss, triplet_loss
from conceptual.models.retriever import (
    DualEncoder,
    ImageTower,
    RetrieverConfig,
    SpeechTower,
    TextTower,
)
from conceptual.models.saving import (
    FeatureSettings,
    SavedCaptioner,
    SavedRetriever,
    load,
    save_model,
    save_retriever,
)
from conceptual.models.vocab import BOS, EOS, PAD, Vocabulary
from conceptual.vision.cnn import FEATURE_CHANNELS

Z = torch.tensor([[2.0, 0.5, -1.0], [0.3, 1.5, 0.2], [-0.5, 1.0, 1.0]])
ALL = ~torch.eye(3, dtype=torch.bool)
TINY = dict(
    embed_dim=8,
    image_dim=12,
    image_hidden=16,
    n_mfcc=16,
    frames=21,
    speech_channels=[4, 8],
    text_d_model=16,
    text_heads=2,
    text_layers=2,
    max_tokens=8,
    vocab_size=24,
    dropout=0.0,
)


def term(positive, negatives, d):
    """-log(e^(positive - d) / (e^(positive - d) + sum of e^negative)), written out."""
    return -math.log(
        math.exp(positive - d) / (math.exp(positive - d) + sum(math.exp(z) for z in negatives))
    )


def test_mms_loss_is_the_spec_formula():
    d = 0.1
    rows = term(2.0, [0.5, -1.0], d) + term(1.5, [0.3, 0.2], d) + term(1.0, [-0.5, 1.0], d)
    columns = term(2.0, [0.3, -0.5], d) + term(1.5, [0.5, 1.0], d) + term(1.0, [-1.0, 0.2], d)
    assert mms_loss(Z, ALL, d).item() == pytest.approx(rows / 3 + columns / 3, rel=1e-6)


def test_mms_loss_leaves_out_a_duplicate_image():
    d = 0.1
    mask = match_mask(torch.tensor([0, 1, 0]))  # images 0 and 2 are the same
    rows = term(2.0, [0.5], d) + term(1.5, [0.3, 0.2], d) + term(1.0, [1.0], d)
    columns = term(2.0, [0.3], d) + term(1.5, [0.5, 1.0], d) + term(1.0, [0.2], d)
    assert mms_loss(Z, mask, d).item() == pytest.approx(rows / 3 + columns / 3, rel=1e-6)
    changed = Z.clone()
    changed[0, 2], changed[2, 0] = 50.0, -50.0
    assert mms_loss(changed, mask, d).item() == pytest.approx(mms_loss(Z, mask, d).item())
    assert mms_loss(changed, ALL, d) > mms_loss(Z, ALL, d) + 10


def test_a_larger_margin_gives_a_larger_mms_loss():
    assert mms_loss(Z, ALL, 0.5) > mms_loss(Z, ALL, 0.1) > mms_loss(Z, ALL, 0.0)


def test_mms_loss_is_finite_for_large_scores():
    loss = mms_loss(Z * 1000, ALL, 0.1)
    assert torch.isfinite(loss)


def test_triplet_loss_takes_the_negative_the_mask_leaves():
    """Pairs 0 and 1 each have one valid negative (each other); pair 2 has none. The 5.0
    entries are masked out and would dominate if drawn."""
    scores = torch.tensor([[1.0, 0.8, 5.0], [0.2, 1.0, 5.0], [5.0, 5.0, 0.0]])
    mask = torch.tensor([[0, 1, 0], [1, 0, 0], [0, 0, 0]]).bool()
    # row 0: max(0, 0.8 - 1 + 0.5) = 0.3; column 0: max(0, 0.2 - 1 + 0.5) = 0
    # row 1: max(0, 0.2 - 1 + 0.5) = 0;   column 1: max(0, 0.8 - 1 + 0.5) = 0.3
    for seed in range(5):
        generator = torch.Generator().manual_seed(seed)
        assert triplet_loss(scores, mask, 0.5, generator).item() == pytest.approx(0.6 / 3)


def test_triplet_loss_is_zero_when_positives_win_by_more_than_the_margin():
    scores = torch.full((4, 4), 0.5) + torch.eye(4) * 1.5  # positives 2.0, negatives 0.5
    mask = ~torch.eye(4, dtype=torch.bool)
    assert triplet_loss(scores, mask, 1.0).item() == 0.0
    # margin 2: each row and each column adds 0.5 - 2 + 2 = 0.5; the mean over 4 pairs is 1
    assert triplet_loss(scores, mask, 2.0).item() == pytest.approx(1.0)


def test_match_mask_marks_shared_images_and_captions():
    mask = match_mask(torch.tensor([3, 7, 3, 5]), torch.tensor([0, 1, 2, 1]))
    expected = torch.tensor([[0, 1, 0, 1], [1, 0, 1, 0], [0, 1, 0, 1], [1, 0, 1, 0]]).bool()
    assert torch.equal(mask, expected)
    assert torch.equal(mask, mask.T) and not mask.diagonal().any()
    assert torch.equal(match_mask(torch.arange(4)), ~torch.eye(4, dtype=torch.bool))


def test_the_margin_grows_every_thousand_steps():
    assert margin_at(0) == 0.001
    assert margin_at(999) == 0.001
    assert margin_at(1000) == pytest.approx(0.001 * 1.002)
    assert margin_at(2500) == pytest.approx(0.001 * 1.002**2)


def test_recall_counts_the_best_relevant_target_and_ties_against_it():
    scores = np.array(
        [
            [0.9, 0.5, 0.7, 0.1, 0.3],  # relevant 1, 2: best 0.7, one target above -> rank 1
            [0.5, 0.5, 0.2, 0.9, 0.1],  # relevant 0: one tie and one above -> rank 2, not 1
            [0.1, 0.2, 0.3, 0.4, 0.5],  # relevant 0, 4: best is first -> rank 0
        ]
    )
    relevant = np.zeros((3, 5), dtype=bool)
    relevant[0, [1, 2]] = relevant[1, 0] = relevant[2, [0, 4]] = True
    expected = {1: 1 / 3, 2: 2 / 3, 3: 1.0, 10: 1.0}
    assert recall_at_k(scores, relevant, ks=(1, 2, 3, 10)) == pytest.approx(expected)
    from_tensors = recall_at_k(torch.tensor(scores), torch.tensor(relevant), ks=(1, 2, 3, 10))
    assert from_tensors == pytest.approx(expected)


def test_recall_over_many_queries_matches_a_loop():
    """More queries than one chunk, integer scores so that ties are common."""
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 10, size=(2500, 40)).astype(np.float32)
    relevant = rng.random((2500, 40)) < 0.05
    relevant[np.arange(2500), rng.integers(0, 40, 2500)] = True
    ranks = [
        np.sum(~r & (s >= s[r].max())) for s, r in zip(scores, relevant)
    ]  # the reference, one query at a time
    expected = {k: float(np.mean(np.array(ranks) < k)) for k in (1, 5, 10, 50)}
    assert recall_at_k(scores, relevant, ks=(1, 5, 10, 50)) == pytest.approx(expected)
    assert recall_at_k(scores, relevant, ks=(50,))[50] == 1.0  # k > T


def test_recall_refuses_queries_without_a_relevant_target_and_nan_scores():
    relevant = np.eye(3, dtype=bool)
    with pytest.raises(ValueError, match="relevant target"):
        recall_at_k(np.zeros((3, 3)), relevant & [True, True, False])
    with pytest.raises(ValueError, match="NaN"):
        recall_at_k(np.full((3, 3), np.nan), relevant)


def test_chance_recall_is_exact():
    relevant = np.zeros((1, 5), dtype=bool)
    relevant[0, :2] = True
    assert chance_recall(relevant, ks=(2,))[2] == pytest.approx(1 - 3 / 10)  # 1 - C(3,2)/C(5,2)


def test_chance_recall_matches_every_ranking_enumerated():
    relevant = np.zeros((3, 5), dtype=bool)
    relevant[0, 0] = relevant[1, [1, 3]] = relevant[2, [0, 2, 4]] = True
    ks = (1, 2, 3, 5, 10)
    found = {k: 0 for k in ks}
    orders = list(itertools.permutations(range(5)))
    for order, row in itertools.product(orders, relevant):
        first_hit = min(position for position, target in enumerate(order) if row[target])
        for k in ks:
            found[k] += first_hit < k
    expected = {k: found[k] / (len(orders) * len(relevant)) for k in ks}
    assert chance_recall(relevant, ks) == pytest.approx(expected)


def model(modality, **overrides):
    return DualEncoder(RetrieverConfig(modality=modality, **{**TINY, **overrides}))


def tokens(*rows):
    """Rows of word ids as <bos> ... <eos>, padded to max_tokens."""
    out = torch.full((len(rows), TINY["max_tokens"]), PAD)
    for row, ids in zip(out, rows):
        row[: len(ids) + 2] = torch.tensor([BOS, *ids, EOS])
    return out


def queries(modality, n, generator=None):
    if modality == "speech":
        # MFCC-like: the 0th coefficient far larger than the rest
        mfcc = torch.randn(n, TINY["n_mfcc"], TINY["frames"], generator=generator)
        mfcc[:, 0] = mfcc[:, 0] * 20 - 300
        return mfcc
    return tokens(*[[4 + i % 20, 4 + (i * 7) % 20][: 1 + i % 2] for i in range(n)])


def test_the_towers_give_one_embedding_per_example():
    config = RetrieverConfig(modality="text", **TINY)
    assert ImageTower(config)(torch.randn(3, 12)).shape == (3, 8)
    assert SpeechTower(config)(queries("speech", 3)).shape == (3, 8)
    for architecture in ("transformer", "lstm"):
        tower = TextTower(config.model_copy(update={"text_architecture": architecture}))
        assert tower(tokens([5], [6, 7, 8], [9, 10, 11, 12, 13, 14])).shape == (3, 8)
        assert tower(tokens([5], [6, 7])[:, :5]).shape == (2, 8)  # shorter than max_tokens


def test_the_text_tower_ignores_padding():
    """A caption alone gives the same embedding as with padding after it."""
    for architecture in ("transformer", "lstm"):
        torch.manual_seed(0)
        tower = model("text", text_architecture=architecture).query.eval()
        padded = tokens([5, 6, 7])
        assert torch.allclose(tower(padded[:, :5]), tower(padded), atol=1e-5)


def test_the_cnn_speech_tower_sees_each_matrix_standardized():
    torch.manual_seed(0)
    tower = model("speech", speech_tower="cnn").query.eval()
    mfcc = queries("speech", 2)
    assert torch.allclose(tower(mfcc * 3 + 7), tower(mfcc), atol=1e-4)


@pytest.mark.parametrize(
    "modality, overrides",
    [
        ("speech", {}),
        ("speech", {"speech_tower": "cnn"}),
        ("speech", {"normalize": False}),
        ("text", {}),
        ("text", {"text_architecture": "lstm", "text_layers": 1}),
    ],
)
def test_gradients_reach_every_parameter(modality, overrides):
    torch.manual_seed(0)
    encoder = model(modality, **overrides)
    assert encoder.query_input == ("mfcc" if modality == "speech" else "tokens")
    assert hasattr(encoder, "log_scale") == encoder.config.normalize
    features = torch.randn(4, 12)
    loss = mms_loss(encoder(features, queries(modality, 4)), match_mask(torch.arange(4)), 0.1)
    loss.backward()
    for name, parameter in encoder.named_parameters():
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0, name


def test_scores_are_scaled_cosines_or_plain_dot_products():
    a, b = torch.randn(3, 8), torch.randn(5, 8)
    assert torch.allclose(model("speech", normalize=False).scores(a, b), a @ b.T)
    encoder = model("speech")
    images, speech = (
        encoder.embed_images(torch.randn(3, 12)),
        encoder.embed_queries(queries("speech", 5)),
    )
    assert torch.allclose(images.norm(dim=1), torch.ones(3))
    assert torch.allclose(encoder.scores(images, speech), 10 * images @ speech.T)
    with torch.no_grad():
        encoder.log_scale.fill_(10.0)
    assert torch.allclose(encoder.scores(images, speech), 100 * images @ speech.T)


@pytest.mark.parametrize("modality", ["speech", "text"])
def test_training_on_separable_pairs_lowers_the_loss(modality):
    generator = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    encoder = model(modality)
    features, batch = torch.randn(16, 12, generator=generator), queries(modality, 16, generator)
    mask = match_mask(torch.arange(16))
    optimizer = torch.optim.Adam(encoder.parameters(), lr=3e-3)
    losses = []
    for _ in range(50):
        loss = mms_loss(encoder(features, batch), mask, 0.001)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]


def trained_looking(modality, **overrides):
    """A small model whose weights are not the ones a fresh model would get."""
    torch.manual_seed(0)
    encoder = model(modality, **overrides)
    with torch.no_grad():
        for parameter in encoder.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.1)
    encoder(torch.randn(4, 12), queries(modality, 4))  # BatchNorm running statistics move
    return encoder.eval()


def test_a_speech_retriever_round_trip_gives_identical_embeddings(tmp_path):
    encoder = trained_looking("speech")
    audio = {"n_mfcc": 16, "seconds": 0.2, "cmvn": True}
    save_retriever(encoder, tmp_path / "retriever", audio=audio)
    saved = load(tmp_path / "retriever")
    loaded = saved.model
    assert isinstance(saved, SavedRetriever)
    assert loaded.config == encoder.config and not loaded.training
    assert saved.vocab is None and saved.audio == audio
    features, mfcc = torch.randn(3, 12), queries("speech", 3)
    assert torch.equal(loaded.embed_images(features), encoder.embed_images(features))
    assert torch.equal(loaded.embed_queries(mfcc), encoder.embed_queries(mfcc))
    saved = json.loads((tmp_path / "retriever" / "config.json").read_text())
    assert saved["kind"] == "retriever" and saved["format_version"] == 2


def test_a_speech_retriever_saved_before_the_defaults_moved_reads_as_the_spec(tmp_path):
    """Saved without `cmvn` and `n_mfcc` (audio) or `speech_tower` (model): the spec's 128 raw
    MFCCs and 2-D CNN."""
    encoder = trained_looking("speech", speech_tower="cnn")
    save_retriever(encoder, tmp_path / "old", audio={"seconds": 3.5})
    config_file = tmp_path / "old" / "config.json"
    saved = json.loads(config_file.read_text())
    del saved["config"]["speech_tower"]
    config_file.write_text(json.dumps(saved))
    loaded = load(tmp_path / "old")
    assert loaded.audio == {"seconds": 3.5, "n_mfcc": 128, "cmvn": False}
    assert loaded.model.config.speech_tower == "cnn"
    mfcc = queries("speech", 2)
    assert torch.equal(loaded.model.embed_queries(mfcc), encoder.embed_queries(mfcc))


def test_the_conv1d_speech_tower_reads_any_length_and_round_trips(tmp_path):
    encoder = trained_looking("speech", speech_tower="conv1d", speech_channels=[8, 16])
    assert encoder.embed_queries(queries("speech", 2)).shape == (2, TINY["embed_dim"])
    longer = torch.randn(2, TINY["n_mfcc"], 3 * TINY["frames"])  # 8 s of a 3.5 s model
    assert encoder.embed_queries(longer).shape == (2, TINY["embed_dim"])
    save_retriever(encoder, tmp_path / "conv1d", audio={"n_mfcc": TINY["n_mfcc"]})
    loaded = load(tmp_path / "conv1d").model
    mfcc = queries("speech", 3)
    assert loaded.config.speech_tower == "conv1d"
    assert torch.equal(loaded.embed_queries(mfcc), encoder.embed_queries(mfcc))


@pytest.mark.parametrize("architecture", ["transformer", "lstm"])
def test_a_text_retriever_round_trip_gives_identical_embeddings(tmp_path, architecture):
    vocab = Vocabulary([*Vocabulary.build([]).tokens, *(f"w{i}" for i in range(20))])
    encoder = trained_looking("text", text_architecture=architecture)
    save_retriever(encoder, tmp_path, vocab=vocab)
    saved = load(tmp_path, kind=SavedRetriever)
    assert saved.vocab.tokens == vocab.tokens and saved.audio is None
    batch = queries("text", 3)
    assert torch.equal(saved.model.embed_queries(batch), encoder.embed_queries(batch))


def test_a_retriever_keeps_the_cnn_settings_of_its_features(tmp_path):
    features = FeatureSettings(model="efficientnet-lite0", image_size=224)
    save_retriever(model("speech"), tmp_path / "recorded", features=features)
    assert load(tmp_path / "recorded", kind=SavedRetriever).features == features
    # Saved before they were recorded: none, and the server takes its index's.
    save_retriever(model("speech"), tmp_path / "older")
    assert "features" not in json.loads((tmp_path / "older" / "config.json").read_text())
    assert load(tmp_path / "older", kind=SavedRetriever).features is None


def test_a_text_retriever_needs_its_vocabulary():
    encoder = model("text")
    with pytest.raises(ValueError, match="vocabulary"):
        save_retriever(encoder, "unused")
    with pytest.raises(ValueError, match="vocabulary"):
        save_retriever(encoder, "unused", vocab=Vocabulary.build(["a b"], min_count=1))
    with pytest.raises(ValueError, match="vocab_size"):
        RetrieverConfig(modality="text", image_dim=12)


# ---------------------------------------------------------------- a fine-tuned CNN

PHOTO = 32  # pixels a side: the CNN's 1/32 map is then one cell, and a step is quick
FINETUNE = {"image_backbone": "finetune", "image_size": PHOTO, "image_dim": FEATURE_CHANNELS}


def pixels(n, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (n, 3, PHOTO, PHOTO), dtype=torch.uint8, generator=generator)


def test_a_finetune_image_tower_reads_pixels_through_the_pretrained_cnn():
    encoder = model("text", **FINETUNE).eval()
    assert encoder.config.photo_size == PHOTO and model("text").config.photo_size is None
    assert encoder.image.backbone is not None and model("text").image.backbone is None
    assert not hasattr(encoder.image.backbone, "_fc")  # no ImageNet classifier to carry
    embeddings = encoder.embed_images(pixels(3))
    assert embeddings.shape == (3, 8) and torch.allclose(embeddings.norm(dim=1), torch.ones(3))
    # The ImageNet weights as the features job has them (whatever the seed).
    torch.manual_seed(1)
    again = model("text", **FINETUNE)
    assert torch.equal(
        again.image.backbone._conv_stem.weight, encoder.image.backbone._conv_stem.weight
    )


def test_gradients_reach_the_finetuned_cnn():
    torch.manual_seed(0)
    encoder = model("text", **FINETUNE)
    loss = mms_loss(encoder(pixels(4), queries("text", 4)), match_mask(torch.arange(4)), 0.1)
    loss.backward()
    for name, parameter in encoder.named_parameters():
        assert parameter.grad is not None, name
    backbone = encoder.image.backbone
    for layer in (backbone._conv_stem, backbone._blocks[0]._project_conv, backbone._conv_head):
        assert layer.weight.grad.abs().sum() > 0


def test_the_finetuned_cnn_is_its_own_optimizer_group_at_a_lower_rate():
    encoder = model("text", **FINETUNE, backbone_lr_scale=0.05)
    rest, cnn = encoder.optimizer_groups()
    assert cnn["lr_scale"] == 0.05 and "lr_scale" not in rest
    backbone = {id(p) for p in encoder.image.backbone.parameters()}
    assert {id(p) for p in cnn["params"]} == backbone
    everything = [id(p) for p in encoder.parameters()]
    assert sorted(everything) == sorted(id(p) for p in rest["params"] + cnn["params"])
    [whole] = model("text").optimizer_groups()  # features mode: one group
    assert len(whole["params"]) == len(list(model("text").parameters()))


def test_a_finetune_retriever_round_trip_holds_its_cnn(tmp_path):
    vocab = Vocabulary([*Vocabulary.build([]).tokens, *(f"w{i}" for i in range(20))])
    torch.manual_seed(0)
    encoder = model("text", **FINETUNE)
    with torch.no_grad():
        for parameter in encoder.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.01)
    encoder(pixels(4), queries("text", 4))  # the CNN's BatchNorm statistics move
    encoder.eval()
    save_retriever(encoder, tmp_path, vocab=vocab)

    saved = json.loads((tmp_path / "config.json").read_text())["config"]
    assert (saved["image_backbone"], saved["image_size"]) == ("finetune", PHOTO)
    loaded = load(tmp_path, kind=SavedRetriever).model
    assert loaded.config == encoder.config
    # Its own weights, not the pretrained ones a fresh model loads.
    stem = "image.backbone._conv_stem.weight"
    assert torch.equal(loaded.state_dict()[stem], encoder.state_dict()[stem])
    assert not torch.equal(loaded.state_dict()[stem], model("text", **FINETUNE).state_dict()[stem])
    batch = pixels(3, seed=1)
    assert torch.equal(loaded.embed_images(batch), encoder.embed_images(batch))


def test_image_init_random_starts_the_cnn_from_scratch_and_the_seed_decides(tmp_path):
    pretrained = model("text", **FINETUNE).image.backbone
    torch.manual_seed(0)
    scratch = model("text", **FINETUNE, image_init="random")
    torch.manual_seed(0)
    same = model("text", **FINETUNE, image_init="random")
    torch.manual_seed(1)
    other = model("text", **FINETUNE, image_init="random")
    stem = scratch.image.backbone._conv_stem.weight
    assert stem.shape == pretrained._conv_stem.weight.shape  # the same network...
    assert not torch.equal(stem, pretrained._conv_stem.weight)  # ...not its ImageNet weights
    assert torch.equal(stem, same.image.backbone._conv_stem.weight)
    assert not torch.equal(stem, other.image.backbone._conv_stem.weight)
    assert scratch.embed_images(pixels(2)).shape == (2, 8)
    # Saved and loaded as any fine-tuned retriever: its own weights, no ImageNet file read.
    vocab = Vocabulary([*Vocabulary.build([]).tokens, *(f"w{i}" for i in range(20))])
    save_retriever(scratch.eval(), tmp_path, vocab=vocab)
    loaded = load(tmp_path, kind=SavedRetriever).model
    assert loaded.config.image_init == "random"
    assert torch.equal(loaded.image.backbone._conv_stem.weight, stem)


def test_image_init_random_needs_the_cnn_in_the_model():
    with pytest.raises(ValueError, match="image_backbone=finetune"):
        model("text", image_init="random")


def test_a_loader_asked_for_a_kind_refuses_the_others(tmp_path):
    vocab = Vocabulary.build(["a dog on the beach"], min_count=1)
    captioner = Captioner(
        CaptionerConfig(
            architecture="rnn", feature_map="1x1", vocab_size=len(vocab), feature_dim=12, d_model=8
        )
    )
    save_model(captioner, vocab, tmp_path / "captioner")
    save_retriever(model("speech"), tmp_path / "retriever")
    assert isinstance(load(tmp_path / "captioner"), SavedCaptioner)
    with pytest.raises(ValueError, match="holds a captioner, not a retriever"):
        load(tmp_path / "captioner", kind=SavedRetriever)
    with pytest.raises(ValueError, match="holds a retriever, not a captioner"):
        load(tmp_path / "retriever", kind=SavedCaptioner)
    # captioners saved before retrievers existed say no kind
    path = tmp_path / "captioner" / "config.json"
    saved = json.loads(path.read_text())
    del saved["kind"]
    path.write_text(json.dumps(saved))
    load(tmp_path / "captioner", kind=SavedCaptioner)
    with pytest.raises(ValueError, match="holds a captioner"):
        load(tmp_path / "captioner", kind=SavedRetriever)
