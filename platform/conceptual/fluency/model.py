"""The sentence fluency classifier of docs/spec/fluency.md: four LSTM classifiers, one per view
of a (Chinese sentence, English original) pair, whose P(fluent) are averaged.

    model = FluencyModel(FluencyConfig(vocab_sizes={view: len(vocabs[view]) for view in VIEWS}))
    columns = encode(views, vocabs, model.config.max_tokens)   # token ids per view, lengths
    logits = model(**columns)                                   # (B, 4, 2)
    scores(model.probabilities(**columns), columns["lengths"])  # (B,) in [0, 1]

The views (conceptual.fluency.views makes them): `zh_words` and `zh_pos`, the translation's
words and POS tags; `en_words` and `en_pos`, the English source's. One view's classifier:
word embedding -> dropout -> LSTM -> dropout -> the LSTM's output at the sequence's last
real token (its final hidden state; the padding after it never reaches it, so nothing
needs packing) -> a linear layer over {not fluent, fluent}, softmax. The views share no
weights, so training them on one summed loss is training four classifiers side by side.

The fluency score is the mean of the views' P(fluent), as in the paper; fluent above 0.5.
A view that is missing takes no part in the mean: a sentence written in Chinese (or a
generated caption) has no English source, and its score is the mean of the two Chinese
views; a record without a Chinese sentence is scored on its English views; with no view
at all the score is 0 (nothing was said fluently).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch
from pydantic import ConfigDict, model_validator
from torch import Tensor, nn

from conceptual.config import Config
from conceptual.models.vocab import PAD, Vocabulary

VIEWS = ("zh_words", "zh_pos", "en_words", "en_pos")
FLUENT_ABOVE = 0.5  # the spec's decision: fluent when the score is above this


class FluencySettings(Config):
    """The classifiers' sizes: the `model.*` keys of the training config."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # The spec's 512 and 512 (model.embed_dim=512 model.hidden=512) take 0.6 s a batch of
    # 64 on one CPU core, 80 s an epoch of Flickr8k-CN's labels; half the width is a third
    # of that, so that CPUs train it in minutes.
    embed_dim: int = 256
    hidden: int = 256
    dropout: float = 0.5  # on the embeddings and on the LSTM's output
    max_tokens: int = 32  # ids per view, <bos> and <eos> included (99% of sentences fit)


class FluencyConfig(FluencySettings):
    """The settings and what the data decides: each view's vocabulary size."""

    vocab_sizes: dict[str, int]

    @model_validator(mode="after")
    def _a_vocabulary_per_view(self) -> FluencyConfig:
        if set(self.vocab_sizes) != set(VIEWS) or min(self.vocab_sizes.values()) <= PAD:
            raise ValueError(f"vocab_sizes needs a vocabulary's length for each of {VIEWS}")
        return self


class ViewClassifier(nn.Module):
    """tokens (B, T) int64, padded at the end, and their lengths (B,) -> logits (B, 2)."""

    def __init__(self, vocab_size: int, config: FluencySettings):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, config.embed_dim, padding_idx=PAD)
        self.lstm = nn.LSTM(config.embed_dim, config.hidden, batch_first=True)
        self.dropout = nn.Dropout(config.dropout)
        self.out = nn.Linear(config.hidden, 2)

    def forward(self, tokens: Tensor, lengths: Tensor) -> Tensor:
        outputs, _ = self.lstm(self.dropout(self.embed(tokens)))
        # The output at the last real token (a missing view, length 0, reads position 0 and
        # is left out by the caller).
        last = (lengths - 1).clamp(min=0)
        final = outputs[torch.arange(len(tokens), device=tokens.device), last]
        return self.out(self.dropout(final))


class FluencyModel(nn.Module):
    def __init__(self, config: FluencyConfig):
        super().__init__()
        self.config = config
        self.views = nn.ModuleDict(
            {view: ViewClassifier(config.vocab_sizes[view], config) for view in VIEWS}
        )

    def forward(
        self, zh_words: Tensor, zh_pos: Tensor, en_words: Tensor, en_pos: Tensor, lengths: Tensor
    ) -> Tensor:
        """Each view's logits, (B, 4, 2) in VIEWS order; `lengths` (B, 4) counts each view's
        ids (0: the view is missing). Every batch is cut to its longest sequence first."""
        tokens = (zh_words, zh_pos, en_words, en_pos)
        logits = []
        for i, classifier in enumerate(self.views.values()):
            width = max(int(lengths[:, i].max()), 1)
            logits.append(classifier(tokens[i][:, :width], lengths[:, i]))
        return torch.stack(logits, dim=1)

    def probabilities(self, **columns: Tensor) -> Tensor:
        """Each view's P(fluent), (B, 4)."""
        return self(**columns).softmax(dim=-1)[..., 1]


def scores(probabilities: Tensor | np.ndarray, lengths: Tensor | np.ndarray) -> np.ndarray:
    """The mean of the present views' P(fluent) per pair, (B,) float32; 0 with no view."""
    p = np.asarray(probabilities.cpu() if isinstance(probabilities, Tensor) else probabilities)
    present = np.asarray(lengths.cpu() if isinstance(lengths, Tensor) else lengths) > 0
    total = np.where(present, p, 0.0).sum(axis=1)
    return (total / np.maximum(present.sum(axis=1), 1)).astype(np.float32)


def encode(
    views: Mapping[str, Sequence[str | None]], vocabs: Mapping[str, Vocabulary], max_tokens: int
) -> dict[str, np.ndarray]:
    """The model's input columns: (N, max_tokens) ids per view (a missing view, None, all
    padding) and `lengths` (N, 4), each view's ids counted."""
    columns = {}
    for view in VIEWS:
        texts = views[view]
        ids = vocabs[view].encode_array([text or "" for text in texts], max_tokens)
        ids[[text is None for text in texts]] = PAD
        columns[view] = ids
    columns["lengths"] = np.stack([(columns[v] != PAD).sum(axis=1) for v in VIEWS], axis=1)
    return columns


@torch.inference_mode()
def predict(model: FluencyModel, columns: Mapping[str, np.ndarray], batch_size: int = 256):
    """Each view's P(fluent), (N, 4) float32 numpy, in batches on the model's device."""
    model.eval()
    device = next(model.parameters()).device
    inputs = ("lengths", *VIEWS)
    rows = len(columns["lengths"])
    out = []
    for start in range(0, rows, batch_size):
        batch = {k: torch.as_tensor(columns[k][start : start + batch_size]) for k in inputs}
        out.append(model.probabilities(**{k: v.to(device) for k, v in batch.items()}).float())
    return torch.cat(out).cpu().numpy() if out else np.zeros((0, len(VIEWS)), np.float32)
