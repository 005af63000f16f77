"""A Transformer captioner's decoding step over a static key/value cache, so that the step
can be compiled once per batch size and, on GPUs, replayed as one CUDA graph (issue 50).

Today's cache (captioner.DecoderLayer) grows by one token a step: new shapes every step,
which neither torch.compile nor a CUDA graph can keep. Here every layer's keys and values
live in buffers of `max_tokens` positions allocated once; a step writes its token's keys
and values at its position (a tensor, not a Python number, so every step is the same
graph) and attends to the positions up to it through a mask. Masked positions weigh
exactly zero, so the captions are today's.

    decoder = StaticDecoder.for_rows(model, rows=images * beam, compiled=True)
    decoder.start(memory)                      # the image cells' keys and values
    log_probs = decoder(tokens[:, -1:], step)  # step: a 0-dim long tensor
    decoder.reorder(parents)                   # beam search keeps its best rows

A compiled step that fails to compile or run falls back to eager with a warning (once per
decoder): compilation is an optimization, never a reason for a caption job to fail.
"""

from __future__ import annotations

import warnings
import weakref

import torch
import torch.nn.functional as F
from torch import Tensor

from conceptual.models.captioner import Captioner, DecoderLayer, Memory, TransformerCore

# Decoders by model, then by (rows, device, compiled): a compiled step is kept with its
# buffers, so a second batch of the same size replays it instead of compiling again. A
# decoder holds its model weakly, or the entry would keep its own key alive.
_DECODERS: weakref.WeakKeyDictionary[Captioner, dict[tuple, StaticDecoder]] = (
    weakref.WeakKeyDictionary()
)


class StaticDecoder:
    def __init__(self, model: Captioner, rows: int, device: torch.device, compiled: bool = False):
        if not isinstance(model.core, TransformerCore):
            raise ValueError("a static key/value cache is for Transformer captioners")
        self._model = weakref.ref(model)
        config, core = model.config, model.core
        length, head_dim = config.max_tokens, config.d_model // config.heads
        shape = (rows, config.heads, length, head_dim)
        dtype = model.embed.weight.dtype
        layers = len(core.decoder.layers)
        self.keys = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(layers)]
        self.values = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(layers)]
        self.cells: list[Tensor] = []
        self.slots = torch.arange(length, device=device)
        self.compiled = compiled
        self._step = self._eager_step
        if compiled:
            # reduce-overhead: the step replayed as a CUDA graph on GPUs; on CPUs, plain
            # inductor code
            mode = "reduce-overhead" if device.type == "cuda" else "default"
            self._step = torch.compile(self._eager_step, mode=mode, dynamic=False, fullgraph=True)

    @classmethod
    def for_rows(cls, model: Captioner, rows: int, compiled: bool = False) -> StaticDecoder:
        """The model's decoder for batches of `rows`, made once and kept with the model."""
        device = model.embed.weight.device
        decoders = _DECODERS.setdefault(model, {})
        key = (rows, device, compiled)
        if key not in decoders:
            decoders[key] = cls(model, rows, device, compiled)
        return decoders[key]

    def start(self, memory: Memory) -> None:
        """A new batch: the image cells' keys and values (TransformerCore.encode), copied
        into the decoder's own tensors when compiled (a CUDA graph reads fixed addresses)."""
        if self.compiled and len(self.cells) == len(memory):
            for cell, new in zip(self.cells, memory):
                cell.copy_(new)
        else:
            self.cells = [m.clone() if self.compiled else m for m in memory]

    @property
    def model(self) -> Captioner:
        model = self._model()
        assert model is not None, "the decoder outlived its model"
        return model

    def __call__(self, token: Tensor, step: Tensor) -> Tensor:
        """Log-probs (rows, vocab) of the token after `token` (rows, 1), read at position
        `step`; its keys and values are written into the cache."""
        if self._step is not self._eager_step:
            try:
                return self._step(token, step).clone()  # a graph's output is overwritten next
            except Exception as error:  # noqa: BLE001  any compiler failure: decode eagerly
                warnings.warn(f"compiled decoding failed, decoding eagerly: {error}", stacklevel=2)
                self._step = self._eager_step
        return self._eager_step(token, step)

    def reorder(self, rows: Tensor) -> None:
        """Keep the given rows of the cache (beam search's parents), in place."""
        for cache in (*self.keys, *self.values):
            cache.copy_(cache.index_select(0, rows))

    def _eager_step(self, token: Tensor, step: Tensor) -> Tensor:
        model, core = self.model, self.model.core
        at = step.view(1)
        x = model.embed(token) * model.embed_scale + core.positions.index_select(0, at)
        seen = (self.slots <= step).view(1, 1, 1, -1)  # the positions written so far
        for i, layer in enumerate(core.decoder.layers):
            x = self._layer(layer, x, i, at, seen)
        logits = F.linear(core.decoder.norm(x), model.embed.weight)
        return logits[:, -1].float().log_softmax(-1)

    def _layer(self, layer: DecoderLayer, x: Tensor, i: int, at: Tensor, seen: Tensor) -> Tensor:
        """DecoderLayer.forward for one token, its keys and values written at `at`."""
        normed = layer.norm1(x)
        keys, values = layer.self_attn.keys_values(normed)
        self.keys[i].index_copy_(2, at, keys)
        self.values[i].index_copy_(2, at, values)
        x = x + layer.self_attn(normed, self.keys[i], self.values[i], mask=seen)
        x = x + layer.multihead_attn(layer.norm2(x), self.cells[2 * i], self.cells[2 * i + 1])
        return x + layer.feed_forward(layer.norm3(x))
