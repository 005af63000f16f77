"""The four captioner variants (docs/spec/captioning.md: RNN or Transformer, over 1x1 or 8x8
features) trained on the same features with the same settings, as child runs of one
comparison run in one MLflow experiment, so the MLflow UI compares them side by side.

    FEATURES  ->  one training run per variant
              ->  the comparison run: comparison.json (table), comparison.md, comparison.png
              ->  the best variant registered, champion rule applied (or every variant)
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import mlflow
from matplotlib.figure import Figure

from conceptual import registry, tracking
from conceptual.config import ConfigError
from conceptual.models.saving import load_model
from conceptual.models.variants import VARIANTS
from conceptual.pipelines.train_captioner import TrainConfig, publish, train, variant

REGISTER = ("best", "all", "none")
# The columns of the table and the bars of the plot, CIDEr first: it ranks the variants.
REPORTED = ("CIDEr", "BLEU-4", "METEOR", "ROUGE-L")


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
) -> dict[str, Any]:
    """Train every variant and log the comparison; register the best one by dev CIDEr
    (`register="best"`: a comparison's losers are not worth a registry version), every one
    ("all") or none ("none"); the champion rule judges each registered version. Returns
    `run_id` (the comparison run) and `rows` (one per variant, best first by dev CIDEr)."""
    if register not in REGISTER:
        raise ConfigError(f"register must be one of {REGISTER}, not {register!r}")
    configs = [variant_config(config, name) for name in variants]  # fail before training
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
    rows = []
    for rank, (variant_cfg, result, seconds) in enumerate(trained):
        registered = register == "all" or (register == "best" and rank == 0)
        decision = publish(result, variant_cfg, model_name) if registered else None
        rows.append(comparison_row(variant_cfg, result, seconds, decision))

    with mlflow.start_run(run_id=parent_id):
        mlflow.log_table({k: [row.get(k) for row in rows] for k in rows[0]}, "comparison.json")
        mlflow.log_text(markdown_table(rows), "comparison.md")
        mlflow.log_figure(comparison_plot(rows), "comparison.png")
        mlflow.log_metrics(
            {tracking.metric_key(row["variant"], "CIDEr"): row["CIDEr"] for row in rows}
        )
        mlflow.set_tag("best_variant", rows[0]["variant"])
    return {"run_id": parent_id, "rows": rows}


def comparison_row(
    config: TrainConfig, result: dict[str, Any], seconds: float, decision: dict | None
) -> dict[str, Any]:
    model, _ = load_model(result["model_dir"])
    return {
        "variant": variant(config),
        **{metric: result["best"].get(metric) for metric in REPORTED},
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
    columns = ["variant", *REPORTED, "best_epoch", "parameters", "train_seconds", "version"]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        cells = [_cell(row[c]) for c in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + f"\n\nDev set: {rows[0]['eval_set']}\n"


def _cell(value: Any) -> str:
    if value is None:
        return "n/a"  # METEOR without Java
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def comparison_plot(rows: Sequence[dict[str, Any]]) -> Figure:
    """Left: the best epoch's dev metrics per variant; right: dev CIDEr per epoch."""
    figure = Figure(figsize=(12, 4.5))
    bars, curves = figure.subplots(1, 2)
    width = 0.8 / len(rows)
    for i, row in enumerate(rows):
        values = [row[m] or 0.0 for m in REPORTED]
        bars.bar([x + i * width for x in range(len(REPORTED))], values, width, label=row["variant"])
        curves.plot(row["cider_per_epoch"], marker="o", label=row["variant"])
    bars.set_xticks([x + 0.4 - width / 2 for x in range(len(REPORTED))], REPORTED)
    bars.set(title="best epoch, dev set", ylabel="score")
    curves.set(title="dev CIDEr", xlabel="epoch", ylabel="CIDEr")
    for ax in (bars, curves):
        ax.legend(fontsize=8)
    figure.tight_layout()
    return figure
