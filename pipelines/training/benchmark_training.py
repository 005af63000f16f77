"""Where a training step's time goes: the training core's own step (pipelines/training/training.py) on
this machine, over real features read through the training input path or synthesized ones,
for one model config. Two variants, each one JSON-able row:

- `<variant> on-device`: one batch already on the device, stepped again and again (the
  model's speed alone);
- `<variant> input-path`: the batches as training gets them (pipelines/training/input_path.py), with
  the share of the time spent waiting for them.

`input_only` times the input path alone: the training rows read, shuffled and delivered to
a step that does nothing, epoch after epoch, in samples/s and GB/s of batches delivered.

FLOPs are counted (torch's FlopCounterMode, one forward and backward on the CPU); MFU is
the achieved FLOP rate over the device's peak: a table of dense bf16 peaks by GPU name,
`peak_tflops` when given, and on CPUs a float32 matmul rate measured here.
"""

from __future__ import annotations

import copy
import itertools
import platform
import resource
import time
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import ray
import torch
from torch import Tensor, nn
from torch.utils.flop_counter import FlopCounterMode

from conceptual.models.captioner import Captioner
from conceptual.models.losses import TOTAL, CaptionLoss
from conceptual.models.vocab import PAD, Vocabulary
from conceptual.pipelines.families.captioner.train_captioner import (
    CaptionerTrainConfig,
    captioner_config,
    feature_shape,
    train_examples,
    train_rows,
    variant,
)
from conceptual.pipelines.features.features_data import feature_files, train_captions
from conceptual.pipelines.training import training
from conceptual.pipelines.training.input_path import Batches, prepared
from conceptual.records import FEATURES
from conceptual.runtime import init_ray

# Dense bf16 tensor-core peaks, FLOP/s, by a part of the device name.
BF16_PEAK_FLOPS = {"H200": 989e12, "H100": 989e12, "A100": 312e12, "L40S": 362e12, "L4": 121e12}
SYNTHETIC_CHANNELS, SYNTHETIC_CELLS, SYNTHETIC_WORDS = 1280, 64, 5000
# Rows per block of the made-up features: the row groups the features job writes (its
# batch_size), so the input path meets as many blocks as it does on real features.
SYNTHETIC_BLOCK = 32
FLOP_ROWS = 8


def benchmark(
    config: CaptionerTrainConfig,
    features_uri: str | None = None,
    steps: int = 20,
    warmup: int = 3,
    peak_tflops: float | None = None,
) -> list[dict[str, Any]]:
    """The on-device and input-path rows for `config`'s model, in that order."""
    config, device = _on_this_machine(config)
    rows, vocab, shape = _rows(config, features_uri, steps + warmup)
    examples = train_examples(rows, vocab, config, shape).materialize()

    torch.manual_seed(config.seed)
    captioner = Captioner(captioner_config(config, len(vocab), shape[1]))
    loss = CaptionLoss(captioner, config.label_smoothing).to(device)
    optimizer = training.make_optimizer(config, loss, device)
    step_loss = training.compiled(loss, config)
    one_batch = next(_epochs(examples, config, device))
    first_step_s = _seconds(
        lambda: training.train_epoch(step_loss, optimizer, [one_batch], config, device), device
    )
    # Counted on a few rows (the FLOPs are linear in the batch): a whole batch of 1,024 would
    # take the CPU minutes.
    sample = {k: v[:FLOP_ROWS] for k, v in one_batch.items()}
    flops_per_sample = counted_flops(loss, sample) / len(sample["tokens"])
    tokens_per_sample = float((one_batch["tokens"][:, 1:] != PAD).sum()) / len(one_batch["tokens"])
    common = {
        "device": device_name(device),
        "batch_size": config.batch_size,
        "grad_accumulation": config.grad_accumulation,
        "compile": config.compile,
        "first_step_s": round(first_step_s, 3),
    }
    peak = peak_flops(device, peak_tflops)

    on_device = itertools.repeat(one_batch, warmup + steps)
    input_path = _epochs(examples, config, device)
    results = []
    for name, batches in (("on-device", on_device), ("input-path", input_path)):
        seconds, waited = timed_steps(step_loss, optimizer, batches, config, device, steps, warmup)
        samples_per_s = steps * config.batch_size / seconds
        flops = flops_per_sample * samples_per_s
        if device.type == "cuda":
            memory_gb = torch.cuda.max_memory_allocated() / 1e9
        else:  # the process's peak resident memory (kB on Linux)
            memory_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
        results.append(
            {
                "variant": f"{variant(config)} {name}",
                **common,
                "samples_per_s": round(samples_per_s, 1),
                "tokens_per_s": round(samples_per_s * tokens_per_sample, 1),
                "tflops": round(flops / 1e12, 4),
                "mfu": round(flops / peak, 4),
                "peak_tflops": round(peak / 1e12, 3),
                "input_wait_share": round(waited / seconds, 4),
                "peak_memory_gb": round(memory_gb, 3),
            }
        )
    return results


