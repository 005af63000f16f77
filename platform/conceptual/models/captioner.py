"""The captioning models of docs/spec/captioning.md: an encoder over the image's CNN embeddings and
a decoder that writes the caption token by token.

- "rnn" (Show and Tell): an LSTM reads the image cells, its final state starts the caption
  LSTM; no attention.
- "transformer" (T2T base): pre-norm encoder and decoder layers, sinusoidal positions on the
  image cells (0..63 in row-major order for 8x8) and on the tokens, causal self-attention,
  all through `scaled_dot_product_attention` (flash attention on GPUs). Decoding keeps each
  layer's keys and values, so a step reads only the newest token.

Both project the features to `d_model` and tie the word embeddings to the output layer
(the logits are the decoder states times the embedding matrix), so there is one word matrix.

    model = Captioner(CaptionerConfig(feature_map="8x8", vocab_size=len(vocab)))
    features = features_tensor(batch["pooled"], batch["grid"], "8x8")   # (B, 64, 1280)
    tokens = vocab.encode_array(batch["caption"], model.config.max_tokens)  # padded with <pad>
    loss = caption_loss(model, features, torch.from_numpy(tokens))  # models.losses
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F
from pydantic import AliasChoices, ConfigDict, Field
from torch import Tensor, nn

from conceptual.config import Config
from conceptual.models.variants import Language

FeatureKind = Literal["1x1", "8x8"]
# The most image cells the transformer has positions for: the 8x8 grid.
MAX_CELLS = 64

# What the encoder hands the decoder, and what the decoder carries from step to step: one
# tensor or a tuple of tensors, batch first (so decoding can reorder beams with one index).
Memory = Tensor | tuple[Tensor, ...]
State = tuple[Tensor, ...] | None


class CaptionerSettings(Config):
    """The model's shape and regularization: the `model.*` keys of the training config."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    architecture: Literal["rnn", "transformer"] = "transformer"
    # `features` before the rename: saved models and older callers still say it.
    feature_map: FeatureKind = Field(
        "8x8", validation_alias=AliasChoices("feature_map", "features")
    )
    d_model: int = 512  # word embedding size, LSTM units, transformer width
    layers: int = 6  # transformer only: encoder layers, and as many decoder layers
    heads: int = 8  # transformer only
    ffn: int = 2048  # transformer only: feed-forward width
    dropout: float = 0.1
    max_tokens: int = 17  # longest token sequence: 15 words + <bos> and <eos>
    # rnn only: how the image reaches the caption LSTM. "state": an encoder LSTM reads the
    # cells and its final state starts the caption LSTM; "first_step": the caption LSTM
    # reads them itself before <bos> (Show and Tell's x_-1, the fluency paper's recipe).
    image_input: Literal["state", "first_step"] = "state"
    # Each image vector scaled to unit length before the projection (the fluency paper's
    # L2-normalized ResNet features): the projection then sees one scale for every photo.
    l2_normalize: bool = False


class CaptionerConfig(CaptionerSettings):
    """The settings and what the data decides: the vocabulary and the CNN's channels."""

    vocab_size: int
    feature_dim: int = 1280
    # The language it writes (models saved before languages existed: English). Chinese
    # captions are words joined by spaces, like English ones (conceptual.text.chinese).
    language: Language = "en"


def features_tensor(pooled: Sequence, grid: Sequence, kind: FeatureKind) -> Tensor:
    """Model input (B, L, C) from FEATURES columns (lists, arrays or one array per row):
    the pooled vectors for "1x1" (L=1), the grid's cells in row-major order for "8x8"."""
    if kind == "1x1":
        return torch.from_numpy(_stack(pooled)).unsqueeze(1)
    channels = len(pooled[0])  # the pooled vector is the channel mean of the grid
    cells = _stack(grid)
    return torch.from_numpy(cells.reshape(len(cells), -1, channels))


def _stack(rows: Sequence) -> np.ndarray:
    return np.stack([np.asarray(row, dtype=np.float32) for row in rows])


def sinusoids(length: int, dim: int) -> Tensor:
    """The Transformer's fixed position encodings: (length, dim)."""
    position = torch.arange(length, dtype=torch.float32).unsqueeze(1)
    frequency = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(1e4) / dim))
    encoding = torch.zeros(length, dim)
    encoding[:, 0::2] = torch.sin(position * frequency)
    encoding[:, 1::2] = torch.cos(position * frequency)
    return encoding


