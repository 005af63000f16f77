"""A pipeline as a list of steps (docs/design.md), after NeMo Curator's ProcessingStage but
smaller. A `Stage` (records.py) is a row of the funnel: the name a rejected row carries in
`stage`, the reasons it may give, and the settings that decide them. A `Step` is one Ray
Data operator and the stages it decides (one spaCy parse serves three: text, syntax,
hypernymize); a `GlobalStep` decides a stage over all the rows at once (tally every batch,
then decide each row: exact duplicates, the entity-frequency rule). A pipeline is its steps
in order (pipelines/curation/curation.py, `steps`), each declaring the columns it needs and adds,
`checked` as it is built; its STAGES and its funnel follow from them, and `run_steps` and
`run_global_steps` run them.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import ray.data

from conceptual.errors import describe, stage_of
from conceptual.pipelines.dataflow.executors import Resources
from conceptual.pipelines.dataflow.journal import write_batch
from conceptual.pipelines.dataflow.rows import gathered, quarantine
from conceptual.records import Stage
from conceptual.services import ServiceDown

log = logging.getLogger(__name__)

# What becomes of one row whose processing raised: (the row as a one-row batch, the stage,
# the detail) -> the row as the step would have output it, rejected.
Quarantine = Callable[[pa.Table, str, str], pa.Table]


@dataclass(frozen=True)
class Step:
    """An operator over pyarrow batches of rows, marking those it rejects (pipelines/dataflow/rows.py):
    a class runs as actors (what it loads, it loads once per actor), a function as tasks.
    `kwargs` go to the class's constructor or to the function with each batch."""

    stages: tuple[Stage, ...]  # the funnel's stages it decides, in order
    operator: Callable
    kwargs: Mapping[str, Any]
    resources: Resources
    needs: tuple[str, ...] = ()  # the columns it reads: the input's or an earlier step's
    adds: tuple[str, ...] = ()  # the columns it fills
    materialize: bool = False  # all its output before the next step starts
    quarantine: Quarantine = quarantine
    # The operator takes `journal` and writes its rows there as each is done, rather than
    # the whole batch at its end (fetching: a kill then loses only what was in flight).
    journals_itself: bool = False

    @property
    def name(self) -> str:
        return self.stages[0].name


@dataclass(frozen=True)
class GlobalStep:
    """A rule over all the rows at once (pipelines/dataflow/rows.py has the functions): `tally` counts
    each batch into a table, `decide(the tables of every batch as one, **kwargs)` returns the
    arguments of `apply` and what stats.json reports of the rule, and `apply` then rejects
    rows batch by batch. A step whose tallies grow with the input (`gathers=False`) decides
    over them as a dataset instead, on the cluster. Global steps come after the
    per-candidate ones: a resumed run resumes those, and a global rule must count every row
    of this run."""

    stages: tuple[Stage, ...]
    tally: Callable[[pa.Table], pa.Table]
    decide: Callable[..., tuple[dict[str, Any], dict[str, Any]]]
    apply: Callable[..., pa.Table]
    kwargs: Mapping[str, Any]  # to `decide`
    batch_size: int  # rows per task of the tally and of `apply`
    gathers: bool = True  # decide gets the tallies as one table here, or else as a dataset
    needs: tuple[str, ...] = ()  # the columns it reads: the input's or an earlier step's
    adds: tuple[str, ...] = ()  # the columns it fills

    @property
    def name(self) -> str:
        return self.stages[0].name


def checked(
    steps: Iterable[Step | GlobalStep], provided: Iterable[str]
) -> tuple[Step | GlobalStep, ...]:
    """The steps, once each finds the columns it needs filled by the input (`provided`) or
    an earlier step, and the global steps come last: a pipeline in the wrong order fails as
    it is built, not on its rows."""
    steps, filled = tuple(steps), set(provided)
    names = ", ".join(step.name for step in steps)
    for number, step in enumerate(steps):
        missing = [column for column in step.needs if column not in filled]
        if missing:
            raise ValueError(
                f"the {step.name} step needs {', '.join(missing)}, which neither the input nor "
                f"an earlier step provides (steps: {names})"
            )
        if isinstance(step, Step) and any(isinstance(s, GlobalStep) for s in steps[:number]):
            raise ValueError(
                f"the {step.name} step comes after a global step: global steps go last, "
                f"after every per-candidate step (steps: {names})"
            )
        filled.update(step.adds)
    return steps


def per_candidate(steps: Iterable[Step | GlobalStep]) -> tuple[Step, ...]:
    return tuple(step for step in steps if isinstance(step, Step))


def fitted(steps: Iterable[Step | GlobalStep], blocks: int | None) -> tuple[Step | GlobalStep, ...]:
    """The steps, the first per-candidate one (which the reader feeds) starting no more
    actors than the `blocks` its input comes in: Ray Data hands an actor a block at a time,
    so an actor more would only start a process and load its models (spaCy, WordNet) for
    nothing. A pool of a set size is left as it is, and every step when `blocks` is None."""
    steps = tuple(steps)
    if blocks is None:
        return steps
    for number, step in enumerate(steps):
        if isinstance(step, Step):
            if not step.resources.tasks and step.resources.workers is None:
                resources = dataclasses.replace(step.resources, most=max(blocks, 1))
                steps = (
                    *steps[:number],
                    dataclasses.replace(step, resources=resources),
                    *steps[number + 1 :],
                )
            break
    return steps