def input_only(
    config: CaptionerTrainConfig,
    features_uri: str | None = None,
    batches: int = 16,
    epochs: int = 3,
) -> dict[str, Any]:
    """The input path alone (config.data), as a worker meets it: the training rows read
    (`features_uri`, or `batches` batches of made-up features), made into examples and
    delivered to a step that does nothing, for a first epoch and `epochs` more. The first
    epoch reads and, by default, keeps; `samples_per_s` and `gb_per_s` are the later
    epochs', as training meets them epoch after epoch."""
    config, device = _on_this_machine(config)
    rows, vocab, shape = _rows(config, features_uri, batches)
    examples = prepared(train_examples(rows, vocab, config, shape), config.data, config.seed)
    feed = Batches(
        config.data, config.batch_size, device, config.seed, 0, config.prefetch_batches, True
    )
    first_s, count, _ = _delivered(feed, examples, 0, device)
    seconds, delivered = 0.0, 0
    for epoch in range(1, epochs + 1):
        epoch_s, count, nbytes = _delivered(feed, examples, epoch, device)
        seconds, delivered = seconds + epoch_s, delivered + nbytes
    return {
        "variant": f"{config.model.feature_map} input-only",
        "shuffle": config.data.shuffle,
        "device": device_name(device),
        "batch_size": config.batch_size,
        "rows_per_epoch": count,
        "epochs": epochs,
        "first_epoch_samples_per_s": round(count / first_s, 1),
        "samples_per_s": round(count * epochs / seconds, 1),
        "gb_per_s": round(delivered / seconds / 1e9, 4),
    }


def _delivered(
    feed: Batches, examples: ray.data.Dataset, epoch: int, device: torch.device
) -> tuple[float, int, int]:
    """Seconds for an epoch's batches to reach the device, its rows and bytes."""
    started, count, nbytes = time.perf_counter(), 0, 0
    for batch in feed.epoch(examples.iterator(), epoch):
        count += len(next(iter(batch.values())))
        nbytes += sum(v.numel() * v.element_size() for v in batch.values())
    _synchronize(device)
    return time.perf_counter() - started, count, nbytes


def timed_steps(
    step_loss: nn.Module,
    optimizer: torch.optim.Optimizer,
    batches: Iterable[dict[str, Tensor]],
    config: CaptionerTrainConfig,
    device: torch.device,
    steps: int,
    warmup: int,
) -> tuple[float, float]:
    """Seconds for `steps` batches after `warmup` ones, and the seconds of it spent waiting
    for the next batch."""
    batches = iter(batches)
    training.train_epoch(step_loss, optimizer, itertools.islice(batches, warmup), config, device)
    _synchronize(device)
    waiting = WaitClock(itertools.islice(batches, steps))
    started = time.perf_counter()
    losses = training.train_epoch(step_loss, optimizer, waiting, config, device)
    losses[TOTAL].sum().item()  # waits for the device
    return time.perf_counter() - started, waiting.seconds


class WaitClock:
    """An iterator that adds up the time its consumer waits in next()."""

    def __init__(self, items: Iterable[Any]):
        self.items, self.seconds = iter(items), 0.0

    def __iter__(self) -> WaitClock:
        return self

    def __next__(self) -> Any:
        started = time.perf_counter()
        try:
            return next(self.items)
        finally:
            self.seconds += time.perf_counter() - started


def counted_flops(loss: nn.Module, batch: dict[str, Tensor]) -> int:
    """FLOPs of one forward and backward of `batch`, counted on a CPU copy in float32
    (oneDNN off: its fused LSTM kernel hides the LSTM's matrix products from the counter)."""
    cpu_loss = copy.deepcopy(loss).cpu().float()
    cpu_batch = {k: v.cpu().float() if v.is_floating_point() else v.cpu() for k, v in batch.items()}
    with torch.backends.mkldnn.flags(enabled=False), FlopCounterMode(display=False) as counter:
        cpu_loss(**cpu_batch)[TOTAL].backward()
    return counter.get_total_flops()


