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

The driver is pipelines/evaluation/comparison.py's: each approach is one of its variants (the English
captioner reads EN, the manual one its own features; the re-ranked late translation is
scored on the late translation's captioner, the baseline trains nothing), and the rows
stay in the order above.

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
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any, Literal

import numpy as np
from matplotlib.figure import Figure
from pydantic import Field

from conceptual import registry
from conceptual.config import Config, ConfigError
from conceptual.fluency.scorer import FluencyScorer
from conceptual.fluency.translation import Translator
from conceptual.intervals import (
    NOISE_P,
    WITHIN_NOISE,
    BootstrapConfig,
    resample_counts,
    with_intervals,
    within_noise,
)
from conceptual.models.captioner import CaptionerSettings
from conceptual.models.losses import FluencyStrategy
from conceptual.models.saving import SavedCaptioner, load
from conceptual.pipelines.evaluation.comparison import Comparison, Trained, Variant
from conceptual.pipelines.evaluation.comparison import compare as run_comparison
from conceptual.pipelines.families.captioner.evaluate_captioner import (
    baseline_captions,
    caption_fluency,
    caption_images,
    captioner_scores,
    n_best_captions,
)
from conceptual.pipelines.families.captioner.train_captioner import RECIPE, CaptionerTrainConfig
from conceptual.pipelines.features.features_data import SplitImages, feature_files, split_images
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
    train: CaptionerTrainConfig = CaptionerTrainConfig(
        language="zh", model=SPEC_MODEL, experiment="fluency"
    )
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
    """Train and score every approach (module docstring) on pipelines/evaluation/comparison.py's driver.
    `references`: name -> features whose `config.split` holds the test photos with Chinese
    references; `english_features` and a `translator` are needed for the late-translation
    rows; `manual_features` (human-written Chinese captions) adds the "Manual Flickr8k-cn"
    row. Returns `run_id` (the comparison run) and `rows` (one per approach, in the spec's
    order, then the baseline)."""
    if not references:
        raise ConfigError("no reference set: give --reference NAME=URI")
    if config.late_translation and (english_features is None or translator is None):
        raise ConfigError("late translation needs --english-features and --cn")
    scorer = FluencyScorer(registry.resolve(config.fluency_model))
    test_sets = {
        name: split_images(feature_files(uri), uri, config.split, grids=True)
        for name, uri in references.items()
    }
    train_files = feature_files(features_uri)

    def score(
        name: str, trained_with: CaptionerTrainConfig | None, result: dict[str, Any] | None
    ) -> tuple:
        if result is None:  # the nearest-neighbour baseline
            generated = {
                ref: baseline_captions(train_files, features_uri, images)
                for ref, images in test_sets.items()
            }
        else:
            saved = load(result["model_dir"], kind=SavedCaptioner)
            write = partial(chinese_captions, name, saved, config, translator, scorer)
            generated = {ref: write(images) for ref, images in test_sets.items()}
        return *approach_scores(generated, test_sets, scorer, config.bootstrap), generated

    reference_sets = list(test_sets)
    how = Comparison(
        recipe=RECIPE,
        job="compare_fluency",
        metric=None,  # a column per reference set and metric, each with its best
        score=score,
        row=comparison_row,
        table=partial(markdown_table, reference_sets=reference_sets),
        plot=partial(comparison_plot, reference_sets=reference_sets),
        also_logged=("dev_CIDEr",),
        files=partial(captions_file, reference_set=reference_sets[0]),
    )
    params = {"features_uri": features_uri, "english_features": english_features or ""}
    params |= {f"references.{name}": uri for name, uri in references.items()}
    variants = approaches(features_uri, config, english_features, manual_features)
    return run_comparison(how, config, variants, params, config.registered)


def approaches(
    features_uri: str,
    config: FluencyComparisonConfig,
    english_features: str | None,
    manual_features: str | None,
) -> list[Variant]:
    """The comparison's variants in the spec's order: the two late translations of one
    English captioner, a Chinese captioner per strategy, the manual row, the baseline. The
    English captioner and the manual one are never registered: one writes English, the
    other's dev CIDEr is on other captions than the strategies'."""
    variants = []
    if config.late_translation:
        english = captioner_config(config, "en", "none")
        variants.append(Variant(LATE, english, [english_features], registrable=False))
        variants.append(Variant(RERANK, model_of=LATE))
    for strategy in config.strategies:
        chinese = captioner_config(config, "zh", strategy)
        variants.append(Variant(STRATEGY_NAMES[strategy], chinese, [features_uri]))
    if manual_features is not None:
        manual = captioner_config(config, "zh", "none")
        variants.append(Variant(MANUAL, manual, [manual_features], registrable=False))
    return [*variants, Variant(NEAREST)]