class RnnCore(nn.Module):
    """Show and Tell: the LSTM state after reading the image cells is the memory and starts
    the caption; the reader is an encoder LSTM, or the caption LSTM itself (image_input)."""

    def __init__(self, config: CaptionerConfig):
        super().__init__()
        self.dropout = nn.Dropout(config.dropout)
        self.decoder = nn.LSTM(config.d_model, config.d_model, batch_first=True)
        # No encoder with "first_step": its weights would be saved and never trained.
        self.encoder = (
            nn.LSTM(config.d_model, config.d_model, batch_first=True)
            if config.image_input == "state"
            else None
        )

    def encode(self, cells: Tensor) -> Memory:
        _, (h, c) = (self.encoder or self.decoder)(self.dropout(cells))
        return h[0], c[0]  # one layer: (B, d) each

    def decode(self, memory: Memory, words: Tensor, state: State) -> tuple[Tensor, State]:
        """Reads `words` after the state (the memory at the start); returns every step's
        output and the state after the last one."""
        h, c = state or memory
        out, (h, c) = self.decoder(self.dropout(words), (h.unsqueeze(0), c.unsqueeze(0)))
        return self.dropout(out), (h[0], c[0])


# The Transformer's modules carry the parameter names of torch's nn.TransformerEncoderLayer
# and nn.TransformerDecoderLayer (self_attn.in_proj_weight, linear1, norm1, ...): models
# saved when the core was built from those load unchanged.


class Attention(nn.Module):
    """Multi-head attention; the query, key and value projections are stacked in one matrix."""

    def __init__(self, config: CaptionerConfig):
        super().__init__()
        d = config.d_model
        self.heads, self.dropout = config.heads, config.dropout
        self.in_proj_weight = nn.Parameter(torch.empty(3 * d, d))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * d))
        self.out_proj = nn.Linear(d, d)
        nn.init.xavier_uniform_(self.in_proj_weight)
        nn.init.zeros_(self.out_proj.bias)

    def queries(self, x: Tensor) -> Tensor:
        d = x.shape[-1]
        return self._split(F.linear(x, self.in_proj_weight[:d], self.in_proj_bias[:d]))

    def keys_values(self, x: Tensor) -> tuple[Tensor, Tensor]:
        d = x.shape[-1]
        keys, values = F.linear(x, self.in_proj_weight[d:], self.in_proj_bias[d:]).chunk(2, -1)
        return self._split(keys), self._split(values)

    def forward(
        self,
        x: Tensor,
        keys: Tensor,
        values: Tensor,
        causal: bool = False,
        mask: Tensor | None = None,
    ) -> Tensor:
        """x (B, T, d) attends to keys and values (B, heads, S, d/heads); `mask` (True:
        attended, broadcast to B, heads, T, S) is the static cache's (models.static_cache)."""
        dropout = self.dropout if self.training else 0.0
        out = F.scaled_dot_product_attention(
            self.queries(x), keys, values, attn_mask=mask, dropout_p=dropout, is_causal=causal
        )
        return self.out_proj(out.transpose(1, 2).flatten(2))

    def _split(self, x: Tensor) -> Tensor:
        """(B, T, d) -> (B, heads, T, d/heads)."""
        return x.unflatten(-1, (self.heads, -1)).transpose(1, 2)


class Layer(nn.Module):
    """Self-attention (and cross-attention to the image cells, in a decoder layer), then the
    feed-forward block: created in this order, as torch's layers create them, so the same
    seed gives the same initial weights."""

    def __init__(self, config: CaptionerConfig, cross_attention: bool):
        super().__init__()
        self.self_attn = Attention(config)
        if cross_attention:
            self.multihead_attn = Attention(config)
        self.linear1 = nn.Linear(config.d_model, config.ffn)
        self.linear2 = nn.Linear(config.ffn, config.d_model)
        self.dropout = nn.Dropout(config.dropout)
        self.norm1 = nn.LayerNorm(config.d_model)
        self.norm2 = nn.LayerNorm(config.d_model)
        if cross_attention:
            self.norm3 = nn.LayerNorm(config.d_model)

    def feed_forward(self, x: Tensor) -> Tensor:
        return self.dropout(self.linear2(self.dropout(F.relu(self.linear1(x)))))


class EncoderLayer(Layer):
    def __init__(self, config: CaptionerConfig):
        super().__init__(config, cross_attention=False)

    def forward(self, x: Tensor) -> Tensor:
        normed = self.norm1(x)
        x = x + self.dropout(self.self_attn(normed, *self.self_attn.keys_values(normed)))
        return x + self.feed_forward(self.norm2(x))


