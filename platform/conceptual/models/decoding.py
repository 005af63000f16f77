"""Caption decoding: each prediction feeds the next position (docs/spec/captioning.md, Inference).

    captions = [vocab.decode(ids) for ids in beam_search(model, features, beam=4)]

greedy and beam_search return each image's word ids: no <bos>, stopping before <eos>, at most
`max_tokens` words (default: the model's `max_tokens` less <bos> and <eos>), after which
only <eos> may follow. Neither generates <pad> or <bos>. Both decode the whole batch at
once, one step per token, and the decoder reads only the newest token at each (the RNN's state,
the Transformer's keys and values). Call `model.eval()` first: dropout would make captions
random.

`cache="static"` decodes a Transformer over a static key/value cache (models.static_cache:
the same captions, every step the same shapes) and `compiled=True` compiles that step
(torch.compile; a CUDA graph on GPUs, replayed every step), falling back to eager if it
fails. A compiled step runs at fixed batch sizes, the powers of two: a batch's rows
(images x beam) are padded up to one, so that batches of any size meet a few graphs. The
RNN's state is fixed-size already: it decodes as always.

`for_decoding(model, device)` readies a model to decode where it runs: a Transformer in
bf16 on GPUs (its weights cast once; autocast would cast them at every step), float32
otherwise. The log-probs beam search adds up are float32 either way.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

from conceptual.models.captioner import Captioner, Memory, State, TransformerCore
from conceptual.models.static_cache import StaticDecoder
from conceptual.models.vocab import BOS, EOS, PAD

Cache = Literal["dynamic", "static"]


def for_decoding(model: Captioner, device: torch.device) -> Captioner:
    """The model in eval mode, on `device`, in the dtype it decodes in there (in place)."""
    return model.to(device=device, dtype=decoding_dtype(model, device)).eval()


def decoding_dtype(model: Captioner, device: torch.device) -> torch.dtype:
    """bf16 for a Transformer on a GPU. float32 on CPUs, where bf16 runs these models slower
    (the training core autocasts on GPUs only), and for the LSTM, which cuDNN runs in bf16
    only from 9.13 on."""
    if device.type == "cuda" and isinstance(model.core, TransformerCore):
        return torch.bfloat16
    return torch.float32


@torch.no_grad()
def greedy(
    model: Captioner,
    features: Tensor,
    max_tokens: int | None = None,
    cache: Cache = "dynamic",
    compiled: bool = False,
) -> list[list[int]]:
    """The most likely next token at every step."""
    step = _stepper(model, model.encode(features), cache, compiled)
    tokens = torch.full((len(features), 1), BOS, device=features.device)
    finished = torch.zeros(len(features), dtype=torch.bool, device=features.device)
    for last in _steps(model, max_tokens):
        log_probs = _next_log_probs(step, tokens, last)
        token = log_probs.argmax(-1).masked_fill(finished, PAD)
        tokens = torch.cat([tokens, token.unsqueeze(1)], dim=1)
        finished |= token == EOS
        if finished.all():
            break
    return _words(tokens)


def beam_search(
    model: Captioner,
    features: Tensor,
    beam: int = 4,
    max_tokens: int | None = None,
    length_penalty: float = 0.0,
    cache: Cache = "dynamic",
    compiled: bool = False,
) -> list[list[int]]:
    """Each image's best caption by beam search (see n_best)."""
    ranked = n_best(model, features, beam, 1, max_tokens, length_penalty, cache, compiled)
    return [best[0] for best in ranked]


