import numpy as np
import pytest
import torch

from conceptual.models.captioner import Captioner, CaptionerConfig, features_tensor
from conceptual.models.decoding import greedy
from conceptual.models.losses import caption_loss
from conceptual.models.vocab import BOS, PAD, Vocabulary

VOCAB, FEATURE_DIM = 20, 16
VARIANTS = [(arch, kind) for arch in ("rnn", "transformer") for kind in ("1x1", "8x8")]


def small_model(architecture, feature_map, vocab_size=VOCAB, dropout=0.0):
    torch.manual_seed(0)
    config = CaptionerConfig(
        architecture=architecture,
        feature_map=feature_map,
        vocab_size=vocab_size,
        feature_dim=FEATURE_DIM,
        d_model=32,
        layers=2,
        heads=4,
        ffn=64,
        dropout=dropout,
    )
    return Captioner(config).eval()


def random_features(kind, images=3):
    return torch.randn(images, 1 if kind == "1x1" else 64, FEATURE_DIM)


def random_tokens(images=3, length=7):
    tokens = torch.randint(4, VOCAB, (images, length))
    tokens[:, 0] = BOS
    return tokens


@pytest.mark.parametrize("architecture, kind", VARIANTS)
def test_logits_have_one_row_per_token(architecture, kind):
    model = small_model(architecture, kind)
    logits = model(random_features(kind), random_tokens())
    assert logits.shape == (3, 7, VOCAB)


@pytest.mark.parametrize("architecture, kind", VARIANTS)
def test_a_later_token_does_not_change_earlier_logits(architecture, kind):
    model = small_model(architecture, kind)
    features, tokens = random_features(kind), random_tokens()
    changed = tokens.clone()
    changed[:, 4] = (tokens[:, 4] - 4 + 1) % (VOCAB - 4) + 4
    before, after = model(features, tokens), model(features, changed)
    torch.testing.assert_close(before[:, :4], after[:, :4])
    assert not torch.allclose(before[:, 4:], after[:, 4:])


@pytest.mark.parametrize("architecture, kind", VARIANTS)
def test_stepping_token_by_token_matches_teacher_forcing(architecture, kind):
    assert_steps_match_teacher_forcing(
        small_model(architecture, kind), random_features(kind), random_tokens()
    )


def assert_steps_match_teacher_forcing(model, features, tokens):
    """Decoding one token at a time, the state carried, gives teacher forcing's log-probs."""
    expected = model(features, tokens).log_softmax(-1)
    memory, state = model.encode(features), None
    for t in range(tokens.shape[1]):
        log_probs, state = model.step(memory, tokens[:, : t + 1], state)
        torch.testing.assert_close(log_probs, expected[:, t], atol=1e-5, rtol=1e-5)


def test_word_embeddings_are_the_only_word_matrix():
    model = small_model("transformer", "1x1")
    words = [name for name, p in model.named_parameters() if p.shape == (VOCAB, 32)]
    assert words == ["embed.weight"]


def test_features_tensor_reads_pooled_or_grid_cells_in_row_major_order():
    grid = np.random.rand(2, 8, 8, 5).astype(np.float32)
    pooled = grid.mean(axis=(1, 2))
    rows_pooled = [list(p) for p in pooled]  # as Arrow's to_pylist gives them
    rows_grid = [g.reshape(-1) for g in grid]
    assert features_tensor(rows_pooled, rows_grid, "1x1").shape == (2, 1, 5)
    cells = features_tensor(rows_pooled, rows_grid, "8x8")
    assert cells.shape == (2, 64, 5) and cells.dtype == torch.float32
    assert torch.equal(cells[1, 3 * 8 + 6], torch.from_numpy(grid[1, 3, 6]))


def tokens_tensor(encoded: list[list[int]]) -> torch.Tensor:
    """Encoded captions as one (B, T) tensor, padded at the end with <pad> (as the features
    dataset's tokens column is)."""
    tokens = torch.full((len(encoded), max(map(len, encoded))), PAD, dtype=torch.long)
    for row, ids in zip(tokens, encoded):
        row[: len(ids)] = torch.tensor(ids)
    return tokens


def test_tokens_tensor_pads_at_the_end():
    tokens = tokens_tensor([[1, 5, 2], [1, 5, 6, 7, 2]])
    assert tokens.tolist() == [[1, 5, 2, PAD, PAD], [1, 5, 6, 7, 2]]


def test_loss_ignores_padding():
    model = small_model("rnn", "1x1")
    features = random_features("1x1", images=1)
    short = tokens_tensor([[BOS, 5, 6, 2]])
    padded = torch.cat([short, torch.full((1, 3), PAD)], dim=1)
    torch.testing.assert_close(
        caption_loss(model, features, short), caption_loss(model, features, padded)
    )


