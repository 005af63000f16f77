"""The training input path over a Ray dataset (pipelines/input_path.py): each way of
shuffling gives every row once an epoch, its columns together, in a new order every epoch;
the default keeps the first epoch's rows, and later epochs do not read the dataset."""

import numpy as np
import pytest
import torch

from conceptual.pipelines.input_path import Batches, DataSettings, prepared

pytestmark = pytest.mark.integration

ROWS, BATCH, EPOCHS = 1000, 64, 3


@pytest.fixture(scope="module")
def dataset(ray_local):
    """Rows whose `features` repeat their `id`, in blocks of about 32 rows (as the features
    job writes its row groups)."""
    import ray

    items = [{"id": i, "features": np.full(4, i, np.float16)} for i in range(ROWS)]
    return ray.data.from_items(items, override_num_blocks=ROWS // 32)


def epochs(dataset, settings: DataSettings, examples_fixed: bool) -> tuple[Batches, list]:
    feed = Batches(settings, BATCH, torch.device("cpu"), seed=0, examples_fixed=examples_fixed)
    rows = prepared(dataset, settings)
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