def run_global_steps(
    dataset: ray.data.Dataset, steps: Iterable[Step | GlobalStep]
) -> tuple[ray.data.Dataset, dict[str, dict[str, Any]]]:
    """The dataset with the global steps' rejections (lazy: the tallies have run, `apply`
    runs as the result is consumed), and what each reports, by its name."""
    reports = {}
    for step in steps:
        if not isinstance(step, GlobalStep):
            continue
        tallies = dataset.map_batches(
            step.tally, batch_format="pyarrow", batch_size=step.batch_size
        )
        if step.gathers:
            tallies = gathered(tallies, step.tally)
        arguments, reports[step.name] = step.decide(tallies, **step.kwargs)
        dataset = dataset.map_batches(
            step.apply, fn_kwargs=arguments, batch_format="pyarrow", batch_size=step.batch_size
        )
    return dataset, reports


def run_steps(
    dataset: ray.data.Dataset, steps: Iterable[Step | GlobalStep], journal=None
) -> ray.data.Dataset:
    """Each per-candidate step as a guarded operator (`guarded`): no row that raises ends the
    run. With a `journal` (pipelines/dataflow/journal.py), each step writes the batches it finishes
    there, and the rows an earlier attempt of the run wrote join after the step that wrote
    them."""
    for number, step in enumerate(per_candidate(steps)):
        target = journal.target(number) if journal is not None else None
        kwargs = {**step.kwargs, "journal": target} if step.journals_itself else step.kwargs
        fn, arguments = guarded(
            step.operator,
            kwargs,
            step.stages[0].name,
            step.quarantine,
            None if step.journals_itself else target,
        )
        dataset = dataset.map_batches(
            fn,
            **arguments,
            batch_size=step.resources.batch_size,
            batch_format="pyarrow",
            **step.resources.placement(),
        )
        if journal is not None and (resumed := journal.resumed(number)) is not None:
            dataset = dataset.union(resumed)
        if step.materialize:
            dataset = dataset.materialize()
    return dataset


def guarded(
    operator: Callable,
    kwargs: Mapping[str, Any],
    stage: str,
    quarantine: Quarantine,
    journal: tuple[Any, str] | None = None,
) -> tuple[Callable, dict[str, Any]]:
    """(fn, map_batches arguments) running `operator` so that a row whose processing raises
    is quarantined (`isolate`) instead of failing its batch and the run, and each finished
    batch is written to `journal` ((filesystem, directory)) when given. A class is built once
    per actor, outside the guard: a model or asset that will not load fails the run at
    startup, as it should, rather than every row."""
    settings = {"kwargs": dict(kwargs), "stage": stage, "quarantine": quarantine}
    settings["journal"] = journal
    if isinstance(operator, type):
        return GuardedActor, {"fn_constructor_kwargs": {"operator": operator, **settings}}
    return guarded_call, {"fn_kwargs": {"operator": operator, **settings}}


class GuardedActor:
    def __init__(self, operator: type, kwargs, stage: str, quarantine, journal=None):
        self.call = operator(**kwargs)
        self.stage, self.quarantine, self.journal = stage, quarantine, journal

    def __call__(self, batch: pa.Table) -> pa.Table:
        return finished(isolate(self.call, batch, self.stage, self.quarantine), self.journal)


def guarded_call(
    batch: pa.Table, operator: Callable, kwargs, stage: str, quarantine, journal=None
) -> pa.Table:
    call = functools.partial(operator, **kwargs)
    return finished(isolate(call, batch, stage, quarantine), journal)


def finished(batch: pa.Table, journal: tuple[Any, str] | None) -> pa.Table:
    if journal is not None:
        write_batch(batch, *journal)
    return batch


def isolate(
    call: Callable[[pa.Table], pa.Table], batch: pa.Table, stage: str, quarantine: Quarantine
) -> pa.Table:
    """`isolated`, with the quarantined rows in the output beside the others (curation's
    rejected rows travel with the kept ones)."""
    output, failed = isolated(call, batch, stage, quarantine)
    parts = [*([output] if output is not None else []), *failed]
    return pa.concat_tables(parts, promote_options="default")


def isolated(
    call: Callable[[pa.Table], pa.Table], batch: pa.Table, stage: str, reject: Quarantine
) -> tuple[pa.Table | None, list[pa.Table]]:
    """`call(batch)`, and the rows it failed on: (the other rows' output, or None when every
    row raised; `reject(row, stage, detail)` of each row that raised). A batch that raises
    runs again row by row to find the rows that raise on their own; then the other rows run
    again together, not each alone: a batched model's output for a row can depend, in its
    last bits, on its batch (on two threads, a CNN's features of a photo alone differ from
    its features among others), so they come out as close as can be to a run without the
    fault. The stage is the code's own name for where it raised (errors.failing_as), else
    `stage`. A service that stopped answering (ServiceDown) is no row's failure: it ends the
    job, where row by row each row would wait out its deadline again."""
    try:
        return call(batch), []
    except ServiceDown:
        raise
    except Exception as exc:  # noqa: BLE001 - any row's failure is that row's, not the run's
        if batch.num_rows == 0:
            raise
        if batch.num_rows == 1:
            return None, [reject(batch, stage_of(exc, stage), describe(exc))]
        log.warning("stage %s: a batch of %d raised %s; row by row", stage, batch.num_rows, exc)
    alone, rejected, failed = [], [], np.zeros(batch.num_rows, bool)
    for i in range(batch.num_rows):
        row = batch.slice(i, 1)
        try:
            alone.append(call(row))
        except ServiceDown:
            raise
        except Exception as exc:  # noqa: BLE001
            failed[i] = True
            rejected.append(reject(row, stage_of(exc, stage), describe(exc)))
    if failed.all():
        return None, rejected
    if failed.any():
        try:
            return call(batch.filter(pa.array(~failed))), rejected
        except Exception as exc:  # noqa: BLE001 - they raise only together: as they came alone
            log.warning("stage %s: the rows that pass alone raised together: %s", stage, exc)
    return pa.concat_tables(alone, promote_options="default"), rejected
