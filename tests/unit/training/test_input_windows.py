"""The window shuffle of the training input path (pipelines/training/input_path.py), on plain arrays:
every row once, its columns kept together, a different order for another seed."""

import numpy as np

from conceptual.pipelines.training.input_path import windows


def blocks(rows: int, block: int):
    """Blocks of `block` rows whose `features` rows repeat their `id`, as Ray Data gives them."""
    for start in range(0, rows, block):
        ids = np.arange(start, min(start + block, rows))
        yield {"id": ids, "features": np.repeat(ids[:, None], 3, axis=1).astype(np.float32)}


def shuffled(rows: int, block: int, size: int, seed: int) -> list[dict[str, np.ndarray]]:
    return list(windows(blocks(rows, block), size, np.random.default_rng(seed)))


def test_every_row_once_with_its_columns_and_only_the_last_window_short():
    result = shuffled(rows=1000, block=32, size=96, seed=0)
    ids = np.concatenate([w["id"] for w in result])
    assert sorted(ids) == list(range(1000))
    for window in result:
        assert (window["features"] == window["id"][:, None]).all()
    assert [len(w["id"]) for w in result] == [96] * 10 + [40]


def test_rows_mix_across_blocks_and_the_order_follows_the_seed():
    first, again, other = (shuffled(600, 32, 200, seed)[0]["id"] for seed in (1, 1, 2))
    assert (first == again).all()
    assert (first != other).any()
    assert len(set(first // 32)) > 3  # a window draws on several blocks, in no block's order
    assert (np.diff(first) != 1).sum() > 100


def test_blocks_larger_than_a_window_and_empty_ones():
    empty = [{"id": np.empty(0, np.int64), "features": np.empty((0, 3), np.float32)}]
    result = list(windows([*empty, *blocks(250, 250)], 64, np.random.default_rng(0)))
    assert sorted(np.concatenate([w["id"] for w in result])) == list(range(250))
    assert [len(w["id"]) for w in result] == [64, 64, 64, 58]


def test_an_array_is_handed_out_again_only_when_no_batch_uses_it():
    import torch

    from conceptual.pipelines.training.input_path import Reused

    arrays = Reused(limit=2)
    first = arrays.array((4, 3), np.float32)
    pooled = id(first)  # the pool keeps it alive: the id stays its own
    batch = torch.from_numpy(first[:2])[1:]  # a view of a view, as a step may keep one
    del first
    second = arrays.array((4, 3), np.float32)
    assert not np.shares_memory(second, batch.numpy())
    del batch
    assert id(arrays.array((4, 3), np.float32)) == pooled  # free again
    held = [arrays.array((4, 3), np.float32) for _ in range(3)]  # over the limit: fresh ones
    assert len({id(a) for a in held}) == 3
