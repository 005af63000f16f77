"""The captioning models of docs/spec/captioning.md: an encoder over the image's CNN embeddings and
a decoder that writes the caption token by token.

- "rnn" (Show and Tell): an LSTM reads the image cells, its final state starts the caption
  LSTM; no attention.
- "transformer" (T2T base): encoder and decoder layers, sinusoidal positions on the image
  cells (0..63 in row-major order for 8x8) and on the tokens, causal self-attention.

Both project the features to `d_model` and tie the word embeddings to the output layer
(the logits are the decoder states times the embedding matrix), so there is one word matrix.

    model = Captioner(CaptionerConfig("transformer", "8x8", vocab_size=len(vocab)))
    features = features_tensor(batch["pooled"], batch["grid"], "8x8")   # (B, 64, 1280)
    loss = model.loss(features, tokens_tensor([vocab.encode(c) for c in batch["caption"]]))
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from conceptual.models.vocab import PAD

FeatureKind = Literal["1x1", "8x8"]
# The most image cells the transformer has positions for: the 8x8 grid.
MAX_CELLS = 64

# What the encoder hands the decoder, and what the decoder carries from step to step: one
# tensor or a tuple of tensors, batch first (so decoding can reorder beams with one index).
Memory = Tensor | tuple[Tensor, ...]
State = tuple[Tensor, ...] | None


@dataclass(frozen=True)
class CaptionerConfig:
    architecture: Literal["rnn", "transformer"]
    features: FeatureKind
    vocab_size: int
    feature_dim: int = 1280
    d_model: int = 512  # word embedding size, LSTM units, transformer width
    layers: int = 6  # transformer only: encoder layers, and as many decoder layers
    heads: int = 8  # transformer only
    ffn: int = 2048  # transformer only: feed-forward width
    dropout: float = 0.1
    max_tokens: int = 17  # longest token sequence: 15 words + <bos> and <eos>


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


def tokens_tensor(encoded: Sequence[Sequence[int]]) -> Tensor:
    """Encoded captions as one (B, T) tensor, padded at the end with <pad>."""
    tokens = torch.full((len(encoded), max(map(len, encoded))), PAD, dtype=torch.long)
    for row, ids in zip(tokens, encoded):
        row[: len(ids)] = torch.tensor(ids)
    return tokens


def sinusoids(length: int, dim: int) -> Tensor:
    """The Transformer's fixed position encodings: (length, dim)."""
    position = torch.arange(length, dtype=torch.float32).unsqueeze(1)
    frequency = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(1e4) / dim))
    encoding = torch.zeros(length, dim)
    encoding[:, 0::2] = torch.sin(position * frequency)
    encoding[:, 1::2] = torch.cos(position * frequency)
    return encoding


class RnnCore(nn.Module):
    """Show and Tell: the encoder LSTM's final (h, c) is the memory and starts the decoder."""

    def __init__(self, config: CaptionerConfig):
        super().__init__()
        self.dropout = nn.Dropout(config.dropout)
        self.encoder = nn.LSTM(config.d_model, config.d_model, batch_first=True)
        self.decoder = nn.LSTM(config.d_model, config.d_model, batch_first=True)

    def encode(self, cells: Tensor) -> Memory:
        _, (h, c) = self.encoder(self.dropout(cells))
        return h[0], c[0]  # one layer: (B, d) each

    def decode(self, memory: Memory, words: Tensor, state: State) -> tuple[Tensor, State]:
        """Reads `words` after the state (the memory at the start); returns every step's
        output and the state after the last one."""
        h, c = state or memory
        out, (h, c) = self.decoder(self.dropout(words), (h.unsqueeze(0), c.unsqueeze(0)))
        return self.dropout(out), (h[0], c[0])


class TransformerCore(nn.Module):
    """Pre-norm Transformer encoder and decoder; the memory is the encoded image cells."""

    def __init__(self, config: CaptionerConfig):
        super().__init__()
        layer = {
            "d_model": config.d_model,
            "nhead": config.heads,
            "dim_feedforward": config.ffn,
            "dropout": config.dropout,
            "batch_first": True,
            "norm_first": True,
        }
        self.dropout = nn.Dropout(config.dropout)
        self.encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(**layer),
            config.layers,
            norm=nn.LayerNorm(config.d_model),
            enable_nested_tensor=False,
        )
        self.decoder = nn.TransformerDecoder(
            nn.TransformerDecoderLayer(**layer), config.layers, norm=nn.LayerNorm(config.d_model)
        )
        positions = sinusoids(max(MAX_CELLS, config.max_tokens), config.d_model)
        self.register_buffer("positions", positions, persistent=False)

    def encode(self, cells: Tensor) -> Memory:
        return self.encoder(self.dropout(cells + self.positions[: cells.shape[1]]))

    def decode(self, memory: Memory, words: Tensor, state: State) -> tuple[Tensor, State]:
        """Always reads all the words (no cache, so no state): at 17 tokens recomputing is cheap."""
        length = words.shape[1]
        causal = nn.Transformer.generate_square_subsequent_mask(length, device=words.device)
        x = self.dropout(words + self.positions[:length])
        return self.decoder(x, memory, tgt_mask=causal, tgt_is_causal=True), None


class Captioner(nn.Module):
    def __init__(self, config: CaptionerConfig):
        super().__init__()
        self.config = config
        self.project = nn.Linear(config.feature_dim, config.d_model)
        # Embeddings are read scaled by sqrt(d_model) and, tied, are the output layer: this
        # initialization keeps both the decoder's input and the first logits near unit scale.
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        nn.init.normal_(self.embed.weight, std=config.d_model**-0.5)
        self.embed_scale = math.sqrt(config.d_model)
        core = RnnCore if config.architecture == "rnn" else TransformerCore
        self.core = core(config)

    def encode(self, features: Tensor) -> Memory:
        """features (B, L, feature_dim): L=1 for 1x1, 64 for 8x8."""
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
        returned state with `tokens` one longer: the RNN then reads only the newest token
        (the Transformer keeps no state and rereads them all)."""
        unread = tokens if state is None else tokens[:, -1:]
        logits, state = self.decode(memory, unread, state)
        return logits[:, -1].log_softmax(-1), state

    def loss(self, features: Tensor, tokens: Tensor, label_smoothing: float = 0.0) -> Tensor:
        """Mean cross-entropy of predicting `tokens[:, 1:]` from `tokens[:, :-1]`, where
        `tokens` are encoded captions (<bos> ... <eos>, padded); padding does not count.
        `label_smoothing` spreads that share of each target's probability over the vocabulary."""
        logits = self(features, tokens[:, :-1])
        return F.cross_entropy(
            logits.transpose(1, 2),
            tokens[:, 1:],
            ignore_index=PAD,
            label_smoothing=label_smoothing,
        )
