import pytest
import torch

from conceptual.models.captioner import Captioner, CaptionerConfig
from conceptual.models.decoding import beam_search, greedy, n_best
from conceptual.models.vocab import BOS, EOS

VOCAB, FEATURE_DIM = 12, 16
ARCHITECTURES = ["rnn", "transformer"]


def random_model(architecture, feature_map="1x1"):
    """An untrained model: its captions are arbitrary, which is what these tests want."""
    torch.manual_seed(0)
    config = CaptionerConfig(
        architecture=architecture,
        feature_map=feature_map,
        vocab_size=VOCAB,
        feature_dim=FEATURE_DIM,
        d_model=32,
        layers=1,
        heads=4,
        ffn=64,
        dropout=0.0,
    )
    return Captioner(config).eval()


def caption_log_prob(model, features, words):
    """log P(words, <eos> | image), by teacher forcing."""
    tokens = torch.tensor([[BOS, *words, EOS]])
    log_probs = model(features.unsqueeze(0), tokens[:, :-1]).log_softmax(-1)
    return log_probs[0].gather(1, tokens[0, 1:].unsqueeze(1)).sum().item()


@pytest.fixture
def features():
    torch.manual_seed(1)
    return torch.randn(6, 1, FEATURE_DIM)


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_a_beam_of_one_is_greedy(architecture, features):
    model = random_model(architecture)
    assert beam_search(model, features, beam=1, max_tokens=8) == greedy(model, features, 8)


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_beam_search_finds_captions_at_least_as_likely_as_greedy(architecture, features):
    model = random_model(architecture)
    greedy_captions = greedy(model, features, max_tokens=8)
    beam_captions = beam_search(model, features, beam=4, max_tokens=8)
    for image, (by_greedy, by_beam) in enumerate(zip(greedy_captions, beam_captions)):
        beam_score = caption_log_prob(model, features[image], by_beam)
        assert beam_score >= caption_log_prob(model, features[image], by_greedy) - 1e-5
    assert beam_captions != greedy_captions  # else this test would show nothing


@pytest.mark.parametrize("decode", [greedy, beam_search])
def test_captions_hold_only_words_and_respect_the_limit(decode, features):
    model = random_model("transformer")
    captions = decode(model, features, max_tokens=3)
    assert len(captions) == len(features)
    assert all(len(words) <= 3 and min(words, default=4) >= 4 for words in captions)


def test_the_default_limit_is_the_models_words(features):
    model = random_model("rnn")
    assert all(len(words) <= 15 for words in beam_search(model, features))


def test_a_length_penalty_prefers_longer_captions(features):
    model = random_model("rnn")
    plain = beam_search(model, features, max_tokens=8)
    rewarded = beam_search(model, features, max_tokens=8, length_penalty=2.0)
    assert sum(map(len, rewarded)) > sum(map(len, plain))


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_n_best_lists_distinct_captions_best_first_led_by_beam_searchs(architecture, features):
    model = random_model(architecture)
    lists = n_best(model, features, beam=4, n=3, max_tokens=8)
    assert [best[0] for best in lists] == beam_search(model, features, beam=4, max_tokens=8)
    for image, captions in enumerate(lists):
        assert len(captions) == 3 and len({tuple(c) for c in captions}) == 3
        scores = [caption_log_prob(model, features[image], c) for c in captions]
        assert scores == sorted(scores, reverse=True)


@pytest.mark.parametrize("n", [0, 5])
def test_n_best_refuses_more_captions_than_beams(n, features):
    with pytest.raises(ValueError, match="between 1 and the beam size"):
        n_best(random_model("rnn"), features, beam=4, n=n)


def without_cache(model):
    """The model, decoding as it did before the key/value cache: every step rereads the
    whole caption so far."""
    step = model.step
    model.step = lambda memory, tokens, state=None: (step(memory, tokens)[0], None)
    return model


@pytest.mark.parametrize("feature_map", ["1x1", "8x8"])
def test_the_transformers_cache_changes_no_caption(feature_map):
    torch.manual_seed(2)
    features = torch.randn(5, 1 if feature_map == "1x1" else 64, FEATURE_DIM)
    cached = n_best(random_model("transformer", feature_map), features, beam=4, n=4)
    uncached = n_best(without_cache(random_model("transformer", feature_map)), features, 4, 4)
    assert cached == uncached
    assert greedy(random_model("transformer", feature_map), features) == greedy(
        without_cache(random_model("transformer", feature_map)), features
    )
