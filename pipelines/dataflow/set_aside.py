"""Records a job after curation failed to process, set aside (platform/conceptual/errors.py).

The features, score_fluency and build_index jobs run a model over batches of records. A
record whose processing raises becomes a rejection of that record: its stage, reason
`internal_error`, the exception as its detail, then the record's columns as the job read
them (records.rejected_records), in OUTPUT/rejected/*.parquet, so that the job replays it
from there once the cause is fixed (`--data OUTPUT/rejected allow_incomplete=true`, into
another output). The job counts them in its summary and in MLflow
(`rejected.<stage>.internal_error`) and fails past `errors.*` (`check`).

A batch that raises is run again as pipelines/dataflow/steps.py `isolated` runs it, as every
guarded stage's is: row by row to find the culprits, then the other rows together.

score_fluency, translate and recaption rewrite curated records this way on a pool of
actors: their keys are RewriteConfig's, their work rewrite_guarded, their MLflow run
tracked_rewrite.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import mlflow
import pyarrow as pa
import pyarrow.parquet as pq

from conceptual import errors, lineage, storage, tracking
from conceptual.config import Config
from conceptual.errors import INTERNAL_ERROR, ErrorsConfig
from conceptual.pipelines.dataflow.steps import isolated
from conceptual.records import CURATED_LANGUAGE, Stage, rejected_records

REJECTED = "rejected"  # the folder of OUTPUT the rejected rows go to
# (one row that raised, the stage, the detail) -> its rejected row, as stages.Quarantine
Reject = Callable[[pa.Table, str, str], pa.Table]


def reject_row(row: pa.Table, stage: str, detail: str) -> pa.Table:
    """One record that raised, as its rejected row (records.rejected_records of its schema)."""
    schema = rejected_records(row.schema)
    given = {"stage": stage, "reason": INTERNAL_ERROR, "detail": detail}
    columns = [
        pa.array([given[f.name]], f.type) if f.name in given else row[f.name] for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def write_rejected(
    rejected: Sequence[pa.Table], folder: str, schema: pa.Schema | None = None
) -> str:
    """One Parquet file of rejected rows under `folder`, named by its content: a batch run
    again (a retried task) writes the same file again. `schema`: the file's, where the rows
    come in several shapes (a column a row lacks is null). Returns the file's URI."""
    table = pa.concat_tables(rejected, promote_options="permissive")
    if schema is not None:
        table = conform(table, schema)
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    data = buffer.getvalue()
    uri = storage.join(folder, f"{hashlib.sha1(data).hexdigest()[:20]}.parquet")
    storage.write_bytes(uri, data)
    return uri


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """`table` as `schema`: its columns cast, the ones it lacks null."""
    columns = [
        table[f.name].cast(f.type) if f.name in table.column_names else pa.nulls(len(table), f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


class Guarded:
    """A Ray Data operator (a class: `operator(**kwargs)` is built once per actor, outside
    the guard, so that a model or asset that will not load fails the job at its start rather
    than every row) run with `isolated`: its output rows go on, `schema` (an empty table of
    it when every row raised); the rows that raised are written to `rejected_uri`."""

    def __init__(
        self,
        operator: type,
        kwargs: Mapping[str, Any],
        stage: str,
        rejected_uri: str,
        schema: pa.Schema,
    ):
        self.call = operator(**kwargs)
        self.stage, self.rejected_uri, self.schema = stage, rejected_uri, schema

    def __call__(self, batch: pa.Table) -> pa.Table:
        output, rejected = isolated(self.call, batch, self.stage, reject_row)
        if rejected:
            write_rejected(rejected, self.rejected_uri)
        return output if output is not None else self.schema.empty_table()


def guarded(
    operator: type, kwargs: Mapping[str, Any], stage: str, rejected_uri: str, schema: pa.Schema
) -> dict[str, Any]:
    """map_batches arguments running `operator` as a `Guarded` actor."""
    arguments = {"operator": operator, "kwargs": dict(kwargs), "stage": stage}
    arguments |= {"rejected_uri": rejected_uri, "schema": schema}
    return {"fn_constructor_kwargs": arguments}


class RewriteConfig(Config):
    """The keys of a job that rewrites curated records with rewrite_guarded (score_fluency,
    translate, recaption): its actor pool, what it reads, its error budget and experiment."""

    actors: int | None = None  # None: one per CPU
    cpus_per_actor: float = 1.0
    batch_size: int = 256
    experiment: str = "fluency"
    allow_incomplete: bool = False  # read curated records without their _SUCCESS marker
    errors: ErrorsConfig = ErrorsConfig()  # records that may fail before the job does


def rewrite_guarded(
    rows: Any,
    operator: type,
    kwargs: Mapping[str, Any],
    stage: str,
    rejected_uri: str,
    output_uri: str,
    config: RewriteConfig,
    schema: pa.Schema = CURATED_LANGUAGE,
    whole_blocks: bool = False,
) -> int:
    """Curated records through `operator` on a pool of guarded actors (config.actors,
    cpus_per_actor, batch_size rows a call, or with `whole_blocks` a block a call), written
    as Parquet to `output_uri`; returns the pool's actor count. `schema` is what the actors
    return (by default the curated language's)."""
    from conceptual.pipelines.dataflow.executors import (
        actor_pool,  # imports the CNN's module: torch
    )

    pool = actor_pool(config.actors, config.cpus_per_actor)
    mapped = rows.map_batches(
        Guarded,
        **guarded(operator, kwargs, stage, rejected_uri, schema),
        batch_size=None if whole_blocks else config.batch_size,
        batch_format="pyarrow",
        compute=pool,
        num_cpus=config.cpus_per_actor,
    )
    out_fs, out_path = storage.resolve(output_uri)
    # Writing, like reading, must not wait for the CPUs the actors hold.
    mapped.write_parquet(out_path, filesystem=out_fs, ray_remote_args={"num_cpus": 0})
    return pool.min_size


def tracked_rewrite(
    stage: Stage,
    config: RewriteConfig,
    data_uri: str,
    output_uri: str,
    params: Mapping[str, Any],
    summary_file: str,
    rewrite: Callable[[], dict[str, Any]],
) -> tuple[dict[str, Any], str]:
    """A rewrite_guarded job's MLflow run around `rewrite()` (its summary): the config, the
    URIs and `params`, what it read and wrote, the summary's numbers and rejections as
    metrics and the summary as `summary_file`. Returns (summary, run id)."""
    with tracking.start_run(config.experiment, job=stage.name) as active:
        tracking.log_config(config)
        tracking.log_params({"data_uri": data_uri, "output_uri": output_uri, **params})
        summary = rewrite()
        lineage.log_read(data_uri)
        lineage.log_written(output_uri)
        numbers = {k: v for k, v in summary.items() if isinstance(v, (int, float))}
        mlflow.log_metrics({**numbers, **metrics(summary["rejected"])})
        mlflow.log_dict(summary, summary_file)
        return summary, active.info.run_id


def tally(folder: str) -> tuple[dict[str, dict[str, int]], dict[str, list[str]]]:
    """The rejected rows under `folder`: ({stage: {reason: n}}, {stage: up to three ids of
    its internal errors})."""
    tables = []
    if storage.exists(folder):
        fs, _ = storage.resolve(folder)
        for path in storage.list_files(folder):
            if path.endswith(".parquet"):
                with fs.open_input_file(path) as f:
                    tables.append(pq.read_table(f, columns=["id", "stage", "reason"]))
    return counted(tables)


def counted(rejected: Sequence[pa.Table]) -> tuple[dict[str, dict[str, int]], dict[str, list[str]]]:
    """`tally` of rejected rows in memory."""
    counts: dict[str, dict[str, int]] = {}
    samples: dict[str, list[str]] = {}
    for table in rejected:
        for id_, stage, reason in zip(*(table[c].to_pylist() for c in ("id", "stage", "reason"))):
            reasons = counts.setdefault(stage, {})
            reasons[reason] = reasons.get(reason, 0) + 1
            ids = samples.setdefault(stage, [])
            if reason == INTERNAL_ERROR and len(ids) < 3:
                ids.append(id_)
    return counts, samples


def total(counts: Mapping[str, Mapping[str, int]]) -> int:
    return sum(sum(reasons.values()) for reasons in counts.values())


def check(
    counts: Mapping[str, Mapping[str, int]],
    rows: int,
    config: ErrorsConfig,
    samples: Mapping[str, Sequence[str]],
) -> None:
    """errors.check over the internal errors among `counts` (TooManyErrors, one line)."""
    failed = {stage: r[INTERNAL_ERROR] for stage, r in counts.items() if INTERNAL_ERROR in r}
    errors.check(failed, rows, config, samples)


def metrics(counts: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
    """`rejected.<stage>.<reason>` metrics, as funnel.log_to_mlflow names them."""
    return {
        tracking.metric_key("rejected", stage, reason): n
        for stage, reasons in counts.items()
        for reason, n in reasons.items()
    }
