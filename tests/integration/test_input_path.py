"""The training input path over a Ray dataset (pipelines/training/input_path.py): each way of
shuffling gives every row once an epoch, its columns together, in a new order every epoch;
the default keeps the first epoch's rows, and later epochs do not read the dataset; the
window shuffle's order, split among workers as Ray Train splits it, follows the seed."""

import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import torch

from conceptual.pipelines.training.input_path import (
    Batches,
    DataSettings,
    data_config,
    prepared,
    trainer_data,
)
from conceptual.pipelines.training.training import TrainingConfig

pytestmark = pytest.mark.integration

ROWS, BATCH, EPOCHS = 1000, 64, 3
PREFETCH = TrainingConfig.model_fields["prefetch_batches"].default


def rows():
    """Rows whose `features` repeat their `id`, in blocks of about 32 rows (as the features
    job writes its row groups)."""
    import ray

    items = [{"id": i, "features": np.full(4, i, np.float16)} for i in range(ROWS)]
    return ray.data.from_items(items, override_num_blocks=ROWS // 32)


@pytest.fixture(scope="module")
def dataset(ray_local):
    return rows()


def epochs(dataset, settings: DataSettings, examples_fixed: bool) -> tuple[Batches, list]:
    feed = Batches(settings, BATCH, torch.device("cpu"), 0, 0, PREFETCH, examples_fixed)
    rows = prepared(dataset, settings, 0)
    return feed, [list(feed.epoch(rows.iterator(), epoch)) for epoch in range(EPOCHS)]


def check_epochs(batches_by_epoch: list[list[dict[str, torch.Tensor]]], full: bool = True) -> None:
    """Every row once an epoch with its columns, a new order every epoch; with `full`, only
    an epoch's last batch short."""
    orders = []
    for batches in batches_by_epoch:
        if full:
            assert all(len(b["id"]) == BATCH for b in batches[:-1])
        for batch in batches:
            assert (batch["features"] == batch["id"][:, None]).all()
        order = torch.cat([b["id"] for b in batches])
        assert sorted(order.tolist()) == list(range(ROWS))  # every row once
        orders.append(order)
    for i, order in enumerate(orders):
        for other in orders[i + 1 :]:
            assert not torch.equal(order, other)


@pytest.mark.parametrize("keep", ["auto", "never"])
def test_window_shuffle_every_row_once_in_a_new_order(dataset, keep):
    feed, batches = epochs(dataset, DataSettings(keep=keep), examples_fixed=True)
    check_epochs(batches)
    assert (feed.kept is not None) == (keep == "auto")


def test_kept_epochs_do_not_read_the_dataset(dataset):
    feed, _ = epochs(dataset, DataSettings(), examples_fixed=True)
    unreadable = None  # a kept epoch never touches its shard
    check_epochs([list(feed.epoch(unreadable, epoch)) for epoch in range(3, 3 + EPOCHS)])


def test_examples_drawn_anew_or_over_the_budget_are_read_every_epoch(dataset):
    drawn, _ = epochs(dataset, DataSettings(), examples_fixed=False)
    too_big, batches = epochs(dataset, DataSettings(keep_max_gb=1e-6), examples_fixed=True)
    assert drawn.kept is None and too_big.kept is None
    check_epochs(batches)


def test_batch_buffer_is_todays_path(dataset):
    feed, batches = epochs(dataset, DataSettings(shuffle="batch_buffer"), examples_fixed=True)
    # Ray Data's local shuffle buffer may cut a short batch before the last one (seen: 14
    # batches of 64 rows, one of 40, then one of 64)
    check_epochs(batches, full=False)
    assert feed.kept is None


def shard_epochs(loop_config: dict) -> None:
    """Ray Train's worker loop: the ids of this worker's batches, epoch by epoch, written
    to a file of its rank's, and whether it kept its first epoch."""
    import ray.train

    rank = ray.train.get_context().get_world_rank()
    feed = Batches(DataSettings(), BATCH, torch.device("cpu"), 0, rank, PREFETCH, True)
    shard = ray.train.get_dataset_shard("train")
    seen = [
        torch.cat([b["id"] for b in feed.epoch(shard, epoch)]).tolist() for epoch in range(EPOCHS)
    ]
    result = {"epochs": seen, "kept": feed.kept is not None}
    (Path(loop_config["out"]) / f"{rank}.json").write_text(json.dumps(result))


def test_two_workers_see_every_row_once_an_epoch_and_keep_their_shares(dataset, tmp_path):
    import ray.cloudpickle
    import ray.train
    import ray.train.torch

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import it
    trainer = ray.train.torch.TorchTrainer(
        shard_epochs,
        train_loop_config={"out": str(tmp_path)},
        **trainer_data(dataset, DataSettings(), 0),
        scaling_config=ray.train.ScalingConfig(num_workers=2, resources_per_worker={"CPU": 0.5}),
        run_config=ray.train.RunConfig(storage_path=str(tmp_path), name="shards"),
    )
    trainer.fit()
    workers = [json.loads((tmp_path / f"{rank}.json").read_text()) for rank in (0, 1)]
    assert all(w["kept"] for w in workers)
    for epoch in range(EPOCHS):
        shares = [w["epochs"][epoch] for w in workers]
        assert sorted(shares[0] + shares[1]) == list(range(ROWS))
        assert shares[0] and shares[1]
    assert workers[0]["epochs"][1] != workers[0]["epochs"][2]


def jittered_rows():
    """The rows made anew (a dataset of its own, as a training run's is), through read tasks
    that finish in a random order, as the features' reads and the examples' encoding do."""
    import os
    import time

    def jitter(block):
        time.sleep(os.urandom(1)[0] / 25_000)  # up to 10 ms, drawn from no seed
        return block

    return rows().map_batches(jitter, batch_size=None)


def block_orders(seed: int) -> list[list[list[int]]]:
    """Each worker's blocks (their first ids) as they come, for two epochs, the jittered rows
    split between two workers as Ray Train splits the training rows (prepared, data_config)
    and the workers reading at once."""
    settings = DataSettings()
    shards = data_config(settings).configure(
        {"train": prepared(jittered_rows(), settings, seed)}, 2, None, None
    )

    def read(shard) -> list[list[int]]:
        epochs = (shard.iter_batches(batch_size=None) for _ in range(2))
        return [[int(block["id"][0]) for block in epoch] for epoch in epochs]

    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(read, [shard["train"] for shard in shards]))


def test_the_window_shuffle_follows_the_seed(ray_local):
    """One seed, one order, run after run (the rows' order within windows follows the seed
    too: test_input_windows): the blocks' order, a new one each epoch, and so each worker's
    share; another seed, another order."""
    workers = block_orders(0)
    assert workers == block_orders(0)
    assert workers != block_orders(1)
    assert all(first != second for first, second in workers)
