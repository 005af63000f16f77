"""The training input path: a worker's batches, epoch after epoch (training.run), for every
model family.

Two ways, by `data.shuffle`:

- "window" (the default): the dataset's blocks come in a new random order every epoch
  (`prepared`, `data_config`), and the worker shuffles their rows in windows of
  `data.window_batches` batches: each row is copied once, to a random place of a contiguous
  window, and the window's batches are slices of it (no per-batch copy, no per-row
  objects). When the family's examples are the same every epoch (Task.examples_fixed) and
  the worker's share fits (`data.keep`), the first epoch's windows are kept as one array
  per column and every later epoch is a new permutation of them: no reading, no Ray Data,
  one gather a batch, done on the GPU itself when the columns fit there (`data.on_device`).
- "batch_buffer": Ray Data's iter_torch_batches with a local shuffle buffer of 8 batches
  (the path before issue 50, kept to compare with).

Either way every row of the worker's share comes once an epoch, in an order that differs
from epoch to epoch (seeded by the run's seed, the epoch and the worker's rank), and only
an epoch's last batch may be short. Under Ray Train (`data_config`), the window shuffle's
order is the same for the same seed, run after run: blocks, workers' shares and rows.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Literal

import numpy as np
import ray
import ray.train
import torch
import torch.distributed as dist
from pydantic import Field
from torch import Tensor

from conceptual.config import Config

# Ray Data's local shuffle buffer of the batch_buffer path, in batches.
BUFFER_BATCHES = 8
# Rows at least this large are gathered one copy each: np.take and torch.index_select
# copied 8x8 features several times slower on the 2 CPUs measured (BENCHMARKS.md).
ROW_BY_ROW_BYTES = 64 * 1024
# Arrays a Reused pool tracks per shape, beyond which they are fresh and not tracked: the
# batches in flight (the step's, one read ahead, the device copies) with some slack; two
# windows (the one read and the one filled) and one to spare, as windows are large.
POOLED_BATCHES, POOLED_WINDOWS = 8, 3


class DataSettings(Config):
    """The `data` section of every trainer's config: how the training rows reach the step."""

    shuffle: Literal["window", "batch_buffer"] = "window"
    window_batches: int = Field(default=8, ge=1)  # rows shuffled together (window), in batches
    # "auto": keep the first epoch's examples in memory when the family's are the same every
    # epoch and they fit under keep_max_gb; "never": read them again every epoch.
    keep: Literal["auto", "never"] = "auto"
    keep_max_gb: float | None = Field(default=None, gt=0)  # None: a third of the free memory
    # "auto": the kept examples on the GPU when they take under half of its free memory
    on_device: Literal["auto", "never"] = "auto"


def prepared(rows: ray.data.Dataset, settings: DataSettings, seed: int) -> ray.data.Dataset:
    """The training rows as the trainer hands them to its workers: for the window shuffle,
    blocks in a random order drawn from `seed` and the epoch. The plan is lazy and run once
    an epoch; Ray Data counts a dataset's runs and reseeds with the count (a resumed
    training counts from its restart)."""
    if settings.shuffle != "window":
        return rows
    order = ray.data.RandomSeedConfig(seed=seed, reseed_after_execution=True)
    return rows.randomize_block_order(seed=order)


def trainer_data(rows: ray.data.Dataset, settings: DataSettings, seed: int) -> dict[str, Any]:
    """A TorchTrainer's data arguments: the training rows `prepared`, named "train" (the
    workers' ray.train.get_dataset_shard("train")), and how they are split (`data_config`)."""
    return {
        "datasets": {"train": prepared(rows, settings, seed)},
        "dataset_config": data_config(settings),
    }


def data_config(settings: DataSettings) -> ray.train.DataConfig:
    """How Ray Train splits the training rows among its workers: Ray Data's ingest options,
    with the blocks kept in order for the window shuffle. The read tasks finish in any
    order, and the block shuffle draws from the order it receives; the split then hands
    blocks out by rows given so far, not by which node holds them (Ray Data drops locality
    to keep the order): the same seed, the same shares."""
    options = ray.train.DataConfig.default_ingest_options()
    options.preserve_order = options.preserve_order or settings.shuffle == "window"
    return ray.train.DataConfig(execution_options=options)