def test_label_smoothing_spreads_target_mass_over_the_vocabulary_and_skips_padding():
    model = small_model("rnn", "1x1")
    features = random_features("1x1", images=2)
    tokens = tokens_tensor([[BOS, 5, 6, 2], [BOS, 7, 2]])  # the second row is padded
    log_probs = model(features, tokens[:, :-1]).log_softmax(-1)
    targets = tokens[:, 1:]
    real = targets != PAD
    nll = -log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)[real]
    uniform = -log_probs.mean(-1)[real]

    smoothed = caption_loss(model, features, tokens, label_smoothing=0.1)
    torch.testing.assert_close(smoothed, (0.9 * nll + 0.1 * uniform).mean())
    torch.testing.assert_close(caption_loss(model, features, tokens), nll.mean())


def test_weighted_loss_scales_captions_and_a_zero_weight_leaves_one_out():
    model = small_model("rnn", "1x1")
    features = random_features("1x1", images=2)
    tokens = tokens_tensor([[BOS, 5, 6, 2], [BOS, 7, 2]])  # 3 and 2 tokens to predict
    log_probs = model(features, tokens[:, :-1]).log_softmax(-1)
    nll = -log_probs.gather(-1, tokens[:, 1:].unsqueeze(-1)).squeeze(-1)
    first, second = nll[0].sum(), nll[1, :2].sum()

    ones = caption_loss(model, features, tokens, weights=torch.ones(2))
    torch.testing.assert_close(ones, caption_loss(model, features, tokens))
    # Rejected: the batch is the first caption alone.
    torch.testing.assert_close(
        caption_loss(model, features, tokens, weights=torch.tensor([1.0, 0.0])), first / 3
    )
    # Weighted: the second caption's loss counts 0.25, its tokens still count in the mean.
    torch.testing.assert_close(
        caption_loss(model, features, tokens, weights=torch.tensor([1.0, 0.25])),
        (first + 0.25 * second) / 5,
    )
    assert (
        caption_loss(model, features, tokens, weights=torch.zeros(2)) == 0
    )  # nothing left: no NaN


CAPTIONS = [
    "a cup of espresso on a saucer",
    "dog running on the beach",
    "actors attend the premiere at festival",
    "crowd at a concert",
    "a red car parked on the street",
    "person riding a bicycle in the park",
    "cuisine",
    "flowers in a glass vase on the table",
]


@pytest.fixture
def one_thread():
    """A model this small trains fastest on one thread, and stays fast on a busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("architecture", ["rnn", "transformer"])
def test_overfits_eight_captions(architecture, one_thread):
    vocab = Vocabulary.build(CAPTIONS, min_count=1)
    model = small_model(architecture, "1x1", vocab_size=len(vocab)).train()
    features = random_features("1x1", images=len(CAPTIONS))
    tokens = tokens_tensor([vocab.encode(caption) for caption in CAPTIONS])
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(300):
        loss = caption_loss(model, features, tokens)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.1 * losses[0]
    decoded = [vocab.decode(ids) for ids in greedy(model.eval(), features)]
    assert decoded == CAPTIONS


def test_the_transformer_computes_what_torchs_layers_compute_with_its_weights():
    """Models saved when the core was torch's nn.Transformer layers load, strictly, into
    those layers' parameter names, and give the same logits."""
    from torch import nn

    model = small_model("transformer", "8x8")
    layer = {"d_model": 32, "nhead": 4, "dim_feedforward": 64, "dropout": 0.0}
    layer |= {"batch_first": True, "norm_first": True}
    torchs = nn.Module()
    torchs.encoder = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(**layer), 2, norm=nn.LayerNorm(32), enable_nested_tensor=False
    )
    torchs.decoder = nn.TransformerDecoder(
        nn.TransformerDecoderLayer(**layer), 2, norm=nn.LayerNorm(32)
    )
    core = {k.removeprefix("core."): v for k, v in model.state_dict().items() if "core." in k}
    torchs.load_state_dict(core, strict=True)
    features, tokens = random_features("8x8"), random_tokens()
    encoded = torchs.encoder(model.project(features) + model.core.positions[:64])
    words = model.embed(tokens) * model.embed_scale + model.core.positions[:7]
    causal = nn.Transformer.generate_square_subsequent_mask(7)
    hidden = torchs.decoder(words, encoded, tgt_mask=causal, tgt_is_causal=True)
    expected = nn.functional.linear(hidden, model.embed.weight)
    torch.testing.assert_close(model(features, tokens), expected, atol=1e-5, rtol=1e-5)