def peak_flops(device: torch.device, peak_tflops: float | None) -> float:
    if peak_tflops:
        return peak_tflops * 1e12
    if device.type == "cuda":
        name = torch.cuda.get_device_name()
        peak = next((v for k, v in BF16_PEAK_FLOPS.items() if k in name), None)
        if peak is None:
            raise ValueError(f"no bf16 peak known for {name}: pass --peak-tflops")
        return peak
    return measured_cpu_peak()


def measured_cpu_peak(size: int = 1024, seconds: float = 1.0) -> float:
    """This CPU's float32 matmul rate with torch's threads, FLOP/s (the best of a few)."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b  # warm-up
    best, deadline = 0.0, time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        started = time.perf_counter()
        a @ b
        best = max(best, 2 * size**3 / (time.perf_counter() - started))
    return best


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name()
    return f"{platform.processor() or 'cpu'} ({torch.get_num_threads()} threads)"


def _epochs(
    examples: ray.data.Dataset, config: CaptionerTrainConfig, device: torch.device
) -> Iterator[dict[str, Tensor]]:
    """Epoch after epoch of the training input path."""
    examples = prepared(examples, config.data, config.seed)
    feed = Batches(
        config.data, config.batch_size, device, config.seed, 0, config.prefetch_batches, True
    )
    for epoch in itertools.count():
        yield from feed.epoch(examples.iterator(), epoch)


def _on_this_machine(config: CaptionerTrainConfig) -> tuple[CaptionerTrainConfig, torch.device]:
    """The config with GPUs and compilation decided as training would here, and its device."""
    init_ray()
    use_gpu = torch.cuda.is_available() if config.use_gpu is None else config.use_gpu
    config = config.model_copy(
        update={
            "use_gpu": use_gpu,
            "compile": use_gpu if config.compile is None else config.compile,
        }
    )
    return config, torch.device("cuda" if use_gpu else "cpu")


def _seconds(work, device: torch.device) -> float:
    started = time.perf_counter()
    work()
    _synchronize(device)
    return time.perf_counter() - started


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def _rows(
    config: CaptionerTrainConfig, features_uri: str | None, batches: int
) -> tuple[ray.data.Dataset, Vocabulary, tuple[int, int]]:
    """Features rows (records.FEATURES), their vocabulary and (cells, channels): read from
    `features_uri`, or made up (enough rows for `batches` batches, 15-word captions)."""
    if features_uri:
        files = feature_files(features_uri)
        vocab = Vocabulary.build(train_captions(files, features_uri), min_count=config.min_count)
        rows = train_rows(features_uri, files)
        first = rows.take(1)[0]
        return rows, vocab, feature_shape(first["pooled"], first["grid"], config.model.feature_map)
    rng = np.random.default_rng(config.seed)
    words = [f"w{i}" for i in range(SYNTHETIC_WORDS)]
    vocab = Vocabulary.build([" ".join(words)], min_count=1)
    count = batches * config.batch_size
    blocks = [
        _synthetic_block(rng, words, min(SYNTHETIC_BLOCK, count - start))
        for start in range(0, count, SYNTHETIC_BLOCK)
    ]
    cells = 1 if config.model.feature_map == "1x1" else SYNTHETIC_CELLS
    return ray.data.from_arrow(blocks), vocab, (cells, SYNTHETIC_CHANNELS)


def _synthetic_block(rng: np.random.Generator, words: list[str], count: int) -> pa.Table:
    """`count` made-up FEATURES rows: random grids, their means and 15-word captions."""
    grid = rng.random((count, SYNTHETIC_CELLS, SYNTHETIC_CHANNELS), dtype=np.float32)
    return pa.table(
        {
            "split": ["train"] * count,
            "caption": [" ".join(rng.choice(words, 15)) for _ in range(count)],
            "pooled": _list_column(grid.mean(axis=1)),
            "grid": _list_column(grid.reshape(count, -1)),
        },
        schema=pa.schema([FEATURES.field(n) for n in ("split", "caption", "pooled", "grid")]),
    )


def _list_column(rows: np.ndarray) -> pa.ListArray:
    """A list<float> column of a 2-D array's rows, without a Python object per row."""
    offsets = np.arange(0, rows.size + 1, rows.shape[1], dtype=np.int32)
    return pa.ListArray.from_arrays(offsets, pa.array(rows.ravel()))