class Batches:
    """One worker's batches, an epoch at a time, holding what it keeps between epochs."""

    def __init__(
        self,
        settings: DataSettings,
        batch_size: int,
        device: torch.device,
        seed: int,
        rank: int,
        prefetch_batches: int,
        examples_fixed: bool = False,
    ):
        self.settings, self.batch_size, self.device = settings, batch_size, device
        self.seed, self.rank, self.prefetch_batches = seed, rank, prefetch_batches
        self.keeps = examples_fixed and settings.keep == "auto"
        self.kept: dict[str, np.ndarray] | dict[str, Tensor] | None = None
        self.batch_arrays, self.window_arrays = Reused(POOLED_BATCHES), Reused(POOLED_WINDOWS)

    def epoch(self, rows: ray.data.DataIterator, epoch: int) -> Iterator[dict[str, Tensor]]:
        """The epoch's batches, on the device: from what was kept when there is, else read
        from `rows` (the worker's dataset shard)."""
        if self.settings.shuffle == "batch_buffer":
            return buffer_shuffled(
                rows, self.batch_size, self.device, self.prefetch_batches, epoch, self.seed
            )
        rng = np.random.default_rng((self.seed, epoch, self.rank))
        if self.kept is not None:
            return self._from_kept(rng)
        return self._streamed(rows, rng)

    def _streamed(self, rows: ray.data.DataIterator, rng: np.random.Generator) -> Iterator:
        keeping = Keeping(self._keep_budget()) if self.keeps else None
        blocks = rows.iter_batches(
            batch_size=None, batch_format="numpy", prefetch_batches=self.prefetch_batches
        )
        size = self.batch_size * self.settings.window_batches
        # kept windows are never written again; the others are used again once read
        allocate = np.empty if keeping is not None else self.window_arrays.array
        for window in windows(blocks, size, rng, allocate):
            if keeping is not None and not keeping.add(window):
                keeping = None  # over the budget: every epoch reads again
            for start in range(0, row_count(window), self.batch_size):
                end = start + self.batch_size
                yield self._to_device(
                    {k: torch.from_numpy(v[start:end]) for k, v in window.items()}
                )
        if self.keeps:
            if all_workers(keeping is not None, self.device):
                self.kept = keeping.columns(self.device, self.settings.on_device == "auto")
            self.keeps = False  # kept, or not worth trying again: the data stays as large

    def _from_kept(self, rng: np.random.Generator) -> Iterator[dict[str, Tensor]]:
        kept = self.kept
        assert kept is not None
        order = rng.permutation(row_count(kept))
        on_gpu = isinstance(next(iter(kept.values())), Tensor)
        if on_gpu:  # gathered where they are: no host work at all
            order = torch.from_numpy(order).to(self.device)
        for start in range(0, len(order), self.batch_size):
            picked = order[start : start + self.batch_size]
            if on_gpu:
                yield {k: v.index_select(0, picked) for k, v in kept.items()}
                continue
            batch = {}
            for name, column in kept.items():
                # into an array used before: fresh memory costs page faults, on this
                # path more than the copy itself
                shape = (self.batch_size, *column.shape[1:])
                out = self.batch_arrays.array(shape, column.dtype)[: len(picked)]
                gather(column, picked, out)
                batch[name] = torch.from_numpy(out)
            yield self._to_device(batch)

    def _to_device(self, batch: dict[str, Tensor]) -> dict[str, Tensor]:
        if self.device.type != "cuda":
            return batch
        # Pinned host memory lets the copy run asynchronously, beside the step; pin_memory()
        # takes it from torch's caching host allocator, which reuses a block once the copy
        # from it is done.
        return {
            k: v if v.device == self.device else v.pin_memory().to(self.device, non_blocking=True)
            for k, v in batch.items()
        }

    def _keep_budget(self) -> float:
        if self.settings.keep_max_gb is not None:
            return self.settings.keep_max_gb * 1e9
        # a third: concatenating the kept windows needs them twice for a moment
        return available_memory() / 3


class Keeping:
    """The windows of a first epoch, while they stay under a budget of bytes."""

    def __init__(self, budget: float):
        self.budget, self.size, self.windows = budget, 0, []

    def add(self, window: dict[str, np.ndarray]) -> bool:
        """Keep the window (it is never written again); False once over the budget."""
        self.size += sum(v.nbytes for v in window.values())
        self.windows.append(window)
        return self.size <= self.budget

    def columns(
        self, device: torch.device, on_device: bool
    ) -> dict[str, np.ndarray] | dict[str, Tensor]:
        """One array per column; tensors on the GPU when `on_device` and they take under
        half of its free memory (batches are then gathered there, with no host copy)."""
        names = self.windows[0].keys() if self.windows else ()
        kept = {k: np.concatenate([w[k] for w in self.windows]) for k in names}
        self.windows = []
        free = torch.cuda.mem_get_info(device)[0] if device.type == "cuda" else 0
        if on_device and self.size < free / 2:
            return {k: torch.from_numpy(v).to(device) for k, v in kept.items()}
        return kept


