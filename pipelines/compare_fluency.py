"""The six approaches of docs/spec/fluency.md to captioning in Chinese without Chinese
training captions, trained and scored side by side in one MLflow experiment:

| approach | what writes the Chinese caption |
|---|---|
| late translation | an English captioner; its caption translated |
| late translation rerank | the English captioner's `rerank` best captions translated, the most fluent kept |
| without fluency | a Chinese captioner trained on every translation (fluency=none) |
| fluency only | ... on the fluent translations alone (fluency=only) |
| rejection sampling | ... on the fluent ones and the others by rejection sampling |
| weighted loss | ... with each caption's loss weighted by its fluency |

and, beside them, the nearest-neighbour baseline (the Chinese caption of the most similar
training image) and, given `manual_features`, the paper's "Manual Flickr8k-cn" row: a
captioner trained on captions people wrote in Chinese. Flickr8k-CN's human translations
(flickr8kzhmtest) cover the test photos only, so nothing can train on them without testing
on its training photos; the row trains on the native-written captions (flickr8kzhc,
import_flickr8k_cn source=native), the human Chinese the data has for training photos. Every approach captions the test images of each reference set (features
of the test photos with Chinese captions: human translations of their English captions,
native-written captions, ...) and is scored against it on words and characters
(evaluate_captioner.language_scores), with the mean fluency of its captions (the fluency
classifier on the Chinese views: a generated caption has no English source).

    --features ZH --english-features EN --reference human=URI --reference native=URI --cn DIR
        ->  one training run per captioner (children of the comparison run)
        ->  the comparison run: comparison.json (table), comparison.md, comparison.png,
            captions.json (every approach's captions of the first reference set)
        ->  the best Chinese captioner by dev CIDEr registered as captioner-zh
            (registered=best; all, none)

Every score has its 95% bootstrap interval over the test images (`human.CIDEr.ci95_low`,
...; the fluency scores over the captions of every reference set together) and a paired
bootstrap p-value against the column's best approach (`human.CIDEr.p_vs_best`: every
approach is scored on the same resamples); the table puts the best in bold and marks
differences inside the noise (conceptual.intervals).

Translation goes through the translator interface (conceptual.fluency.translation); offline
that is Flickr8k-CN's provided machine translations, nearest match for a sentence they do
not hold, which makes the late-translation rows a retrieval stand-in for a translator.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import mlflow
import numpy as np
from matplotlib.figure import Figure
from pydantic import Field

from conceptual import registry, tracking
from conceptual.config import Config, ConfigError
from conceptual.fluency.scorer import FluencyScorer
from conceptual.fluency.translation import Translator
from conceptual.intervals import (
    NOISE_P,
    WITHIN_NOISE,
    BootstrapConfig,
    against_best,
    resample_counts,
    with_intervals,
    within_noise,
)
from conceptual.models.captioner import CaptionerSettings
from conceptual.models.losses import FluencyStrategy
from conceptual.models.saving import SavedCaptioner, load
from conceptual.pipelines import training
from conceptual.pipelines.comparison import to_register
from conceptual.pipelines.evaluate_captioner import (
    baseline_captions,
    caption_fluency,
    caption_images,
    captioner_scores,
    n_best_captions,
)
from conceptual.pipelines.features_data import feature_files, split_images
from conceptual.pipelines.train_captioner import RECIPE, TrainConfig
from conceptual.text.chinese import tokens_for_captioning

LATE, RERANK, NEAREST = "late translation", "late translation rerank", "nearest neighbour"
MANUAL = "Manual Flickr8k-cn"  # a captioner trained on human-written Chinese captions
STRATEGY_NAMES: dict[str, str] = {
    "none": "without fluency",
    "only": "fluency only",
    "rejection": "rejection sampling",
    "weighted": "weighted loss",
}
REPORTED = ("BLEU-4", "ROUGE-L", "CIDEr")  # the spec's table; char.* beside them
# The spec's captioner: Show and Tell (an LSTM over the pooled image vector), beam 5.
SPEC_MODEL = CaptionerSettings(architecture="rnn", feature_map="1x1")


class FluencyComparisonConfig(Config):
    # The captioners' training keys, shared by the English one and the Chinese ones (their
    # `language` and `fluency` are set per approach).
    # `experiment` is the comparison's, for every run.
    train: TrainConfig = TrainConfig(language="zh", model=SPEC_MODEL, experiment="fluency")
    strategies: list[FluencyStrategy] = ["none", "only", "rejection", "weighted"]
    late_translation: bool = True  # also the two late-translation rows (needs the English)
    rerank: int = Field(default=5, ge=2)  # the English captions late translation re-ranks
    translator: Literal["baidu", "google"] = "baidu"  # whose provided translations
    fluency_model: str = "models:/fluency-zh@champion"
    split: str = "test"  # of the reference sets
    beam: int = Field(default=5, ge=1)
    # Which Chinese captioners become captioner-zh versions (the champion rule judges each).
    registered: Literal["best", "all", "none"] = "best"
    bootstrap: BootstrapConfig = BootstrapConfig()  # the intervals' resamples
    experiment: str = "fluency"


def compare(
    features_uri: str,
    references: Mapping[str, str],
    config: FluencyComparisonConfig,
    english_features: str | None = None,
    translator: Translator | None = None,
    manual_features: str | None = None,
) -> dict[str, Any]:
    """Train and score every approach (module docstring). `references`: name -> features
    whose `config.split` holds the test photos with Chinese references; `english_features`
    and a `translator` are needed for the late-translation rows; `manual_features`
    (human-written Chinese captions) adds the "Manual Flickr8k-cn" row. Returns `run_id` (the
    comparison run) and `rows` (one per approach, in the spec's order, then the baseline)."""
    if not references:
        raise ConfigError("no reference set: give --reference NAME=URI")
    if config.late_translation and (english_features is None or translator is None):
        raise ConfigError("late translation needs --english-features and --cn")
    scorer = FluencyScorer(registry.resolve(config.fluency_model))
    test_sets = {
        name: split_images(feature_files(uri), uri, config.split)
        for name, uri in references.items()
    }
    tags = {"stage": "compare_fluency"}
    with tracking.start_run(config.experiment, run_name="comparison", tags=tags) as parent:
        tracking.log_config(config)
        mlflow.log_params(
            {"features_uri": features_uri, "english_features": english_features or ""}
            | {f"references.{name}": uri for name, uri in references.items()}
        )
    parent_id = parent.info.run_id

    generated: dict[str, dict[str, dict[str, str]]] = {}  # approach -> reference set -> key
    rows: list[dict[str, Any]] = []
    trained = []
    with tracking.children_of(parent_id):
        if config.late_translation:
            assert english_features is not None and translator is not None
            started = time.monotonic()
            result = training.train(RECIPE, english_config(config), english_features)
            saved = load(result["model_dir"], kind=SavedCaptioner)
            model, vocab = saved.model, saved.vocab
            seconds = time.monotonic() - started
            late, reranked = {}, {}
            for name, images in test_sets.items():
                english = n_best_captions(model, vocab, images, config.beam, config.rerank)
                late[name], reranked[name] = late_translations(english, translator, scorer)
            generated[LATE], generated[RERANK] = late, reranked
            for approach in (LATE, RERANK):
                rows.append({"approach": approach, "run_id": result["run_id"], "seconds": seconds})
        for strategy in config.strategies:
            name = STRATEGY_NAMES[strategy]
            strategy_config, result, generated[name], row = train_chinese(
                name, config, strategy, features_uri, test_sets
            )
            trained.append((strategy_config, result))
            rows.append(row)
        if manual_features is not None:
            # Trained on human-written Chinese, not translations: a reference point, never
            # registered (its dev CIDEr is on other captions than the strategies').
            *_, generated[MANUAL], row = train_chinese(
                MANUAL, config, "none", manual_features, test_sets
            )
            rows.append(row)
    train_files = feature_files(features_uri)
    generated[NEAREST] = {
        ref: baseline_captions(train_files, features_uri, images)
        for ref, images in test_sets.items()
    }
    rows.append({"approach": NEAREST, "run_id": None, "seconds": None})

    resampled = []
    for row in rows:
        scores, on_resamples = approach_scores(
            generated[row["approach"]], test_sets, scorer, config.bootstrap
        )
        row.update(scores)
        resampled.append(on_resamples)
    add_p_values(rows, resampled)
    registered = register_captioners(trained, config.registered)
    for row in rows:  # the English captioner of the late translations is not registered
        chinese = row["approach"] in STRATEGY_NAMES.values()
        row["version"] = registered.get(row["run_id"]) if chinese else None

    with mlflow.start_run(run_id=parent_id):
        columns = table_columns(rows)
        mlflow.log_table({c: [row.get(c) for row in rows] for c in columns}, "comparison.json")
        mlflow.log_text(markdown_table(rows, list(test_sets)), "comparison.md")
        mlflow.log_figure(comparison_plot(rows, list(test_sets)), "comparison.png")
        first = next(iter(test_sets))
        mlflow.log_text(
            json.dumps({a: g[first] for a, g in generated.items()}, ensure_ascii=False, indent=1),
            "captions.json",
        )
        mlflow.log_metrics(
            {
                tracking.metric_key(row["approach"], key): value
                for row in rows
                for key, value in row.items()
                if isinstance(value, float) and key != "seconds"
            }
        )
    return {"run_id": parent_id, "rows": rows}


def train_chinese(
    name: str,
    config: FluencyComparisonConfig,
    strategy: FluencyStrategy,
    features_uri: str,
    test_sets: Mapping[str, Mapping[str, Any]],
) -> tuple[TrainConfig, dict[str, Any], dict[str, dict[str, str]], dict[str, Any]]:
    """One Chinese captioner trained on `features_uri` with `strategy`: its config, training
    result, captions of every test set, and its row of the table."""
    print(f"captioner {name}", flush=True)
    started = time.monotonic()
    chinese = config.train.model_copy(
        update={"language": "zh", "fluency": strategy, "experiment": config.experiment}
    )
    result = training.train(RECIPE, chinese, features_uri)
    saved = load(result["model_dir"], kind=SavedCaptioner)
    captions = {
        ref: caption_images(saved.model, saved.vocab, images, config.beam)
        for ref, images in test_sets.items()
    }
    row = {
        "approach": name,
        "run_id": result["run_id"],
        "seconds": time.monotonic() - started,
        "dev_CIDEr": result["best"]["CIDEr"],
    }
    return chinese, result, captions, row


def english_config(config: FluencyComparisonConfig) -> TrainConfig:
    """The late-translation baselines' English captioner: the shared training keys."""
    return config.train.model_copy(
        update={"language": "en", "fluency": "none", "experiment": config.experiment}
    )


def late_translations(
    english: Mapping[str, list[str]], translator: Translator, scorer: FluencyScorer
) -> tuple[dict[str, str], dict[str, str]]:
    """Image key -> the translation of its best English caption (late translation), and
    the most fluent of its n best captions' translations, scored with their English
    source on all four views (rerank; among equals the better English caption). Chinese
    captions come segmented, as a Chinese captioner writes them."""
    keys = list(english)
    flat = [caption for key in keys for caption in english[key]]
    translated = [t or "" for t in translator.translate(flat)]
    fluency = scorer.score(translated, flat)
    late, reranked, at = {}, {}, 0
    for key in keys:
        n = len(english[key])
        late[key] = tokens_for_captioning(translated[at])
        best = at + int(np.argmax(fluency[at : at + n]))
        reranked[key] = tokens_for_captioning(translated[best])
        at += n
    return late, reranked


def approach_scores(
    generated: Mapping[str, Mapping[str, str]],
    test_sets: Mapping[str, Mapping[str, Any]],
    scorer: FluencyScorer,
    bootstrap: BootstrapConfig,
) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """`{reference set}.{metric}` for every reference set (words and characters), and the
    mean fluency of the captions of all sets together and the share above FLUENT_ABOVE,
    each followed by its interval; and each one's values on the resamples."""
    scores: dict[str, float] = {}
    resampled: dict[str, np.ndarray] = {}
    for name, images in test_sets.items():
        counts = resample_counts(len(images["keys"]), bootstrap)
        found, _, on_resamples = captioner_scores(
            generated[name], images, list(REPORTED), "zh", counts
        )
        scores |= {f"{name}.{metric}": value for metric, value in found.items()}
        resampled |= {f"{name}.{metric}": value for metric, value in on_resamples.items()}
    captions = [
        generated[name][key] for name, images in test_sets.items() for key in images["keys"]
    ]
    found, on_resamples = caption_fluency(
        scorer, captions, resample_counts(len(captions), bootstrap)
    )
    return with_intervals(scores | found, resampled | on_resamples), resampled | on_resamples


def add_p_values(
    rows: Sequence[dict[str, Any]], resampled: Sequence[dict[str, np.ndarray]]
) -> None:
    """`{metric}.p_vs_best` in every row for every resampled metric: the paired p-value of
    the row's difference to the column's best row (None for the best)."""
    for metric in resampled[0]:
        p_values = against_best([row.get(metric) for row in rows], [r[metric] for r in resampled])
        for row, p_value in zip(rows, p_values):
            row[f"{metric}.p_vs_best"] = p_value


def register_captioners(
    trained: Sequence[tuple[TrainConfig, dict[str, Any]]], register: str
) -> dict[str, str]:
    """Training run id -> registered version: the best Chinese captioner by dev CIDEr, every
    one, or none (comparison.to_register)."""
    ranked = sorted(trained, key=lambda t: t[1]["best"]["CIDEr"], reverse=True)
    return {
        result["run_id"]: str(training.publish(RECIPE, result, cfg)["version"])
        for cfg, result in to_register(ranked, register)
    }


def table_columns(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    return list(dict.fromkeys(key for row in rows for key in row))


def markdown_table(rows: Sequence[Mapping[str, Any]], reference_sets: Sequence[str]) -> str:
    columns = [
        *(f"{ref}.{m}" for ref in reference_sets for m in (*REPORTED, "char.CIDEr")),
        "fluency",
        "fluent_share",
    ]
    lines = [
        "| approach | " + " | ".join(columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    for row in rows:
        cells = [_marked_cell(row, c) for c in columns]
        lines.append(f"| {row['approach']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + (
        "\n\nBLEU-4, ROUGE-L, CIDEr on segmented words; char.* on characters. The best of "
        f"each column in bold; {WITHIN_NOISE}: its difference to the best is inside the noise "
        f"(paired bootstrap p >= {NOISE_P} over the test images).\n"
    )


def _marked_cell(row: Mapping[str, Any], column: str) -> str:
    value = row.get(column)
    if value is None:
        return "n/a"
    p_value = row.get(f"{column}.p_vs_best")
    if p_value is None and f"{column}.p_vs_best" in row:
        return f"**{value:.4g}**"
    return f"{value:.4g} {WITHIN_NOISE}" if within_noise(p_value) else f"{value:.4g}"


def comparison_plot(rows: Sequence[Mapping[str, Any]], reference_sets: Sequence[str]) -> Figure:
    """CIDEr against each reference set, and the mean fluency of the captions, per approach."""
    panels = [*(f"{ref}.CIDEr" for ref in reference_sets), "fluency"]
    figure = Figure(figsize=(5 * len(panels), 4.5))
    axes = figure.subplots(1, len(panels), squeeze=False)[0]
    names = [row["approach"] for row in rows]
    for ax, metric in zip(axes, panels):
        ax.barh(names, [row.get(metric) or 0.0 for row in rows])
        ax.invert_yaxis()
        ax.set(title=metric, xlabel="score")
    figure.tight_layout()
    return figure
