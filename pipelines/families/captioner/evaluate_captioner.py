"""Captioner evaluation (docs/spec/captioning.md, "Evaluation"): beam-search captions of a split's
images scored against all their references, beside the nearest-neighbour baseline, as one
MLflow run. The trainer scores its dev split every epoch with the same functions.

    model URI + FEATURES, split  ->  MLflow run (metrics, baseline.* metrics, samples table,
                                     sample grid of photos with generated and reference
                                     captions, evaluation.json); a registered model version
                                     also gets its score tag for this evaluation set

Every score has a 95% bootstrap interval over the split's images beside it
(`CIDEr.ci95_low`, `CIDEr.ci95_high`, `baseline.CIDEr.ci95_low`, ...; conceptual.intervals,
each metric recomputed per resample as conceptual.resampled_metrics describes).

A Chinese captioner is scored on words (as segmented) and on characters (`char.*`: scores
that do not depend on where a segmenter put word boundaries); METEOR and SPICE, which
read English, are left out for it. The features' captions must be in the model's language.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import mlflow
import numpy as np
import torch

from conceptual import registry, storage
from conceptual.config import Config
from conceptual.fluency.model import FLUENT_ABOVE
from conceptual.fluency.scorer import FluencyScorer
from conceptual.intervals import (
    HIGH,
    LOW,
    BootstrapConfig,
    interval_cell,
    mean_over,
    resample_counts,
    with_intervals,
)
from conceptual.metrics import CAPTION_METRICS, caption_scores, coco_results
from conceptual.models.baselines import nearest_neighbour_captions
from conceptual.models.captioner import Captioner, features_tensor
from conceptual.models.decoding import n_best
from conceptual.models.saving import SavedCaptioner, load
from conceptual.models.vocab import Vocabulary
from conceptual.pipelines.evaluation.evaluation import Evaluation, record
from conceptual.pipelines.features.features_data import (
    TRAIN_SPLIT,
    SplitImages,
    caption_languages,
    feature_files,
    source_images,
    split_images,
)
from conceptual.plots import image_grid
from conceptual.registry import eval_set_name
from conceptual.text.chinese import characters, normalize

# SPICE needs Stanford CoreNLP, which cannot be fetched offline; METEOR is None without Java.
EVAL_METRICS = [m for m in CAPTION_METRICS if m != "SPICE"]
EVAL_BATCH = 64  # images decoded at once
SAMPLES_TABLE, SAMPLES_GRID = "samples.json", "samples.png"
RESULTS = "results.json"  # the COCO results JSON of the model's captions
ENGLISH_ONLY = ("METEOR", "SPICE")  # their matchers and parsers read English


class CaptionerEvalConfig(Config):
    split: str = "test"
    beam: int = 4
    max_images: int | None = None  # None: every image of the split
    metrics: list[str] = list(CAPTION_METRICS)  # the unavailable ones are reported with why
    baseline: bool = True  # also score the nearest-neighbour baseline on the same images
    samples: int = 12  # images in the logged sample grid
    # A fluency classifier (jobs.train_fluency: models:/fluency-zh@champion) to score a
    # Chinese captioner's captions (and the baseline's): `fluency`, `fluent_share`.
    fluency_model: str | None = None
    bootstrap: BootstrapConfig = BootstrapConfig()  # the intervals' resamples of the images
    experiment: str = "captioning"


def caption_images(
    captioner: Captioner,
    vocab: Vocabulary,
    images: SplitImages,
    beam: int,
    device: torch.device | None = None,
) -> dict[str, str]:
    """Image id -> beam-search caption, for a split_images() set read with its grids."""
    best = n_best_captions(captioner, vocab, images, beam, 1, device)
    return {key: captions[0] for key, captions in best.items()}


def n_best_captions(
    captioner: Captioner,
    vocab: Vocabulary,
    images: SplitImages,
    beam: int,
    n: int,
    device: torch.device | None = None,
) -> dict[str, list[str]]:
    """Image id -> its `n` best beam-search captions, best first."""
    captioner.eval()
    keys, captions = images.image_ids, {}
    for start in range(0, len(keys), EVAL_BATCH):
        end = start + EVAL_BATCH
        features = features_tensor(
            images.pooled[start:end, 0], images.grid[start:end], captioner.config.feature_map
        ).to(device or "cpu")
        for key, found in zip(keys[start:end], n_best(captioner, features, beam=beam, n=n)):
            captions[key] = [vocab.decode(ids) for ids in found]
    return captions


def baseline_captions(files: list[str], uri: str, images: SplitImages) -> dict[str, str]:
    """Image id -> the consensus caption of the most similar training image (pooled cosine)."""
    train = split_images(files, uri, TRAIN_SPLIT)  # the search uses pooled vectors only
    chosen = nearest_neighbour_captions(
        train.pooled[:, 0], list(train.references.values()), images.pooled[:, 0]
    )
    return dict(zip(images.image_ids, chosen))


def evaluate(
    model_uri: str,
    features_uri: str,
    config: CaptionerEvalConfig,
    baseline_features: str | None = None,
    results_json: str | None = None,
    *,
    kind: type[SavedCaptioner] = SavedCaptioner,
    job: str = "evaluate_captioner",
) -> dict[str, Any]:
    """Score the model (saved as `kind`: its family's form; the run tagged as `job`) on
    `config.split` of the features (and the baseline, searching the train split of
    `baseline_features`, by default the same features). The model's captions go to the
    run's results.json and to `results_json` (a path or URI) as the COCO results JSON, keyed
    by the images' image_id. Returns `scores`, `unavailable` (metric -> why), `baseline` (scores or None), `eval_set`, `images`,
    `run_id` and `version` (the registered version scored, or None); every score is
    followed by its interval (`NAME.ci95_low`, `NAME.ci95_high`)."""
    files = feature_files(features_uri)
    saved = load(registry.resolve(model_uri), kind=kind)
    model, vocab = saved.model, saved.vocab
    language = model.config.language
    if (found := caption_languages(files, features_uri)) != {language}:
        raise ValueError(f"a model writing {language!r} scored on captions in {sorted(found)}")
    images = split_images(
        files, features_uri, config.split, grids=True, max_images=config.max_images
    )
    eval_set = eval_set_name(features_uri, config.split, len(images.image_ids), images.references)
    counts = resample_counts(len(images.image_ids), config.bootstrap)
    scorer = None
    if config.fluency_model:
        if language != "zh":
            raise ValueError(f"the fluency classifier reads Chinese, not {language!r} captions")
        scorer = FluencyScorer(registry.resolve(config.fluency_model))
    generated = caption_images(model, vocab, images, config.beam)
    results = coco_results(generated)
    if results_json:
        storage.write_json(results_json, results)
    found, unavailable, resampled = captioner_scores(
        generated, images, config.metrics, language, counts, scorer
    )
    scores = with_intervals(found, resampled)
    baseline, nearest = None, None
    if config.baseline:
        source = baseline_features or features_uri
        nearest = baseline_captions(feature_files(source), source, images)
        found, _, resampled = captioner_scores(
            nearest, images, config.metrics, language, counts, scorer
        )
        baseline = with_intervals(found, resampled)

    evaluation = Evaluation(
        metrics={
            **scores,
            "images": len(images.image_ids),
            **{f"baseline.{m}": v for m, v in (baseline or {}).items()},
        },
        eval_set=eval_set,
        result={
            "scores": scores,
            "unavailable": unavailable,
            "baseline": baseline,
            "images": len(images.image_ids),
        },
        artifacts={RESULTS: results},
        log_figures=lambda: log_samples(
            images, generated, features_uri, shown=config.samples, baseline=nearest
        ),
        score=("CIDEr", scores["CIDEr"]),
    )
    return record(job, model_uri, features_uri, config, evaluation)


def held_out_table(result: Mapping[str, Any]) -> str:
    """What the evaluate_captioner job and the pipeline's evaluate step print: the held-out
    scores beside the nearest-neighbour baseline's, each with its 95% interval, as a table,
    the metrics it could not compute, and a note where the baseline scores higher (then the
    model does no better than copying the closest training image's caption)."""
    scores, baseline = result["scores"], result["baseline"] or {}
    metrics = [metric for metric in scores if not metric.endswith((LOW, HIGH))]
    lines = [
        f"evaluate: {result['images']} held-out images ({result['eval_set']})",
        f"  {'metric':<10}{'model [95% interval]':>24}{'baseline [95% interval]':>26}",
    ]
    for metric in metrics:
        held = interval_cell(baseline, metric) if metric in baseline else ""
        lines.append(f"  {metric:<10}{interval_cell(scores, metric):>24}{held:>26}")
    for metric, why in result.get("unavailable", {}).items():
        lines.append(f"  {metric:<10}{'n/a':>24}  ({why})")
    compared = [m for m in metrics if None not in (scores[m], baseline.get(m))]
    if beaten := [m for m in compared if baseline[m] > scores[m]]:
        shown = "CIDEr" if "CIDEr" in beaten else beaten[0]  # the champion rule's metric
        on = "every metric" if beaten == compared else ", ".join(beaten)
        lines.append(
            f"note:     the nearest-neighbour baseline beats the model on {on} ({shown} "
            f"{baseline[shown]:.3f} vs {scores[shown]:.3f}): it does no better than the "
            "caption of the closest training image (more data, or more epochs)"
        )
    return "\n".join(lines)


def captioner_scores(
    generated: Mapping[str, str],
    images: SplitImages,
    metrics: list[str],
    language: str,
    counts: np.ndarray,
    fluency: FluencyScorer | None = None,
) -> tuple[dict[str, float], dict[str, str], dict[str, np.ndarray]]:
    """language_scores of one captioner's (or the baseline's) captions of a split_images()
    set over the `counts` resamples of its images, with the mean fluency of the captions
    when a `fluency` classifier is given."""
    generated = {key: generated[key] for key in images.image_ids}  # the counts' columns
    scores, unavailable, resampled = language_scores(
        generated, images.references, metrics, language, counts
    )
    if fluency is not None:
        found, on_resamples = caption_fluency(fluency, generated.values(), counts)
        scores, resampled = scores | found, resampled | on_resamples
    return scores, unavailable, resampled


def language_scores(
    generated: Mapping[str, str],
    references: Mapping[str, list[str]],
    metrics: list[str],
    language: str,
    counts: np.ndarray | None = None,
) -> tuple[dict[str, float], dict[str, str], dict[str, np.ndarray]]:
    """The caption metrics that could be computed, why the others could not, and with
    `counts` (intervals.resample_counts over `generated` in order) each metric's value on
    every resample (else {}); for Chinese the word metrics and their character-level
    `char.*` twins (module docstring)."""
    if language != "en":
        english_only = [m for m in metrics if m in ENGLISH_ONLY]
        metrics = [m for m in metrics if m not in ENGLISH_ONLY]
    report = caption_scores(generated, references, metrics, counts)
    scores = {m: report[m] for m in metrics if report[m] is not None}
    resampled = report.get("resampled", {})
    unavailable = dict(report["unavailable"])
    if language != "en":
        unavailable.update(dict.fromkeys(english_only, f"reads English, not {language!r}"))
        by_character = caption_scores(
            {key: characters(caption) for key, caption in generated.items()},
            {key: [characters(ref) for ref in refs] for key, refs in references.items()},
            metrics,
            counts,
        )
        scores.update({f"char.{m}": by_character[m] for m in metrics})
        resampled |= {f"char.{m}": v for m, v in by_character.get("resampled", {}).items()}
    return scores, unavailable, resampled


def caption_fluency(
    scorer: FluencyScorer, captions: Iterable[str], counts: np.ndarray | None = None
) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """The mean fluency score of Chinese captions (as a captioner writes them: segmented)
    and the share of them above FLUENT_ABOVE, on the classifier's Chinese views (a
    generated caption translates no English sentence); with `counts` (one column per
    caption) both on every resample too (else {})."""
    fluency = scorer.score([normalize(caption) for caption in captions])
    fluent = (fluency > FLUENT_ABOVE).astype(float)
    scores = {"fluency": float(fluency.mean()), "fluent_share": float(fluent.mean())}
    if counts is None:
        return scores, {}
    return scores, {
        "fluency": mean_over(counts, fluency),
        "fluent_share": mean_over(counts, fluent),
    }


def log_samples(
    images: SplitImages,
    generated: Mapping[str, str],
    features_uri: str,
    *,
    shown: int,
    baseline: Mapping[str, str] | None = None,
) -> None:
    """Into the active run: a table of every image's generated and reference captions (and
    the baseline's), and a grid of the first `shown` photos with them when the curated
    data is reachable."""
    rows = [
        {
            "id": images.records[key],
            "generated": generated[key],
            **({"baseline": baseline[key]} if baseline else {}),
            "references": " | ".join(images.references[key]),
        }
        for key in images.image_ids
    ]
    mlflow.log_table({k: [row[k] for row in rows] for k in rows[0]}, SAMPLES_TABLE)
    photos = source_images(features_uri, [row["id"] for row in rows[:shown]])
    items = [
        (photos[row["id"]], f"model: {generated[key]}\nreference: {images.references[key][0]}")
        for key, row in zip(images.image_ids[:shown], rows)
        if row["id"] in photos
    ]
    if items:
        mlflow.log_figure(image_grid(items), SAMPLES_GRID)
