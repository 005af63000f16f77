"""The four captioner variants (docs/spec/captioning.md: RNN or Transformer, over 1x1 or 8x8
features) trained on the same features with the same settings, as child runs of one
comparison run in one MLflow experiment, so the MLflow UI compares them side by side.

    FEATURES  ->  one training run per variant
              ->  the comparison run: comparison.json (table), comparison.md, comparison.png
              ->  the best variant registered, champion rule applied (or every variant)

Each variant's best checkpoint's dev captions are scored with 95% bootstrap intervals over
the dev images (`CIDEr.ci95_low`, ...) and a paired bootstrap p-value of its dev CIDEr
against the best variant's (`CIDEr.p_vs_best`; the same resamples for every variant), and
the table marks differences inside the noise (conceptual.intervals).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import mlflow
import numpy as np
from matplotlib.figure import Figure

from conceptual import registry, tracking
from conceptual.config import ConfigError
from conceptual.intervals import (
    NOISE_P,
    WITHIN_NOISE,
    BootstrapConfig,
    against_best,
    error_bars,
    interval_cell,
    p_cell,
    resample_counts,
    with_intervals,
)
from conceptual.models.saving import load
from conceptual.models.variants import VARIANTS
from conceptual.pipelines.caption_features import feature_files, split_images
from conceptual.pipelines.evaluate_captioner import captioner_scores
from conceptual.pipelines.train_captioner import CAPTIONS, TrainConfig, publish, train, variant

REGISTER = ("best", "all", "none")
# The columns of the table and the bars of the plot, CIDEr first: it ranks the variants.
REPORTED = ("CIDEr", "BLEU-4", "METEOR", "ROUGE-L")
P_VS_BEST = "CIDEr.p_vs_best"


def variant_config(config: TrainConfig, name: str) -> TrainConfig:
    """The shared config with one variant's architecture and feature map."""
    if name not in VARIANTS:
        raise ConfigError(f"unknown variant {name!r}; the variants are {', '.join(VARIANTS)}")
    architecture, _, feature_map = name.partition("-")
    model = config.model.model_copy(
        update={"architecture": architecture, "feature_map": feature_map}
    )
    return config.model_copy(update={"model": model})


def compare(
    features_uri: str,
    config: TrainConfig,
    variants: Sequence[str] = VARIANTS,
    register: str = "best",
    model_name: str = registry.MODEL_NAME,
    bootstrap: BootstrapConfig | None = None,
) -> dict[str, Any]:
    """Train every variant and log the comparison; register the best one by dev CIDEr
    (`register="best"`: a comparison's losers are not worth a registry version), every one
    ("all") or none ("none"); the champion rule judges each registered version. Returns
    `run_id` (the comparison run) and `rows` (one per variant, best first by dev CIDEr,
    with intervals and p-values: module docstring)."""
    if register not in REGISTER:
        raise ConfigError(f"register must be one of {REGISTER}, not {register!r}")
    configs = [variant_config(config, name) for name in variants]  # fail before training
    dev = split_images(
        feature_files(features_uri), features_uri, config.eval_split, config.eval_max_images, False
    )
    counts = resample_counts(len(dev["keys"]), bootstrap or BootstrapConfig())
    with tracking.start_run(
        config.experiment, run_name="comparison", tags={"stage": "compare_captioners"}
    ) as parent:
        tracking.log_config(config)
        mlflow.log_params({"features_uri": features_uri, "variants": ",".join(variants)})
    parent_id = parent.info.run_id

    trained = []
    with tracking.children_of(parent_id):
        for i, variant_cfg in enumerate(configs, 1):
            print(f"variant {i}/{len(configs)} {variant(variant_cfg)}", flush=True)
            started = time.monotonic()
            result = train(features_uri, variant_cfg)
            trained.append((variant_cfg, result, time.monotonic() - started))
    trained.sort(key=lambda t: t[1]["best"]["CIDEr"], reverse=True)
    rows, resampled = [], []
    for rank, (variant_cfg, result, seconds) in enumerate(trained):
        registered = register == "all" or (register == "best" and rank == 0)
        decision = publish(result, variant_cfg, model_name) if registered else None
        scores, on_resamples = best_dev_scores(result, variant_cfg, dev, counts)
        rows.append(comparison_row(variant_cfg, result, seconds, decision, scores))
        resampled.append(on_resamples.get("CIDEr"))
    p_values = against_best([row["CIDEr"] for row in rows], resampled)
    for row, p_value in zip(rows, p_values):
        row[P_VS_BEST] = p_value

    with mlflow.start_run(run_id=parent_id):
        mlflow.log_table({k: [row.get(k) for row in rows] for k in rows[0]}, "comparison.json")
        mlflow.log_text(markdown_table(rows), "comparison.md")
        mlflow.log_figure(comparison_plot(rows), "comparison.png")
        mlflow.log_metrics(
            {
                tracking.metric_key(row["variant"], key): row[key]
                for row in rows
                for key in ("CIDEr", "CIDEr.ci95_low", "CIDEr.ci95_high", P_VS_BEST)
                if row.get(key) is not None
            }
        )
        mlflow.set_tag("best_variant", rows[0]["variant"])
    return {"run_id": parent_id, "rows": rows}


