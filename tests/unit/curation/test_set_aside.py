"""pipelines/dataflow/set_aside.py without Ray: a batch that raises is run again row by row, the rows
that raise alone are rejected with their columns, and the others run again together."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conceptual.errors import INTERNAL_ERROR, ErrorsConfig, TooManyErrors
from conceptual.pipelines.dataflow import set_aside
from conceptual.pipelines.dataflow.steps import isolated
from conceptual.records import REJECTED, REJECTION, rejected_records

BATCH = pa.table({"id": ["a", "b", "c", "d"], "text": ["fine", "bad", "fine", "fine"]})


def sized(batch: pa.Table) -> pa.Table:
    """An operator whose output for a row depends on its batch's size (as a batched model's
    last bits can), and that raises on a bad text."""
    if "bad" in batch["text"].to_pylist():
        raise ValueError("cannot read 'bad'")
    return pa.table({"id": batch["id"], "batch": [batch.num_rows] * batch.num_rows})


def test_only_the_row_that_raises_is_rejected_and_the_others_run_together():
    output, rejected = isolated(sized, BATCH, "stage", set_aside.reject_row)
    assert output.to_pylist() == [{"id": i, "batch": 3} for i in ("a", "c", "d")]
    (row,) = rejected
    assert row.schema == rejected_records(BATCH.schema)
    assert row.to_pylist() == [
        {"id": "b", "stage": "stage", "reason": INTERNAL_ERROR,
         "detail": "ValueError: cannot read 'bad'", "text": "bad"}
    ]  # fmt: skip


def test_a_batch_without_a_fault_is_run_once():
    calls = []

    def call(batch):
        calls.append(batch.num_rows)
        return sized(batch)

    output, rejected = isolated(call, BATCH.slice(2), "stage", set_aside.reject_row)
    assert (calls, rejected, output["batch"].to_pylist()) == ([2], [], [2, 2])


def test_every_row_raising_leaves_no_output():
    output, rejected = isolated(sized, BATCH.slice(1, 1), "stage", set_aside.reject_row)
    assert output is None and len(rejected) == 1


def test_rows_that_raise_only_together_come_out_as_they_did_alone():
    def together(batch):
        if batch.num_rows > 1:
            raise MemoryError("too many at once")
        return pa.table({"id": batch["id"]})

    output, rejected = isolated(together, BATCH, "stage", set_aside.reject_row)
    assert output["id"].to_pylist() == ["a", "b", "c", "d"] and rejected == []


def test_rejected_rows_are_written_counted_and_checked(tmp_path):
    _, rejected = isolated(sized, BATCH, "stage", set_aside.reject_row)
    folder = str(tmp_path / "rejected")
    first = set_aside.write_rejected(rejected, folder)
    assert set_aside.write_rejected(rejected, folder) == first  # a retried batch: the same file
    assert pq.read_table(first).to_pylist() == rejected[0].to_pylist()
    counts, samples = set_aside.tally(folder)
    assert (counts, samples) == ({"stage": {INTERNAL_ERROR: 1}}, {"stage": ["b"]})
    assert set_aside.metrics(counts) == {"rejected.stage.internal_error": 1}
    set_aside.check(counts, 1000, ErrorsConfig(), samples)  # 1 of 1000: within 0.001
    with pytest.raises(TooManyErrors, match="stage stage failed 1 rows, e.g. ids b;"):
        set_aside.check(counts, 999, ErrorsConfig(), samples)


def test_rejected_is_the_rejection_of_a_candidate_without_its_image():
    candidate = pa.schema([f for f in REJECTED if f.name not in REJECTION.names])
    assert rejected_records(candidate) == REJECTED
