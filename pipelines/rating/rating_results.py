"""The papers' human tables (conceptual.rating.tables) from a task set's ratings, into MLflow.

    task set + ratings (the rating page's database, or a CSV: rater,item_id,answer)
        ->  MLflow run: the table's metrics (good_1plus, human.R_1, APPROACH.relevance_mean,
            fleiss_kappa, ...), items.RATER, human_table.json/.png, raters.json/.png,
            human_evaluation.json (every table and the skipped ratings by reason)

The run is `run_id` when given; else a new run in the experiment of the run the tasks came
from, as its child (MLflow's parent tag), or in HUMAN_EXPERIMENT for tasks from a dataset.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

import mlflow
from matplotlib.figure import Figure
from mlflow.tracking import MlflowClient

from conceptual import storage, tracking
from conceptual.rating.store import RatingStore
from conceptual.rating.tables import Tables, human_tables
from conceptual.rating.tasks import SCALES, TaskSet

HUMAN_EXPERIMENT = "human_evaluation"
CSV_COLUMNS = ("rater", "item_id", "answer")


def read_csv(uri: str) -> list[dict[str, Any]]:
    """A ratings CSV (a crowdsourcing export): a header with at least CSV_COLUMNS."""
    text = storage.read_bytes(uri).decode("utf-8-sig")
    reader = csv.DictReader(io.StringIO(text))
    if missing := [c for c in CSV_COLUMNS if c not in (reader.fieldnames or [])]:
        raise ValueError(
            f"{uri} has no column {', '.join(missing)}: the header needs rater,item_id,answer"
        )
    return list(reader)


def ratings(tasks: TaskSet, ratings_csv: str | None, db: str | None) -> list[dict[str, Any]]:
    """The rows to tabulate: the CSV's, or the page's database's answers to the task set."""
    if ratings_csv:
        return read_csv(ratings_csv)
    return RatingStore(tasks, db).ratings()


def results(
    tasks: TaskSet, tasks_uri: str, rows: list[dict[str, Any]], run_id: str | None = None
) -> tuple[Tables, str, str]:
    """The tables, logged to MLflow; returns them, the run's id and its experiment's name."""
    tables = human_tables(tasks, rows)
    source_run = tasks.manifest["source"].get("run_id")
    tags = {tracking.JOB_TAG: "rating_results", "task_set": tasks.name, "tasks_uri": tasks_uri}
    tracking.configure()
    if run_id:
        context = mlflow.start_run(run_id=run_id)
    elif source_run:  # the new run is the source run's child, in its experiment
        client = MlflowClient()
        experiment = client.get_experiment(client.get_run(source_run).info.experiment_id).name
        linked = {**tags, tracking.PARENT_TAG: source_run}
        context = tracking.start_run(experiment, "human evaluation", linked)
    else:
        context = tracking.start_run(HUMAN_EXPERIMENT, "human evaluation", tags)
    with context as active:
        if run_id:
            mlflow.set_tags(tags)
        metrics = {tracking.metric_key(k): v for k, v in tables.metrics.items() if v is not None}
        mlflow.log_metrics(metrics)
        for name, table in tables.tables.items():
            if table:
                mlflow.log_table(columns(table), f"{artifact_name(tasks, name)}.json")
        mlflow.log_figure(table_plot(tasks, tables), "human_table.png")
        if tables.tables["raters"]:
            mlflow.log_figure(raters_plot(tables.tables["raters"]), "raters.png")
        mlflow.log_dict(
            {"task_set": tasks.name, "metrics": tables.metrics, **tables.tables},
            "human_evaluation.json",
        )
    experiment = MlflowClient().get_experiment(active.info.experiment_id).name
    return tables, active.info.run_id, experiment


def artifact_name(tasks: TaskSet, table: str) -> str:
    return "human_table" if table == tasks.kind.name else table


def columns(rows: Sequence[dict[str, Any]]) -> dict[str, list[Any]]:
    names = list(dict.fromkeys(k for row in rows for k in row))
    return {name: [row.get(name) for row in rows] for name in names}


def text_table(rows: Sequence[dict[str, Any]]) -> str:
    """Rows as aligned columns for the terminal."""
    if not rows:
        return "(no rows)"
    names = list(dict.fromkeys(k for row in rows for k in row))
    cells = [[_cell(row.get(n)) for n in names] for row in rows]
    widths = [max(len(n), *(len(c[i]) for c in cells)) for i, n in enumerate(names)]
    lines = ["  ".join(n.ljust(w) for n, w in zip(names, widths))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in cells]
    return "\n".join(lines)


def _cell(value: Any) -> str:
    return "n/a" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def table_plot(tasks: TaskSet, tables: Tables) -> Figure:
    """The kind's table as bars per approach (1-5 scales: means with standard deviations)."""
    rows = tables.tables[tasks.kind.name]
    figure = Figure(figsize=(7, 4))
    ax = figure.subplots()
    names = [row["approach"] for row in rows]
    if tasks.kind.name == "zh_caption":
        bars = [(s, f"{s}_mean", f"{s}_std") for s in SCALES]
        ax.set(ylim=(0, 5.5), ylabel="mean rating (1-5), error bar: std")
    else:
        keys = [
            k for k in (rows[0] if rows else {}) if k.startswith(("good_", "human", "automatic R"))
        ]
        bars = [(k, k, None) for k in keys if "all queries" not in k]
        ax.set(ylim=(0, 1.05), ylabel="share of items")
    width = 0.8 / max(len(bars), 1)
    for b, (label, key, spread) in enumerate(bars):
        xs = [i + b * width for i in range(len(rows))]
        ys = [row.get(key) or 0.0 for row in rows]
        errors = [row.get(spread) or 0.0 for row in rows] if spread else None
        ax.bar(xs, ys, width, yerr=errors, label=label, capsize=3)
    ax.set_xticks([i + width * (len(bars) - 1) / 2 for i in range(len(rows))], names)
    ax.set_title(f"{tasks.kind.name}: {tables.metrics['items_rated']} items, "
                 f"fleiss_kappa {_cell(tables.metrics.get('fleiss_kappa'))}")  # fmt: skip
    ax.legend(fontsize=8)
    figure.tight_layout()
    return figure


def raters_plot(raters: Sequence[dict[str, Any]]) -> Figure:
    figure = Figure(figsize=(6, 1 + 0.3 * len(raters)))
    ax = figure.subplots()
    ax.barh([r["rater"] for r in raters], [r["items"] for r in raters])
    ax.invert_yaxis()
    ax.set(title="items per rater", xlabel="items answered")
    figure.tight_layout()
    return figure
