"""Decoding over the static key/value cache (models.static_cache), eager and compiled, gives
today's captions: greedy and beam 4, on a Transformer trained to caption its images; so does
its bf16 copy (models.decoding.for_decoding on a GPU), run here on the CPU."""

import copy

import pytest
import torch

from conceptual.models.captioner import Captioner, CaptionerConfig
from conceptual.models.decoding import (
    beam_search,
    decoding_dtype,
    for_decoding,
    greedy,
    n_best,
    padded_rows,
)
from conceptual.models.losses import caption_loss
from conceptual.models.static_cache import _DECODERS, StaticDecoder
from conceptual.models.vocab import BOS, EOS, PAD

IMAGES, WORDS, FEATURE_DIM = 6, 20, 16


@pytest.fixture(scope="module")
def trained():
    """A small 8x8 Transformer trained until it writes each image's own caption, and the
    images' features: its captions are confident, as a trained model's are."""
    torch.manual_seed(0)
    config = CaptionerConfig(
        feature_map="8x8", vocab_size=WORDS, feature_dim=FEATURE_DIM, d_model=32, layers=2,
        heads=4, ffn=64, dropout=0.0, max_tokens=10,
    )  # fmt: skip
    model = Captioner(config)
    features = torch.randn(IMAGES, 64, FEATURE_DIM)
    first_word = PAD + 4  # past the special tokens
    captions = torch.randint(first_word, WORDS, (IMAGES, 6))
    tokens = torch.cat(
        [torch.full((IMAGES, 1), BOS), captions, torch.full((IMAGES, 1), EOS)], dim=1
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(300):
        optimizer.zero_grad()
        caption_loss(model, features, tokens).backward()
        optimizer.step()
    model.eval()
    assert greedy(model, features) == captions.tolist()  # it learned its captions
    return model, features


def decoded(model, features, cache, compiled=False):
    return (
        greedy(model, features, cache=cache, compiled=compiled),
        n_best(model, features, beam=4, n=4, cache=cache, compiled=compiled),
    )


def test_the_static_cache_gives_todays_captions(trained):
    model, features = trained
    assert decoded(model, features, "static") == decoded(model, features, "dynamic")
    # a second batch, of another size, through the same decoders
    assert decoded(model, features[:2], "static") == decoded(model, features[:2], "dynamic")


def test_compiled_decoding_gives_the_eager_captions(trained):
    """At fixed sizes: 6 images (greedy's 6 rows, beam 4's 24) run at 8 and 32 rows, and 5
    images (5 and 20) replay those."""
    model, features = trained
    with torch.inference_mode():  # as the caption job and serving decode
        for images in (IMAGES, IMAGES - 1):
            assert decoded(model, features[:images], "static", compiled=True) == decoded(
                model, features[:images], "dynamic"
            )
    assert {rows for rows, _, compiled in _DECODERS[model] if compiled} == {8, 32}
    decoder = StaticDecoder.for_rows(model, padded_rows(IMAGES * 4), compiled=True)
    assert decoder._step is not decoder._eager_step  # it compiled, it did not fall back


def test_the_rnn_decodes_as_always():
    torch.manual_seed(0)
    config = CaptionerConfig(architecture="rnn", feature_map="1x1", vocab_size=WORDS,
                             feature_dim=FEATURE_DIM, d_model=16)  # fmt: skip
    model = Captioner(config).eval()
    features = torch.randn(3, 1, FEATURE_DIM)
    assert decoded(model, features, "static", compiled=True) == decoded(model, features, "dynamic")


def test_a_transformer_decodes_in_bf16_on_gpus_only():
    transformer = Captioner(CaptionerConfig(vocab_size=WORDS, d_model=32, layers=1, heads=4))
    rnn = Captioner(CaptionerConfig(architecture="rnn", vocab_size=WORDS, d_model=16))
    gpu, cpu = torch.device("cuda"), torch.device("cpu")
    assert decoding_dtype(transformer, gpu) == torch.bfloat16
    assert decoding_dtype(transformer, cpu) == decoding_dtype(rnn, gpu) == torch.float32
    ready = for_decoding(transformer.train(), cpu)
    assert not ready.training and ready.embed.weight.dtype == torch.float32


def test_the_bf16_copy_gives_the_float32_captions(trained):
    """The GPU's decoding copy, its weights cast once (greedy and beam 4's best, both caches)."""
    model, features = trained
    bf16 = copy.deepcopy(model).to(torch.bfloat16)
    half = features.to(torch.bfloat16)
    for cache in ("dynamic", "static"):
        assert greedy(bf16, half, cache=cache) == greedy(model, features)
        assert beam_search(bf16, half, cache=cache) == beam_search(model, features)