def best_dev_scores(
    result: dict[str, Any], config: TrainConfig, dev: dict[str, Any], counts: np.ndarray
) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """The REPORTED metrics of the best checkpoint's dev captions (which the trainer saved
    beside its model) with their intervals, and their values on every resample."""
    saved = Path(result["model_dir"]).parent / CAPTIONS
    captions = json.loads(saved.read_text())
    metrics = [m for m in REPORTED if m in config.eval_metrics]
    scores, _, resampled = captioner_scores(captions, dev, metrics, config.language, counts)
    reported = {m: v for m, v in scores.items() if m in REPORTED}
    return with_intervals(reported, resampled), resampled


def comparison_row(
    config: TrainConfig,
    result: dict[str, Any],
    seconds: float,
    decision: dict | None,
    scores: dict[str, float],
) -> dict[str, Any]:
    model = load(result["model_dir"]).model
    return {
        "variant": variant(config),
        **{metric: None for metric in REPORTED},  # METEOR without Java
        **scores,
        "best_epoch": result["best"]["epoch"],
        "parameters": sum(p.numel() for p in model.parameters()),
        "train_seconds": round(seconds, 1),
        "run_id": result["run_id"],
        "version": None if decision is None else decision["version"],
        "champion": None if decision is None else decision["reason"],
        "eval_set": result["eval_set"],
        "cider_per_epoch": [epoch.get("CIDEr") for epoch in result["history"]],
    }


def markdown_table(rows: Sequence[dict[str, Any]]) -> str:
    """One row per variant: dev CIDEr with its 95% interval and p-value against the best,
    the other metrics, and how the variant trained."""
    columns = ["variant", *REPORTED, "p vs best", "best_epoch", "parameters", "train_seconds"]
    columns.append("version")
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        shown = {"CIDEr": interval_cell(row, "CIDEr", 4), "p vs best": p_cell(row[P_VS_BEST])}
        cells = [shown[c] if c in shown else _cell(row[c]) for c in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + (
        f"\n\nDev set: {rows[0]['eval_set']}. CIDEr [95% bootstrap interval over the dev "
        f"images]; p vs best: paired bootstrap p-value of the CIDEr difference to the best "
        f"variant, {WITHIN_NOISE} inside the noise (p >= {NOISE_P}).\n"
    )


def _cell(value: Any) -> str:
    if value is None:
        return "n/a"  # METEOR without Java
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def comparison_plot(rows: Sequence[dict[str, Any]]) -> Figure:
    """Left: the best epoch's dev metrics per variant with their 95% intervals; right: dev
    CIDEr per epoch."""
    figure = Figure(figsize=(12, 4.5))
    bars, curves = figure.subplots(1, 2)
    width = 0.8 / len(rows)
    for i, row in enumerate(rows):
        values = [row[m] or 0.0 for m in REPORTED]
        positions = [x + i * width for x in range(len(REPORTED))]
        yerr = error_bars(row, REPORTED)
        bars.bar(positions, values, width, yerr=yerr, capsize=2, label=row["variant"])
        curves.plot(row["cider_per_epoch"], marker="o", label=row["variant"])
    bars.set_xticks([x + 0.4 - width / 2 for x in range(len(REPORTED))], REPORTED)
    bars.set(title="best epoch, dev set", ylabel="score")
    curves.set(title="dev CIDEr", xlabel="epoch", ylabel="CIDEr")
    for ax in (bars, curves):
        ax.legend(fontsize=8)
    figure.tight_layout()
    return figure