@torch.no_grad()
def n_best(
    model: Captioner,
    features: Tensor,
    beam: int = 4,
    n: int = 1,
    max_tokens: int | None = None,
    length_penalty: float = 0.0,
    cache: Cache = "dynamic",
    compiled: bool = False,
) -> list[list[list[int]]]:
    """The `beam` most likely partial captions of every image advance together, as one batch
    of images x beams. A finished caption keeps its place and score (it continues with <pad>
    at no cost) until better ones push it out. At the end each image's `n` best captions
    (n <= beam) come out best first, ranked by log-prob divided by length **
    `length_penalty` (0: plain log-prob; more favours longer captions)."""
    if not 1 <= n <= beam:
        raise ValueError(f"n must be between 1 and the beam size ({beam}), not {n}")
    images, device = len(features), features.device
    memory = _select(
        model.encode(features), torch.arange(images, device=device).repeat_interleave(beam)
    )
    tokens = torch.full((images * beam, 1), BOS, device=device)
    finished = torch.zeros(images * beam, dtype=torch.bool, device=device)
    # Every beam starts as the same <bos>: only the first may expand, or the beams would
    # fill with copies of one caption.
    scores = torch.full((images, beam), float("-inf"), device=device)
    scores[:, 0] = 0.0
    step = _stepper(model, memory, cache, compiled)
    for last in _steps(model, max_tokens):
        log_probs = _next_log_probs(step, tokens, last)
        # A finished caption continues with <pad> at no cost (where, not a masked write:
        # no host synchronization).
        log_probs = torch.where(finished.unsqueeze(1), _pad_only(log_probs), log_probs)
        vocab = log_probs.shape[-1]
        candidates = (scores.reshape(-1, 1) + log_probs).reshape(images, beam * vocab)
        scores, best = candidates.topk(beam, dim=1)
        first_beam_row = torch.arange(images, device=device).unsqueeze(1) * beam
        parents = (first_beam_row + best // vocab).flatten()
        token = (best % vocab).flatten()
        tokens = torch.cat([tokens[parents], token.unsqueeze(1)], dim=1)
        finished = finished[parents] | (token == EOS)
        step.reorder(parents)
        if finished.all():
            break
    lengths = (tokens[:, 1:] != PAD).sum(dim=1).reshape(images, beam).clamp(min=1)
    ranked = (scores / lengths**length_penalty).topk(n, dim=1).indices
    rows = torch.arange(images, device=device).unsqueeze(1) * beam + ranked
    words = _words(tokens[rows.flatten()])
    return [words[i * n : (i + 1) * n] for i in range(images)]


def _steps(model: Captioner, max_tokens: int | None) -> list[bool]:
    """One flag per decoding step, true for the last: the one after the word limit."""
    words = model.config.max_tokens - 2 if max_tokens is None else max_tokens
    return [False] * words + [True]


class _Growing:
    """Today's cache: the decoder's state grows by a token a step (Captioner.step)."""

    def __init__(self, model: Captioner, memory: Memory):
        self.model, self.memory, self.state = model, memory, None

    def __call__(self, tokens: Tensor) -> Tensor:
        log_probs, self.state = self.model.step(self.memory, tokens, self.state)
        return log_probs

    def reorder(self, rows: Tensor) -> None:
        self.state = _select(self.state, rows)


class _Static:
    """The static cache's steps (models.static_cache), counted from the first token; when
    compiled, over `padded_rows` rows, the rows past the batch's decoding <bos> over zeros."""

    def __init__(self, model: Captioner, memory: Memory, compiled: bool):
        self.rows = len(memory[0])
        size = padded_rows(self.rows) if compiled else self.rows
        self.spare = torch.arange(self.rows, size, device=memory[0].device)
        self.decoder = StaticDecoder.for_rows(model, size, compiled)
        self.decoder.start(
            tuple(torch.cat([m, m.new_zeros(len(self.spare), *m.shape[1:])]) for m in memory)
        )
        self.position = 0

    def __call__(self, tokens: Tensor) -> Tensor:
        at = torch.tensor(self.position, device=tokens.device)
        self.position += 1
        last = torch.cat([tokens[:, -1:], tokens.new_full((len(self.spare), 1), BOS)])
        return self.decoder(last, at)[: self.rows]

    def reorder(self, rows: Tensor) -> None:
        self.decoder.reorder(torch.cat([rows, self.spare]))


def padded_rows(rows: int) -> int:
    """The batch size a compiled step runs at: the power of two at or above `rows` (a graph
    for each size met, and at most twice the rows)."""
    return 1 << (rows - 1).bit_length()


def _stepper(model: Captioner, memory: Memory, cache: Cache, compiled: bool) -> _Growing | _Static:
    if (cache == "static" or compiled) and isinstance(model.core, TransformerCore):
        return _Static(model, memory, compiled)
    return _Growing(model, memory)


def _next_log_probs(step: _Growing | _Static, tokens: Tensor, last: bool) -> Tensor:
    log_probs = step(tokens)
    if last:  # the word limit is reached: only <eos> may follow
        eos = log_probs[:, EOS].clone()
        log_probs.fill_(float("-inf"))
        log_probs[:, EOS] = eos
    else:
        log_probs[:, [PAD, BOS]] = float("-inf")
    return log_probs


def _pad_only(log_probs: Tensor) -> Tensor:
    """Log-probs of a finished caption's row: 0 for <pad>, -inf for every other token."""
    row = torch.full_like(log_probs[:1], float("-inf"))
    row[:, PAD] = 0.0
    return row


def _select(tensors: Memory | State, rows: Tensor) -> Memory | State:
    """The given batch rows of a memory or state."""
    if tensors is None:
        return None
    if isinstance(tensors, Tensor):
        return tensors[rows]
    return tuple(t[rows] for t in tensors)


def _words(tokens: Tensor) -> list[list[int]]:
    """Each row's words: after <bos>, before <eos> or <pad>."""
    captions = []
    for row in tokens[:, 1:].tolist():
        words = []
        for token in row:
            if token in (EOS, PAD):
                break
            words.append(token)
        captions.append(words)
    return captions