def captioner_config(
    config: FluencyComparisonConfig, language: str, strategy: FluencyStrategy
) -> CaptionerTrainConfig:
    """The shared training keys for a captioner writing `language` with `strategy`, in the
    comparison's experiment."""
    update = {"language": language, "fluency": strategy, "experiment": config.experiment}
    return config.train.model_copy(update=update)


def chinese_captions(
    approach: str,
    saved: SavedCaptioner,
    config: FluencyComparisonConfig,
    translator: Translator | None,
    scorer: FluencyScorer,
    images: SplitImages,
) -> dict[str, str]:
    """Image id -> the Chinese caption `approach` writes with the `saved` captioner: its
    English caption translated (late translation), the most fluent translation of its
    `rerank` best English captions (re-ranked), or its own (a Chinese captioner). The
    `translator` is there for late translation (compare() refuses it without one)."""
    model, vocab = saved.model, saved.vocab
    if approach == LATE:
        return late_translations(caption_images(model, vocab, images, config.beam), translator)
    if approach == RERANK:
        english = n_best_captions(model, vocab, images, config.beam, config.rerank)
        return reranked_translations(english, translator, scorer)
    return caption_images(model, vocab, images, config.beam)


def late_translations(english: Mapping[str, str], translator: Translator) -> dict[str, str]:
    """Image key -> the translation of its English caption, segmented as a Chinese captioner
    writes its captions."""
    keys = list(english)
    translated = translator.translate([english[key] for key in keys])
    return {key: tokens_for_captioning(text or "") for key, text in zip(keys, translated)}


def reranked_translations(
    english: Mapping[str, list[str]], translator: Translator, scorer: FluencyScorer
) -> dict[str, str]:
    """Image key -> the most fluent of its n best captions' translations, scored with their
    English source on all four views (among equals the better English caption), segmented."""
    keys = list(english)
    flat = [caption for key in keys for caption in english[key]]
    translated = [t or "" for t in translator.translate(flat)]
    fluency = scorer.score(translated, flat)
    reranked, at = {}, 0
    for key in keys:
        n = len(english[key])
        best = at + int(np.argmax(fluency[at : at + n]))
        reranked[key] = tokens_for_captioning(translated[best])
        at += n
    return reranked


def approach_scores(
    generated: Mapping[str, Mapping[str, str]],
    test_sets: Mapping[str, SplitImages],
    scorer: FluencyScorer,
    bootstrap: BootstrapConfig,
) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """`{reference set}.{metric}` for every reference set (words and characters), and the
    mean fluency of the captions of all sets together and the share above FLUENT_ABOVE,
    each followed by its interval; and each one's values on the resamples."""
    scores: dict[str, float] = {}
    resampled: dict[str, np.ndarray] = {}
    for name, images in test_sets.items():
        counts = resample_counts(len(images.image_ids), bootstrap)
        found, _, on_resamples = captioner_scores(
            generated[name], images, list(REPORTED), "zh", counts
        )
        scores |= {f"{name}.{metric}": value for metric, value in found.items()}
        resampled |= {f"{name}.{metric}": value for metric, value in on_resamples.items()}
    captions = [
        generated[name][key] for name, images in test_sets.items() for key in images.image_ids
    ]
    found, on_resamples = caption_fluency(
        scorer, captions, resample_counts(len(captions), bootstrap)
    )
    return with_intervals(scores | found, resampled | on_resamples), resampled | on_resamples


def comparison_row(trained: Trained) -> dict[str, Any]:
    """An approach's row: its training run, the dev CIDEr of a Chinese captioner (the
    English one's is on English captions), its scores, its captioner-zh version."""
    result, trained_with = trained.result, trained.config
    chinese = trained_with is not None and trained_with.language == "zh"
    return {
        "approach": trained.name,
        "run_id": None if result is None else result["run_id"],
        "seconds": trained.seconds,
        **({"dev_CIDEr": result["best"]["CIDEr"]} if chinese else {}),
        **trained.scores,
        "version": None if trained.decision is None else str(trained.decision["version"]),
    }


def captions_file(trained: Sequence[Trained], reference_set: str) -> dict[str, str]:
    """captions.json: every approach's captions of `reference_set` (what rating_tasks
    --kind zh_caption shows raters)."""
    captions = {t.name: t.evaluation[reference_set] for t in trained}
    return {"captions.json": json.dumps(captions, ensure_ascii=False, indent=1)}


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