class Reused:
    """Arrays handed out again once nothing uses them: torch.from_numpy's tensors, and
    every view of them, hold a reference to their array, so an array's reference count
    says whether a batch cut from it is still alive anywhere (kept by the caller, saved for
    a backward pass). A caller that keeps every batch only gets fresh arrays."""

    def __init__(self, limit: int):
        self.limit, self.pools = limit, {}

    def array(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        pool = self.pools.setdefault((tuple(shape), np.dtype(dtype)), [])
        for i in range(len(pool)):
            if sys.getrefcount(pool[i]) == 2:  # the pool's reference and getrefcount's
                return pool[i]
        array = np.empty(shape, dtype)
        if len(pool) < self.limit:
            pool.append(array)
        return array


def windows(
    blocks: Iterable[dict[str, np.ndarray]],
    size: int,
    rng: np.random.Generator,
    allocate: Callable[[tuple[int, ...], np.dtype], np.ndarray] = np.empty,
) -> Iterator[dict[str, np.ndarray]]:
    """The blocks' rows in windows of `size` rows, shuffled: each row is copied once, to a
    random free place of a window (`allocate`d). The last window holds what is left, in the
    random order of the places its rows took."""
    window: dict[str, np.ndarray] | None = None
    places, filled = np.empty(0, np.int64), 0
    for block in blocks:
        count, done = row_count(block), 0
        while done < count:
            if window is None:
                window = {k: allocate((size, *v.shape[1:]), v.dtype) for k, v in block.items()}
                places, filled = rng.permutation(size), 0
            taken = min(count - done, size - filled)
            into = places[filled : filled + taken]
            for name, column in block.items():
                window[name][into] = column[done : done + taken]
            filled, done = filled + taken, done + taken
            if filled == size:
                yield window
                window = None
    if window is not None:
        taken = np.sort(places[:filled])
        yield {k: v[taken] for k, v in window.items()}


def buffer_shuffled(
    rows: ray.data.DataIterator,
    batch_size: int,
    device: torch.device,
    prefetch_batches: int,
    epoch: int,
    seed: int = 0,
) -> Iterable[dict[str, Tensor]]:
    """data.shuffle=batch_buffer: Ray Data cuts the batches from the blocks' columns,
    shuffles them in a local buffer, pins them and copies them to the device in a
    background thread, `prefetch_batches` ahead of the step."""
    return rows.iter_torch_batches(
        batch_size=batch_size,
        device=device,
        pin_memory=device.type == "cuda",
        prefetch_batches=prefetch_batches,
        local_shuffle_buffer_size=batch_size * BUFFER_BATCHES,
        local_shuffle_seed=seed + epoch,
    )


def all_workers(agrees: bool, device: torch.device) -> bool:
    """Whether every worker of the training group agrees (one worker: whether it does). A
    worker that keeps its epoch stops reading its shard, and Ray Data's split of the
    dataset waits at each epoch for every worker's shard: all keep, or none."""
    if not dist.is_available() or not dist.is_initialized() or dist.get_world_size() == 1:
        return agrees
    on = device if dist.get_backend() == "nccl" else torch.device("cpu")
    flag = torch.tensor([int(agrees)], device=on)
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    return bool(flag.item())


def gather(column: np.ndarray, rows: np.ndarray, out: np.ndarray) -> None:
    """out[i] = column[rows[i]]: large rows one memcpy each (ROW_BY_ROW_BYTES)."""
    if column.ndim > 1 and column[0].nbytes >= ROW_BY_ROW_BYTES:
        for i, row in enumerate(rows):
            out[i] = column[row]
    else:
        np.take(column, rows, axis=0, out=out)


def row_count(columns: Mapping[str, np.ndarray | Tensor]) -> int:
    return len(next(iter(columns.values()))) if columns else 0


def available_memory() -> float:
    """Bytes of memory available to new allocations (Linux's MemAvailable; else free)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024.0
    except OSError:
        pass
    return float(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
