"""The four captioner variants (docs/spec/captioning.md: RNN or Transformer, over 1x1 or 8x8
features) trained on the same features with the same settings, as child runs of one
comparison run in one MLflow experiment, so the MLflow UI compares them side by side.

    FEATURES  ->  one training run per variant
              ->  the comparison run: comparison.json (table), comparison.md, comparison.png
              ->  the best variant registered, champion rule applied (or every variant)

The driver is pipelines/evaluation/comparison.py's. A variant is one of the four by its name
(`rnn-1x1`) or `name: key=value ...` over the shared config (`wide: model.d_model=1024`).

Each variant's best checkpoint's dev captions are scored with 95% bootstrap intervals over
the dev images (`CIDEr.ci95_low`, ...) and a paired bootstrap p-value of its dev CIDEr
against the best variant's (`CIDEr.p_vs_best`; the same resamples for every variant), and
the table marks differences inside the noise (conceptual.intervals).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from conceptual import registry
from conceptual.intervals import (
    BootstrapConfig,
    error_bars,
    resample_counts,
    with_intervals,
)
from conceptual.models.saving import load
from conceptual.models.variants import VARIANTS
from conceptual.pipelines.evaluation.comparison import (
    Comparison,
    Trained,
    parse_variants,
    registered_columns,
)
from conceptual.pipelines.evaluation.comparison import compare as run_comparison
from conceptual.pipelines.evaluation.comparison import markdown_table as comparison_markdown
from conceptual.pipelines.families import CAPTIONER, Family
from conceptual.pipelines.families.captioner.evaluate_captioner import captioner_scores
from conceptual.pipelines.families.captioner.train_captioner import CAPTIONS, CaptionerTrainConfig
from conceptual.pipelines.features.features_data import SplitImages, feature_files, split_images

# The columns of the table and the bars of the plot, CIDEr first: it ranks the variants.
REPORTED = ("CIDEr", "BLEU-4", "METEOR", "ROUGE-L")
P_VS_BEST = "CIDEr.p_vs_best"
# The variants given by their name alone: rnn-1x1 is "rnn-1x1: model.architecture=rnn ...".
NAMED = {
    f"{architecture}-{feature_map}": (
        f"model.architecture={architecture} model.feature_map={feature_map}"
    )
    for architecture, _, feature_map in (name.partition("-") for name in VARIANTS)
}


def compare(
    features_uri: str,
    config: CaptionerTrainConfig,
    variants: Sequence[str] = VARIANTS,
    register: str = "best",
    model_name: str = registry.MODEL_NAME,
    bootstrap: BootstrapConfig | None = None,
    family: Family = CAPTIONER,
) -> dict[str, Any]:
    """Train every variant (a name of VARIANTS or `name: key=value ...`) and log the
    comparison (pipelines/evaluation/comparison.py); register the best one by dev CIDEr, every one
    ("all") or none ("none"). `family`: the captioner-shaped family whose recipe trains the
    variants, its compare job tagging the run. Returns `run_id` (the comparison run) and `rows` (one per
    variant, best first by dev CIDEr, with intervals and p-values: module docstring)."""
    parsed = parse_variants(variants, config, [features_uri], NAMED)
    files = feature_files(features_uri)
    dev = split_images(files, features_uri, config.eval_split, max_images=config.eval_max_images)
    counts = resample_counts(len(dev.image_ids), bootstrap or BootstrapConfig())

    def score(name: str, variant_config: CaptionerTrainConfig, result: dict[str, Any]) -> tuple:
        return *best_dev_scores(result, variant_config, dev, counts), None

    how = Comparison(
        recipe=family.recipe(),
        job=family.jobs["compare"],
        metric="CIDEr",
        score=score,
        row=comparison_row,
        table=markdown_table,
        plot=comparison_plot,
    )
    params = {"features_uri": features_uri, "variants": ",".join(variants)}
    return run_comparison(how, config, parsed, params, register, model_name)


def best_dev_scores(
    result: dict[str, Any], config: CaptionerTrainConfig, dev: SplitImages, counts: np.ndarray
) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """The REPORTED metrics of the best checkpoint's dev captions (which the trainer saved
    beside its model) with their intervals, and their values on every resample."""
    saved = Path(result["model_dir"]).parent / CAPTIONS
    captions = json.loads(saved.read_text())
    metrics = [m for m in REPORTED if m in config.eval_metrics]
    scores, _, resampled = captioner_scores(captions, dev, metrics, config.language, counts)
    reported = {m: v for m, v in scores.items() if m in REPORTED}
    return with_intervals(reported, resampled), resampled


def comparison_row(trained: Trained) -> dict[str, Any]:
    result = trained.result
    model = load(result["model_dir"]).model
    return {
        "variant": trained.name,
        **{metric: None for metric in REPORTED},  # METEOR without Java
        **trained.scores,
        "best_epoch": result["best"]["epoch"],
        "parameters": sum(p.numel() for p in model.parameters()),
        "train_seconds": round(trained.seconds, 1),
        "run_id": result["run_id"],
        **registered_columns(trained.decision),
        "eval_set": result["eval_set"],
        "cider_per_epoch": [epoch.get("CIDEr") for epoch in result["history"]],
    }


def markdown_table(rows: Sequence[dict[str, Any]]) -> str:
    """One row per variant: dev CIDEr with its 95% interval and p-value against the best,
    the other metrics, and how the variant trained."""
    columns = ["variant", *REPORTED, "p vs best", "best_epoch", "parameters", "train_seconds"]
    columns.append("version")
    return comparison_markdown(columns, rows, "CIDEr", _cell, "Dev set", digits=4)


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
