"""No row ends a job (conceptual.errors, pipelines/dataflow/steps.py `isolate`): a row whose
processing raises is rejected as internal_error and every other row comes out as it would
have; past the error budget the job fails with one line. No Ray here."""

from __future__ import annotations

import pyarrow as pa
import pytest

from conceptual import errors
from conceptual.errors import INTERNAL_ERROR, ErrorsConfig, TooManyErrors, failing_as
from conceptual.pipelines.dataflow.rows import pending, quarantine, reject, table
from conceptual.pipelines.dataflow.steps import guarded, isolate
from conceptual.records import IN_FLIGHT, Rejection


def candidates(texts: list[str]) -> pa.Table:
    rows = [
        {"id": f"id{i}", "image_url": f"http://x.test/{i}.jpg", "alt_text": t, "position": i}
        for i, t in enumerate(texts)
    ]
    return pa.Table.from_pylist(rows, schema=IN_FLIGHT)


class Shouting:
    """A stand-in stage: upper-cases each caption, rejects 'bad', raises on 'boom'."""

    def __init__(self):
        self.calls = 0

    def __call__(self, batch: pa.Table) -> pa.Table:
        self.calls += 1
        rows = batch.to_pylist()
        for i in pending(rows):
            text = rows[i]["alt_text"]
            with failing_as("syntax"):
                if "boom" in text:
                    raise IndexError(f"[E1002] Span index out of range in {text!r}")
            if text == "bad":
                reject(rows[i], "text", Rejection("empty", "bad"))
            else:
                rows[i]["caption"] = text.upper()
        return table(rows)


def test_only_the_row_that_raises_is_quarantined_and_the_rest_are_identical():
    texts = ["a dog on a beach", "boom goes the 747", "bad", "a cat at the airport"]
    batch = candidates(texts)
    clean = Shouting()(batch.filter(pa.compute.not_equal(batch["id"], "id1")))
    out = isolate(Shouting(), batch, "text", quarantine)
    assert out.num_rows == 4
    failed = out.filter(pa.compute.equal(out["reason"], INTERNAL_ERROR)).to_pylist()
    assert [r["id"] for r in failed] == ["id1"]
    # the stage named where it raised, the detail its class and message; the row kept whole
    assert failed[0]["stage"] == "syntax"
    assert failed[0]["detail"].startswith("IndexError: [E1002] Span index out of range")
    assert failed[0]["alt_text"] == "boom goes the 747" and failed[0]["caption"] is None
    others = out.filter(pa.compute.not_equal(out["id"], "id1"))
    assert others.combine_chunks().equals(clean)  # byte for byte, as without the fault


def test_a_batch_without_a_failure_runs_once():
    stage = Shouting()
    isolate(stage, candidates(["a dog", "a cat"]), "text", quarantine)
    assert stage.calls == 1


def test_the_stage_of_the_step_when_the_code_names_none():
    def broken(batch):
        raise KeyError("caption")

    (row,) = isolate(broken, candidates(["a dog"]), "fetch", quarantine).to_pylist()
    assert (row["stage"], row["reason"], row["detail"]) == (
        "fetch",
        INTERNAL_ERROR,
        "KeyError: 'caption'",
    )


def test_an_empty_batch_that_raises_is_not_swallowed():
    def broken(batch):
        raise RuntimeError("no rows, so a bug of the stage itself")

    with pytest.raises(RuntimeError):
        isolate(broken, candidates([]), "text", quarantine)


def test_failing_as_keeps_the_innermost_stage():
    with pytest.raises(ValueError) as raised:
        with failing_as("text"):
            with failing_as("hypernymize"):
                raise ValueError("x")
    assert errors.stage_of(raised.value, "nlp") == "hypernymize"


def test_the_detail_hides_credentials_and_is_bounded():
    detail = errors.describe(OSError("GET http://admin:SECRET@10.0.0.1/x failed " + "y" * 900))
    assert "SECRET" not in detail and "***@10.0.0.1" in detail
    assert len(detail) <= errors.DETAIL_CHARS


def test_the_budget_is_the_rate_and_the_count():
    assert ErrorsConfig().budget(1_000_000) == 1000
    assert ErrorsConfig(max_count=10).budget(1_000_000) == 10
    assert ErrorsConfig(max_rate=0.5).budget(3) == 1


def test_past_the_budget_the_job_fails_with_one_line():
    errors.check({"hypernymize": 1}, 1000, ErrorsConfig())  # within 0.001 of 1000
    with pytest.raises(TooManyErrors) as raised:
        errors.check(
            {"hypernymize": 7, "fetch": 2},
            1000,
            ErrorsConfig(),
            {"hypernymize": ["a1", "b2", "c3", "d4"]},
        )
    message = str(raised.value)
    assert "\n" not in message
    assert "9 of 1000 rows failed" in message and "stage hypernymize failed 7" in message
    assert "a1, b2, c3" in message and "d4" not in message


def test_a_stage_that_cannot_load_fails_at_startup_not_row_by_row():
    class NeedsWeights:
        def __init__(self, path: str):
            raise FileNotFoundError(f"no CNN weights at {path}")

    fn, arguments = guarded(NeedsWeights, {"path": "/nowhere"}, "overlap", quarantine)
    with pytest.raises(FileNotFoundError):
        fn(**arguments["fn_constructor_kwargs"])
