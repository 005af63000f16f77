"""Captioner training (docs/spec/captioning.md, "Training" and "Evaluation") through the training
core (pipelines/training/training.py): synchronous data-parallel workers over precomputed CNN
features, one MLflow run, the checkpoint with the best dev CIDEr as the run's model.

    FEATURES/features/*.parquet (records.FEATURES)  ->  MLflow run (params, loss per step,
    FEATURES/features.json                              dev metrics per epoch, learning
                                                        curve, the best model under model/)

The saved model records the CNN and image size that features.json names, so that
captioning an image computes the features it was trained on (models.inference).

What is the captioner's here: the driver builds the vocabulary from the train captions and
collects the dev images (small); Ray Data turns the train rows into fixed-shape examples
(the feature map as one (cells, channels) tensor, in fp16 when the workers train on GPUs;
the caption as `max_tokens` token ids); the loss is the captioner's cross-entropy
(models/losses.py: CaptionLoss); rank 0 decodes the dev images with beam search after every
epoch and scores them against all their references (captions.json in the checkpoint holds
the captions scored).

Another language (docs/spec/fluency.md): `language=zh` trains on features of Chinese
captions (segmented into words, so vocabulary and decoding are as for English) and
registers `captioner-zh`. Captions machine-translated from English carry a fluency score
(jobs.score_fluency, before the features job), and `fluency` picks how it steers training:

- none: every translation, unweighted;
- only: the fluent ones (score > 0.5) alone;
- rejection: every fluent one, and one with score f enters the batch when f > u, u drawn
  from U(0, 0.5) each time it comes up (on the worker, per batch, so anew every epoch);
- weighted: each caption's loss times 1 when fluent, else f.

Rejection and weighting happen in the loss (models/losses.py: `sample_weights`): a caption
left out of a batch counts for nothing, so batches are smaller by the rejected share, as if
the sampler had drawn them; "only" drops the rows before they reach the workers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import ray
import torch
from pydantic import Field, field_validator, model_validator

from conceptual import storage
from conceptual.fluency.model import FLUENT_ABOVE
from conceptual.metrics import CAPTION_METRICS, caption_scores
from conceptual.models.captioner import Captioner, CaptionerConfig, CaptionerSettings
from conceptual.models.losses import CaptionLoss, FluencyStrategy
from conceptual.models.saving import FeatureSettings, SavedCaptioner, save_model
from conceptual.models.variants import Language, model_name
from conceptual.models.vocab import Vocabulary
from conceptual.pipelines.dataflow.readers import (
    READ_CPUS,
    fetched_once,
    read_row_groups,
    read_tasks,
)
from conceptual.pipelines.families.captioner.evaluate_captioner import (
    EVAL_METRICS,
    caption_images,
    log_samples,
)
from conceptual.pipelines.features.features_data import (
    TRAIN_SPLIT,
    SplitImages,
    caption_languages,
    drawn_train,
    feature_files,
    feature_settings,
    split_images,
    train_captions,
    train_fluency,
)
from conceptual.pipelines.training import training
from conceptual.registry import eval_set_name
from conceptual.runtime import init_ray

CAPTIONS = "captions.json"
# The dev metric that picks the best checkpoint (spec: model selection).
SELECT_BY = "CIDEr"


class CaptionerTrainConfig(training.TrainingConfig):
    model: CaptionerSettings = CaptionerSettings()
    language: Language = "en"  # the captions' language (zh-CN is zh); features must agree
    fluency: FluencyStrategy = "none"  # module docstring; needs scored captions
    min_count: int = 4  # vocabulary: words seen at least this often in the train captions
    # A seeded draw (by `seed`) of this share of the train split's images, with all their
    # captions: training on subsets (Figure 3); the same draw as train_retriever's.
    train_fraction: float = Field(default=1.0, gt=0, le=1)
    # That share of each target's probability spread over the vocabulary.
    label_smoothing: float = Field(default=0.0, ge=0.0, lt=1.0)
    beam: int = 4
    eval_split: str = "val"
    eval_max_images: int | None = None  # None: every dev image
    # Scored every epoch; METEOR starts Java (seconds per call) and is skipped without it.
    eval_metrics: list[str] = EVAL_METRICS
    samples: int = 12  # dev photos shown with their generated captions in samples.png
    experiment: str = "captioning"
    allow_incomplete: bool = False  # read features whose job left no _SUCCESS marker

    @field_validator("eval_metrics")
    @classmethod
    def _scores_cider(cls, metrics: list[str]) -> list[str]:
        unknown = set(metrics) - set(CAPTION_METRICS)
        if unknown or SELECT_BY not in metrics:
            raise ValueError(
                f"must include {SELECT_BY} (it selects the best checkpoint) and only "
                f"{CAPTION_METRICS}"
            )
        return metrics

    @model_validator(mode="after")
    def _fluency_of_translations(self) -> CaptionerTrainConfig:
        if self.fluency != "none" and self.language == "en":
            raise ValueError("fluency guides captions translated from English: set language")
        return self


# ---------------------------------------------------------------- the driver


def prepare(config: CaptionerTrainConfig, features_uri: str) -> training.Prepared:
    """A run on a features dataset (the module's docstring): the vocabulary of its train
    captions, its dev images, the rows; after training, the best model's dev captions beside
    their references (log_samples)."""
    init_ray()
    files = feature_files(features_uri, config.allow_incomplete)
    features = feature_settings(features_uri)
    fluent_share = check_captions(files, features_uri, config)
    if config.train_fraction < 1:
        images, captions = drawn_train(files, features_uri, config.train_fraction, config.seed)
    else:
        images, captions = None, train_captions(files, features_uri)  # None: every image
    vocab = Vocabulary.build(captions, min_count=config.min_count)
    eval_set = split_images(
        files, features_uri, config.eval_split, grids=True, max_images=config.eval_max_images
    )
    model_config = captioner_config(config, len(vocab), eval_set.feature_dim)
    shape = feature_shape(eval_set.pooled[0, 0], eval_set.grid[0], config.model.feature_map)
    scored = config.fluency != "none"

    def log_best_samples(best_dir: Path) -> dict[str, Any]:
        generated = json.loads((best_dir / CAPTIONS).read_text())
        log_samples(eval_set, generated, features_uri, shown=config.samples)
        return {}

    return training.Prepared(
        data={"--features": features_uri},
        params={
            "features_uri": features_uri,
            "train_images": "all" if images is None else len(images),
            "vocab_size": len(vocab),
            "eval_images": len(eval_set.image_ids),
        },
        metrics={} if fluent_share is None else {"train_fluent_share": fluent_share},
        loop_config={
            "model": model_config.model_dump(),
            "vocab": vocab.to_json(),
            "features": features.model_dump(),
            "eval_set": ray.put(eval_set),  # rank 0 fetches it; the driver keeps it alive
        },
        rows=lambda resolved: train_examples(
            train_rows(features_uri, files, scored, images is not None),
            vocab,
            resolved,
            shape,
            None if images is None else ray.put(images),
        ),
        eval_size=len(eval_set.image_ids),
        eval_set=eval_set_name(
            features_uri, config.eval_split, len(eval_set.image_ids), eval_set.references
        ),
        finish=log_best_samples,
    )


def check_captions(files: list[str], uri: str, config: CaptionerTrainConfig) -> float | None:
    """Refuse features whose captions are not in the configured language, or unscored
    captions for a fluency strategy; return the share of fluent train captions (None
    without a strategy)."""
    languages = caption_languages(files, uri)
    if languages != {config.language}:
        raise ValueError(
            f"the features' captions are in {sorted(languages)}, not language={config.language}"
        )
    if config.fluency == "none":
        return None
    scores = train_fluency(files, uri)
    if np.isnan(scores).any():
        raise ValueError(
            f"fluency={config.fluency} needs a fluency score on every train caption; "
            f"{int(np.isnan(scores).sum())} of {len(scores)} have none (run "
            "jobs.score_fluency on the curated records, then the features job)"
        )
    fluent_share = float((scores > FLUENT_ABOVE).mean())
    if config.fluency == "only" and fluent_share == 0:
        raise ValueError("fluency=only, but no train caption is fluent")
    return fluent_share


def unused_keys(config: CaptionerTrainConfig) -> tuple[str, ...]:
    """Keys that do not apply to the configured architecture (not logged as its params)."""
    return ("model.heads", "model.ffn") if config.model.architecture == "rnn" else ()


def variant(config: CaptionerTrainConfig) -> str:
    """The model family and its features, as registered versions are tagged: rnn-1x1 etc."""
    return f"{config.model.architecture}-{config.model.feature_map}"


def captioner_config(
    config: CaptionerTrainConfig, vocab_size: int, feature_dim: int
) -> CaptionerConfig:
    """The model's settings with what the data decides."""
    return CaptionerConfig(
        **config.model.model_dump(),
        vocab_size=vocab_size,
        feature_dim=feature_dim,
        language=config.language,
    )


def train_rows(
    uri: str, files: list[str], fluency: bool = False, image_ids: bool = False
) -> ray.data.Dataset:
    fs, _ = storage.resolve(uri)
    columns = ["split", "caption", "pooled", "grid", *(["fluency"] if fluency else [])]
    columns += ["image_id"] if image_ids else []
    return read_row_groups(fs, files, columns=columns)


def feature_shape(pooled: Sequence, grid: Sequence, feature_map: str) -> tuple[int, int]:
    """(cells, channels) of the model's input, from one example's FEATURES vectors."""
    return (1 if feature_map == "1x1" else len(grid) // len(pooled)), len(pooled)


def train_examples(
    rows: ray.data.Dataset,
    vocab: Vocabulary,
    config: CaptionerTrainConfig,
    shape: tuple[int, int],
    images: ray.ObjectRef | None = None,
) -> ray.data.Dataset:
    """The train split's rows as the loss reads them: `features` (shape: cells, channels),
    in fp16 for GPUs (half the bytes to move; autocast reads them in bf16) and float32 for
    CPUs, `tokens` (model.max_tokens ids), and `fluency` for the strategies that read it in
    the loss (fluency=only keeps the fluent rows instead); with `images` (a reference to
    image ids: train_fraction's draw), those images' rows only."""
    dtype = np.float16 if config.use_gpu else np.float32
    examples = partial(
        _examples,
        vocab=vocab,
        settings=config.model,
        shape=shape,
        dtype=dtype,
        fluency=config.fluency,
        images=None if images is None else (images,),  # in a tuple: passed, not resolved
    )
    return rows.map_batches(
        examples, batch_format="pyarrow", num_cpus=READ_CPUS, compute=read_tasks()
    )


def _examples(
    batch: pa.Table,
    vocab: Vocabulary,
    settings: CaptionerSettings,
    shape: tuple[int, int],
    dtype: type,
    fluency: FluencyStrategy = "none",
    images: tuple[ray.ObjectRef] | None = None,
) -> dict[str, np.ndarray]:
    kept = pc.field("split") == TRAIN_SPLIT
    if images is not None:
        kept = kept & pc.field("image_id").isin(fetched_once(images[0]))
    if fluency == "only":
        kept = kept & (pc.field("fluency") > FLUENT_ABOVE)
    batch = batch.filter(kept)
    column = batch["pooled" if settings.feature_map == "1x1" else "grid"]
    # The list column's flat values, one reshape: no per-row objects.
    features = pc.list_flatten(column).to_numpy().reshape(len(batch), *shape)
    examples = {
        "features": features.astype(dtype, copy=False),  # float32 on CPUs: no copy
        "tokens": vocab.encode_array(batch["caption"].to_pylist(), settings.max_tokens),
    }
    if fluency in ("rejection", "weighted"):
        examples["fluency"] = batch["fluency"].to_numpy().astype(np.float32)
    return examples


# ---------------------------------------------------------------- the workers


def train_loop(loop_config: dict[str, Any], saved: type[SavedCaptioner] = SavedCaptioner) -> None:
    """Ray Train's per-worker loop (importable, so workers find it in the installed package).
    `saved`: the form the model is built and saved in (a captioner family of its own, such
    as the attend family, passes its own, with its own decoder)."""
    config = CaptionerTrainConfig.model_validate(loop_config["config"])
    vocab = Vocabulary.from_json(loop_config["vocab"])
    features = FeatureSettings.model_validate(loop_config["features"])
    torch.manual_seed(config.seed)
    captioner = saved.build(loop_config["model"])
    eval_set = training.dev_data(loop_config["eval_set"])
    task = training.Task(
        model=captioner,
        loss=CaptionLoss(captioner, config.label_smoothing, config.fluency),
        evaluate=partial(evaluate_dev, captioner, vocab, eval_set, config),
        save=partial(
            save_model, captioner, vocab, features=features, beam=config.beam, saved=saved
        ),
        examples_fixed=True,  # no draws in the read tasks: kept after the first epoch
    )
    training.run(task, config, loop_config)


def evaluate_dev(
    captioner: Captioner, vocab: Vocabulary, eval_set: SplitImages, config: CaptionerTrainConfig
) -> tuple[dict[str, float], dict[str, str]]:
    """The dev images' beam-search captions scored against all their references (the
    metrics that cannot run here, METEOR without Java, are left out), and the captions."""
    device = next(captioner.parameters()).device
    generated = caption_images(captioner, vocab, eval_set, config.beam, device)
    scores = caption_scores(generated, eval_set.references, metrics=config.eval_metrics)
    available = {m: scores[m] for m in config.eval_metrics if scores[m] is not None}
    return available, {CAPTIONS: json.dumps(generated, indent=1)}


RECIPE = training.Recipe(
    job="train_captioner",
    config=CaptionerTrainConfig,
    saved=SavedCaptioner,
    select_by=SELECT_BY,
    model_name=lambda config: model_name(config.language),
    variant=variant,
    prepare=prepare,
    train_loop=train_loop,
    reports=lambda config, metric: metric in ("epoch", "loss", *config.eval_metrics),
    unused_keys=unused_keys,
)
