"""A training run's metrics in MLflow: what rank 0 logs after every epoch (`epoch_metrics`)
and what the driver reads back of them while fit() blocks (`EpochProgress`) and after it
(`log_outcome`: the best checkpoint's metrics and the learning curve).

Keys: `loss`, rank 0's total loss at every optimizer step (by step); `epoch_loss`, its
epoch mean; each other term the loss returns (models/losses.py: `distill_loss`), the dev
metrics, `lr` and `epoch`, once an epoch (by epoch). Once trained, `best.<key>` holds each
of them for the best epoch by the dev metric, the checkpoint that is registered: MLflow's
runs table shows a key's last value, so `CIDEr` is the last epoch's and `best.CIDEr` the
column to sort runs by.
"""

from __future__ import annotations

import math
import re
import threading
import time
from typing import Any

import mlflow
from matplotlib.figure import Figure
from mlflow.exceptions import MlflowException

from conceptual import tracking


def epoch_metrics(first_step: int, losses: list[float], metrics: dict[str, Any]) -> list[list]:
    """Rank 0's total loss at every step of the epoch (`losses`) and the epoch's `metrics`
    (its mean loss, the other terms' means, the dev metrics), as [key, value, timestamp ms,
    step] (under names MLflow accepts: `R@10` is `R_10`), sent in one call
    (tracking.send_metrics) and kept in the checkpoint until the store takes them."""
    now = int(time.time() * 1000)
    entries = [["loss", v, now, first_step + i] for i, v in enumerate(losses)]
    entries += [
        [tracking.metric_key(name), value, now, metrics["epoch"]]
        for name, value in metrics.items()
        if name != "loss" and value is not None
    ]
    if metrics["loss"] is not None:  # the epoch's mean, beside the per-step `loss`
        entries.append(["epoch_loss", metrics["loss"], now, metrics["epoch"]])
    return entries


class EpochProgress(threading.Thread):
    """Prints `epoch 3/8  loss 0.580  dev CIDEr 0.270` as rank 0 logs each epoch to MLflow
    (the driver is blocked in fit() meanwhile; the run's metrics are what it can see)."""

    def __init__(self, run_id: str, epochs: int, label: str, metric: str, every_s: float = 2.0):
        super().__init__(daemon=True, name="epoch-progress")
        self.run_id, self.epochs, self.label, self.metric = run_id, epochs, label, metric
        self.every_s = every_s
        self.stopped = threading.Event()
        self.printed = 0

    def __enter__(self) -> EpochProgress:
        print(f"training {self.label}: {self.epochs} epochs", flush=True)
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.join()

    def run(self) -> None:
        client = mlflow.MlflowClient()
        while True:
            final = self.stopped.wait(self.every_s)
            try:
                self.print_new(client)
            except (MlflowException, OSError):
                pass  # a tracking server that is down: the epochs are printed when it is back
            if final:
                return

    def print_new(self, client: mlflow.MlflowClient) -> None:
        latest = int(client.get_run(self.run_id).data.metrics.get("epoch", 0))
        if latest > self.printed:  # every epoch since the last look, not only the latest
            history = {
                name: {m.step: m.value for m in client.get_metric_history(self.run_id, name)}
                for name in ("epoch_loss", tracking.metric_key(self.metric))
            }
            loss, dev = history.values()
            for epoch in range(self.printed + 1, latest + 1):
                print(
                    f"  epoch {epoch}/{self.epochs}  loss {loss.get(epoch, math.nan):.3f}"
                    f"  dev {self.metric} {dev.get(epoch, math.nan):.3f}",
                    flush=True,
                )
            self.printed = latest


def log_outcome(run_id: str, metric: str, best: dict[str, Any]) -> None:
    """The active run's `best.<key>` metrics (`best`: the best epoch's metrics, by `metric`)
    and its learning curve."""
    mlflow.log_metrics(
        {tracking.metric_key("best", k): v for k, v in best.items() if v is not None}
    )
    mlflow.log_figure(learning_curve(run_id, metric), "learning_curve.png")


def learning_curve(run_id: str, metric: str) -> Figure:
    """Training loss per step and the dev metric per epoch, from the run's logged metrics."""
    client = mlflow.MlflowClient()
    loss = client.get_metric_history(run_id, "loss")
    dev = client.get_metric_history(run_id, tracking.metric_key(metric))
    figure = Figure(figsize=(10, 4))  # no pyplot: no GUI backend, no global figure state
    left, right = figure.subplots(1, 2)
    left.plot([m.step for m in loss], [m.value for m in loss])
    left.set(xlabel="step", ylabel="training loss (rank 0)", title="loss")
    right.plot([m.step for m in dev], [m.value for m in dev], marker="o")
    right.set(xlabel="epoch", ylabel=metric, title=f"dev {metric}")
    figure.tight_layout()
    return figure


def small_eval_warning(size: int, min_eval_size: int, metric: str) -> str | None:
    """What to tell a user whose dev set is too small for `metric` to mean anything: under
    the config's min_eval_size items (its model is then made no champion), or R@k with k at
    least the set's size (1.0 for any model)."""
    notes = []
    if (k := re.search(r"R@(\d+)", metric)) and int(k.group(1)) >= size:
        notes.append(f"R@{k.group(1)} over {size} items is 1 for any model")
    if size < min_eval_size:
        notes.append(
            f"under min_eval_size={min_eval_size}, {metric} says little and this run's "
            "model will not be made the champion"
        )
    return f"warning:  the dev set holds {size} items: {'; '.join(notes)}" if notes else None