class DecoderLayer(Layer):
    def __init__(self, config: CaptionerConfig):
        super().__init__(config, cross_attention=True)

    def forward(
        self, x: Tensor, cells: tuple[Tensor, Tensor], cache: tuple[Tensor, Tensor] | None
    ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """`cells`: the image cells' keys and values; `cache`: the earlier tokens' keys and
        values (None: `x` is the whole caption so far, attended causally). Returns the new
        cache."""
        normed = self.norm1(x)
        keys, values = self.self_attn.keys_values(normed)
        if cache is not None:  # decoding: x is the newest token, which sees every earlier one
            keys, values = torch.cat([cache[0], keys], 2), torch.cat([cache[1], values], 2)
        x = x + self.dropout(self.self_attn(normed, keys, values, causal=cache is None))
        x = x + self.dropout(self.multihead_attn(self.norm2(x), *cells))
        return x + self.feed_forward(self.norm3(x)), (keys, values)


class Stack(nn.Module):
    """`n` layers, then a LayerNorm (pre-norm layers leave their output unnormalized). The
    layers start as copies of one, as torch's nn.TransformerEncoder starts them, so runs
    begin where the models trained before this module began."""

    def __init__(self, layer: nn.Module, n: int, d_model: int):
        super().__init__()
        self.layers = nn.ModuleList(copy.deepcopy(layer) for _ in range(n))
        self.norm = nn.LayerNorm(d_model)


class TransformerCore(nn.Module):
    """The memory is every decoder layer's keys and values of the encoded image cells:
    computed once per image, they serve every decoding step."""

    def __init__(self, config: CaptionerConfig):
        super().__init__()
        self.dropout = nn.Dropout(config.dropout)
        self.encoder = Stack(EncoderLayer(config), config.layers, config.d_model)
        self.decoder = Stack(DecoderLayer(config), config.layers, config.d_model)
        positions = sinusoids(max(MAX_CELLS, config.max_tokens), config.d_model)
        self.register_buffer("positions", positions, persistent=False)

    def encode(self, cells: Tensor) -> Memory:
        x = self.dropout(cells + self.positions[: cells.shape[1]])
        for layer in self.encoder.layers:
            x = layer(x)
        encoded = self.encoder.norm(x)
        return tuple(
            t for layer in self.decoder.layers for t in layer.multihead_attn.keys_values(encoded)
        )

    def decode(self, memory: Memory, words: Tensor, state: State) -> tuple[Tensor, State]:
        """Reads `words` after the tokens whose keys and values `state` holds (None: none);
        the state after them is the layers' (keys, values), flattened."""
        start = 0 if state is None else state[0].shape[2]
        x = self.dropout(words + self.positions[start : start + words.shape[1]])
        caches = []
        for i, layer in enumerate(self.decoder.layers):
            cache = None if state is None else state[2 * i : 2 * i + 2]
            x, cache = layer(x, memory[2 * i : 2 * i + 2], cache)
            caches += cache
        return self.decoder.norm(x), tuple(caches)


class Captioner(nn.Module):
    """`core`: the encoder and decoder between the projection and the tied words, by default
    the one `architecture` names; a family of its own passes its own (an nn.Module taking the
    config, with `encode(cells) -> Memory` and `decode(memory, words, state)`, as these)."""

    def __init__(self, config: CaptionerConfig, core: type[nn.Module] | None = None):
        super().__init__()
        self.config = config
        self.project = nn.Linear(config.feature_dim, config.d_model)
        # Embeddings are read scaled by sqrt(d_model) and, tied, are the output layer: this
        # initialization keeps both the decoder's input and the first logits near unit scale.
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        nn.init.normal_(self.embed.weight, std=config.d_model**-0.5)
        self.embed_scale = math.sqrt(config.d_model)
        core = core or (RnnCore if config.architecture == "rnn" else TransformerCore)
        self.core = core(config)

    def encode(self, features: Tensor) -> Memory:
        """features (B, L, feature_dim): L=1 for 1x1, 64 for 8x8."""
        if self.config.l2_normalize:
            features = F.normalize(features.float(), dim=-1).to(features.dtype)
        return self.core.encode(self.project(features))

    def decode(self, memory: Memory, tokens: Tensor, state: State = None) -> tuple[Tensor, State]:
        """Logits (B, T, vocab) after each of `tokens` (B, T), and the decoder's new state."""
        words = self.embed(tokens) * self.embed_scale
        hidden, state = self.core.decode(memory, words, state)
        return F.linear(hidden, self.embed.weight), state

    def forward(self, features: Tensor, tokens: Tensor) -> Tensor:
        """Teacher forcing: logits (B, T, vocab) for the token after each of `tokens`.
        Padding after <eos> needs no mask: no earlier position sees it."""
        return self.decode(self.encode(features), tokens)[0]

    def step(self, memory: Memory, tokens: Tensor, state: State = None) -> tuple[Tensor, State]:
        """Log-probs (B, vocab) of the token after `tokens` (B, t), for decoding. Pass back the
        returned state with `tokens` one longer: the decoder then reads only the newest token."""
        unread = tokens if state is None else tokens[:, -1:]
        logits, state = self.decode(memory, unread, state)
        return logits[:, -1].float().log_softmax(-1), state
