"""Captioner speed at the spec's sizes (d_model 512; the Transformer 6+6 layers, 8 heads),
over EfficientNet-lite0 features (1280 channels, 8x8 grid) and 15-word captions:

- training throughput (samples/s) of each variant: the training core's step
  (pipelines/training/training.py: forward, loss, backward, clip, Adagrad) over batches already in
  memory, on one process, CPU float32, and on CUDA with bf16 autocast when torch sees a
  GPU (the input path and MFU: tests/benchmarks/test_training_efficiency.py);
- decoding latency: greedy and beam search (beam 4) per image at batch 1 and in a batch of
  DECODE_BATCH (32 on CPU, 256 on GPU), the Transformer with its key/value cache.

Models are untrained: an untrained model rarely stops early, so every caption runs to the
word limit, the slowest case. Ratios are against the RNN over 1x1 features, measured in the
same run.

    .venv/bin/pytest -q -s -m benchmark tests/benchmarks/test_captioner_speed.py
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
import torch

from conceptual.models.captioner import Captioner
from conceptual.models.decoding import beam_search, greedy
from conceptual.models.losses import CaptionLoss
from conceptual.models.variants import VARIANTS
from conceptual.models.vocab import Vocabulary
from conceptual.pipelines.families.captioner.train_captioner import (
    CaptionerTrainConfig,
    captioner_config,
)
from conceptual.pipelines.training.training import make_optimizer, train_epoch

CHANNELS, CELLS = 1280, 8
VOCAB_WORDS = 5000  # about Flickr8k's at min count 1; the output layer's cost scales with it
BATCH = 25  # the paper's batch size per worker
STEPS = int(os.environ.get("CONCEPTUAL_BENCH_STEPS", 8))  # timed steps per variant
DECODE_BATCH = 256 if torch.cuda.is_available() else 32


def vocabulary() -> Vocabulary:
    words = [f"w{i}" for i in range(VOCAB_WORDS)]
    return Vocabulary.build([" ".join(words)], min_count=1)


def batch(rng: np.random.Generator, vocab: Vocabulary, size: int, kind: str) -> dict:
    """A batch as the training input path gives it: `features` (B, cells, channels), `tokens`."""
    cells = 1 if kind == "1x1" else CELLS * CELLS
    features = rng.normal(size=(size, cells, CHANNELS)).astype(np.float32)
    words = vocab.tokens[4:]
    captions = [" ".join(rng.choice(words, 15)) for _ in range(size)]
    return {
        "features": torch.from_numpy(features),
        "tokens": torch.from_numpy(vocab.encode_array(captions, 17)),
    }


def model_for(
    name: str, vocab: Vocabulary, device: torch.device
) -> tuple[Captioner, CaptionerTrainConfig]:
    architecture, _, feature_map = name.partition("-")
    model = {"architecture": architecture, "feature_map": feature_map}
    config = CaptionerTrainConfig(model=model, batch_size=BATCH)
    torch.manual_seed(0)
    return Captioner(captioner_config(config, len(vocab), CHANNELS)).to(device), config


def train_throughput(name: str, vocab: Vocabulary, device: torch.device) -> dict:
    model, config = model_for(name, vocab, device)
    optimizer = make_optimizer(config, model, device)
    step_loss = CaptionLoss(model)
    rng = np.random.default_rng(0)
    kind = config.model.feature_map
    batches = [
        {k: v.to(device) for k, v in batch(rng, vocab, BATCH, kind).items()}
        for _ in range(STEPS + 1)
    ]
    train_epoch(step_loss, optimizer, batches[:1], config, device)  # warm-up
    started = time.perf_counter()
    losses = train_epoch(step_loss, optimizer, batches[1:], config, device)
    losses["loss"].sum().item()  # waits for the device
    elapsed = time.perf_counter() - started
    parameters = sum(p.numel() for p in model.parameters())
    return {"samples_per_s": round(STEPS * BATCH / elapsed, 1), "parameters": parameters}


def decode_latency(
    name: str,
    vocab: Vocabulary,
    device: torch.device,
    dtype: torch.dtype = torch.float32,
    compiled: bool = False,
) -> dict:
    """`dtype`: the model's and its features' (torch.bfloat16: the decoding copy GPUs get,
    models.decoding.for_decoding); `compiled`: the static cache with its step compiled."""
    model, config = model_for(name, vocab, device)
    model.eval().to(dtype)
    rng = np.random.default_rng(1)
    features = batch(rng, vocab, DECODE_BATCH, config.model.feature_map)["features"]
    features = features.to(device, dtype)
    decoders = {
        "greedy": lambda f: greedy(model, f, compiled=compiled),
        "beam4": lambda f: beam_search(model, f, compiled=compiled),
    }
    result = {}
    for label, decode in decoders.items():
        decode(features[:1])  # warm-up; compiled, a graph for each batch size
        if compiled:
            decode(features)
        one = min(_seconds(decode, features[:1]) for _ in range(3))
        many = _seconds(decode, features)
        result[f"{label}_ms_per_image_batch1"] = round(one * 1000, 1)
        result[f"{label}_ms_per_batch{DECODE_BATCH}"] = round(many * 1000, 1)
        result[f"{label}_ms_per_image_batch{DECODE_BATCH}"] = round(many * 1000 / DECODE_BATCH, 1)
    return result


def _seconds(decode, features: torch.Tensor) -> float:
    started = time.perf_counter()
    decode(features)
    return time.perf_counter() - started


def devices() -> list[torch.device]:
    return [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", devices(), ids=str)
def test_training_throughput_per_variant(device, record):
    vocab = vocabulary()
    results = {name: train_throughput(name, vocab, device) for name in VARIANTS}
    baseline = results["rnn-1x1"]["samples_per_s"]
    for name in VARIANTS:
        results[name]["vs_rnn-1x1"] = round(results[name]["samples_per_s"] / baseline, 3)
    precision = "bf16 autocast" if device.type == "cuda" else "float32"
    record(
        f"captioner_training_{device.type}",
        {
            "device": _device_name(device),
            "precision": precision,
            "batch": BATCH,
            "steps": STEPS,
            **results,
        },
    )
    assert all(r["samples_per_s"] > 0 for r in results.values())


@pytest.mark.parametrize("device", devices(), ids=str)
def test_decoding_latency_per_variant(device, record):
    vocab = vocabulary()
    results = {name: decode_latency(name, vocab, device) for name in VARIANTS}
    record(f"captioner_decoding_{device.type}", {"device": _device_name(device), **results})
    assert all(r["beam4_ms_per_image_batch1"] > 0 for r in results.values())


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name()
    return f"cpu ({torch.get_num_threads()} threads)"
