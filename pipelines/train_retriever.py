"""Dual-encoder training (docs/spec/retrieval.md) through the training core (pipelines/
training.py): an image tower over the features job's pooled vectors (or, with
model.image_backbone=finetune, the CNN itself over the curated photos) and a speech or text
tower, trained with the masked margin softmax loss (or the triplet baseline) on in-batch
negatives, one MLflow run, the checkpoint with the best dev mean R@10 as the run's model.

    FEATURES/features/*.parquet (records.FEATURES)  ->  MLflow run (params, loss per step,
    [SPEECH/clips/*.parquet (records.CLIP)]             dev R@k per epoch, learning curve,
                                                        the best model under model/)

What is the retrievers' here: the rows (pipelines/retrieval_data.py: pairs, random crops,
MFCCs with SpecAugment or token ids), the loss (RetrievalLoss: both towers, the match mask,
the growing margin, set by the core before every optimizer step), and the dev scoring
(pipelines/evaluate_retriever.py). The optimizer defaults are the spec's: Adam, lr 0.001
decayed x0.999 every 1,000 steps, L2 weight decay 4e-5. A fine-tuned CNN takes
model.backbone_lr_scale of that rate (DualEncoder.optimizer_groups).

Negatives from every worker: with several workers each one gathers the embeddings (and
match ids) of all workers' batches, with their gradients (torch.distributed.nn.all_gather),
and computes the loss of the global batch; DDP's averaging of the gradients then gives
exactly the global batch's gradient. The effective batch of negatives is batch_size x
workers, as in the paper's 32 GPUs; `gather=false` keeps each worker's own batch.
Ray Train splits the rows equally between workers, so the batches gathered have one size.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Literal

import mlflow
import numpy as np
import pyarrow as pa
import ray
import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dist_nn
from pydantic import Field
from torch import Tensor, nn

from conceptual import registry, tracking
from conceptual.models.retriever import (
    DualEncoder,
    RetrieverConfig,
    RetrieverSettings,
    margin_at,
    match_mask,
    mms_loss,
    triplet_loss,
)
from conceptual.models.saving import load_retriever, save_retriever
from conceptual.models.vocab import Vocabulary
from conceptual.pipelines import training
from conceptual.pipelines.caption_features import feature_files
from conceptual.pipelines.evaluate_retriever import SELECT_BY, dev_scores, eval_set_name
from conceptual.pipelines.retrieval_data import (
    TRAIN_SPLIT,
    Modality,
    PhotoAugmentConfig,
    eval_set,
    photo_crops,
    pooled_crops,
    query_inputs,
    split_images,
    train_captions,
    train_examples,
    train_pairs,
)
from conceptual.runtime import init_ray
from conceptual.speech.features import AudioFeatureConfig, clip_features
from conceptual.vision.cnn import FEATURE_CHANNELS


class RetrieverTrainConfig(training.TrainingConfig):
    modality: Modality = "speech"
    loss: Literal["mms", "triplet"] = "mms"
    model: RetrieverSettings = RetrieverSettings()
    audio: AudioFeatureConfig = AudioFeatureConfig()  # speech: MFCCs, crop length, SpecAugment
    image: PhotoAugmentConfig = PhotoAugmentConfig()  # model.image_backbone=finetune: distortion
    margin: float = Field(default=0.001, ge=0)  # the margin at step 0
    margin_growth: float = Field(default=1.002, ge=1)  # multiplied by this...
    margin_every: int = Field(default=1000, ge=1)  # ...every this many optimizer steps
    gather: bool = True  # in-batch negatives from every worker (see the module's docstring)
    # A saved retriever (model URI or directory) to start from: its weights, its towers'
    # settings (model.* is then not used) and, for text, its vocabulary. Fine-tuning.
    init: str | None = None
    min_count: int = 2  # text: words seen at least this often in the train captions
    eval_split: str = "val"
    eval_max_images: int | None = None  # None: every dev image
    experiment: str = "retrieval"
    allow_incomplete: bool = False  # read inputs whose job left no _SUCCESS marker
    # The spec's optimization (the training core's defaults are the captioners').
    optimizer: Literal["adagrad", "adam", "adamw"] = "adam"
    lr: float = 0.001
    lr_schedule: Literal["constant", "cosine", "exponential"] = "exponential"
    weight_decay: float = 4e-5
    batch_size: int = Field(default=48, ge=2)  # in-batch negatives need a batch
    epochs: int = 5


def model_name(modality: str) -> str:
    """The registered model a retriever becomes a version of."""
    return f"retriever-{modality}"


def variant(config: RetrieverTrainConfig) -> str:
    return f"{config.modality}-{config.loss}"


# ---------------------------------------------------------------- the driver


def train(
    features_uri: str, config: RetrieverTrainConfig, speech_uri: str | None = None
) -> dict[str, Any]:
    """Train, evaluate every epoch and keep the best model by dev mean R@10. Returns the
    MLflow `run_id`, `model_dir` (a local copy of the best model), `best` (its epoch and dev
    metrics), `history` and `eval_set` (the name of the dev set the scores belong to)."""
    if config.modality == "speech" and speech_uri is None:
        raise ValueError("modality=speech needs spoken captions: --speech URI")
    speech_uri = speech_uri if config.modality == "speech" else None
    init_ray()
    files = feature_files(features_uri, config.allow_incomplete)
    images = split_images(features_uri, files, TRAIN_SPLIT)
    initial, vocab = None, None
    if config.init:
        initial, vocab, model_config = starting_point(config, images.pooled.shape[-1])
    elif config.modality == "text":
        vocab = Vocabulary.build(train_captions(features_uri, files), min_count=config.min_count)
    if initial is None:
        model_config = retriever_config(config, images.pooled.shape[-1], vocab)
    dev = eval_set(
        features_uri,
        config.eval_split,
        config.modality,
        speech_uri,
        config.eval_max_images,
        config.allow_incomplete,
        model_config.photo_size,
    )
    dev_inputs = query_inputs(dev, config.modality, vocab, config.audio, model_config.max_tokens)
    config = training.resolved(config, {"--features": features_uri, "--speech": speech_uri})

    with tracking.start_run(
        config.experiment, tags={"stage": "train_retriever", "variant": variant(config)}
    ) as active:
        run_id = active.info.run_id
        tracking.log_config(config, skip=unused_keys(config))
        mlflow.log_params(
            {
                "features_uri": features_uri,
                "speech_uri": speech_uri,
                "train_images": len(images.image_ids),
                "dev_images": len(dev["image_ids"]),
                "dev_queries": len(dev["query_ids"]),
                **({"vocab_size": len(vocab)} if vocab else {}),
            }
        )
        loop_config = {
            "config": config.model_dump(mode="json"),
            "model": model_config.model_dump(),
            "vocab": vocab.to_json() if vocab else None,
            "init": None if initial is None else ray.put(initial),
            "dev": ray.put((dev, dev_inputs)),  # rank 0 fetches it; the driver keeps it alive
        }
        pairs = train_pairs(features_uri, files, images, speech_uri, config.allow_incomplete)
        if model_config.photo_size is None:
            image_input = pooled_crops(images, np.float16 if config.use_gpu else np.float32)
        else:
            image_input = photo_crops(features_uri, images, model_config.photo_size, config.image)
        rows = train_examples(pairs, image_input, config.modality, query_input(config, vocab))
        best_dir, best_metrics, history = training.fit(
            train_loop, loop_config, rows, config, run_id, variant(config), SELECT_BY
        )
        best = {k: v for k, v in best_metrics.items() if k == "epoch" or "R@" in k}
        mlflow.log_dict({"best": best, "history": history}, "training.json")
    return {
        "run_id": run_id,
        "model_dir": str(best_dir / training.MODEL_DIR),
        "best": best,
        "history": history,
        "eval_set": eval_set_name(features_uri, dev),
    }


def publish(result: dict[str, Any], config: RetrieverTrainConfig, name: str | None = None) -> dict:
    """Register the model as a version of `retriever-<modality>` and apply the champion rule
    on dev mean R@10 (registry.publish). Returns the decision, with the new `version`."""
    name = name or model_name(config.modality)
    score = result["best"][SELECT_BY]
    return registry.publish(
        result["run_id"], variant(config), score, result["eval_set"], SELECT_BY, name
    )


def starting_point(
    config: RetrieverTrainConfig, image_dim: int
) -> tuple[dict[str, Tensor], Vocabulary | None, RetrieverConfig]:
    """The weights, vocabulary and model config of `config.init`, checked against the run:
    the same modality and (unless it fine-tunes the CNN on the photos) image features; a
    speech model's frames follow this run's audio."""
    model, vocab, _ = load_retriever(registry.resolve(config.init))
    saved = model.config
    other_features = saved.photo_size is None and saved.image_dim != image_dim
    if saved.modality != config.modality or other_features:
        raise ValueError(
            f"init={config.init} is a {saved.modality} retriever over {saved.image_dim}-d image "
            f"features; this run trains {config.modality} over {image_dim}-d features"
        )
    frames = 1 + round(config.audio.seconds * 100)
    return model.state_dict(), vocab, saved.model_copy(update={"frames": frames})


def unused_keys(config: RetrieverTrainConfig) -> tuple[str, ...]:
    """Keys of the other modality's tower, and of the photos when the CNN is not fine-tuned
    (not logged as this run's params)."""
    photos = ()
    if config.model.image_backbone == "features":
        photos = ("model.image_size", *(f"image.{key}" for key in PhotoAugmentConfig.model_fields))
    if config.modality == "speech":
        text = ("text_architecture", "text_d_model", "text_layers", "text_heads", "max_tokens")
        return tuple(f"model.{key}" for key in text) + ("min_count", *photos)
    return (
        "model.speech_channels",
        "audio.n_mfcc",
        "audio.n_mels",
        "audio.seconds",
        "audio.freq_mask",
        "audio.time_mask",
        *photos,
    )


def retriever_config(
    config: RetrieverTrainConfig, image_dim: int, vocab: Vocabulary | None
) -> RetrieverConfig:
    """The model's settings with what the data decides (a fine-tuned CNN decides image_dim
    itself)."""
    finetune = config.model.image_backbone == "finetune"
    return RetrieverConfig(
        **config.model.model_dump(),
        modality=config.modality,
        image_dim=FEATURE_CHANNELS if finetune else image_dim,
        n_mfcc=config.audio.n_mfcc,
        frames=1 + round(config.audio.seconds * 100),
        vocab_size=len(vocab) if vocab else 0,
    )


def query_input(config: RetrieverTrainConfig, vocab: Vocabulary | None):
    """What a training batch's query tower reads, from the pairs' columns."""
    if config.modality == "speech":
        return partial(_mfccs, audio=config.audio)
    return partial(_tokens, vocab=vocab, max_tokens=config.model.max_tokens)


def _mfccs(batch: pa.Table, rng: np.random.Generator, audio: AudioFeatureConfig) -> np.ndarray:
    """A random crop of each clip with SpecAugment (a new draw every epoch)."""
    return np.stack([clip_features(clip, audio, rng) for clip in batch["audio"].to_pylist()])


def _tokens(
    batch: pa.Table, rng: np.random.Generator, vocab: Vocabulary, max_tokens: int
) -> np.ndarray:
    return vocab.encode_array(batch["caption"].to_pylist(), max_tokens)


# ---------------------------------------------------------------- the workers


class RetrievalLoss(nn.Module):
    """Both towers, the match mask and the loss over a batch's columns (DDP synchronizes the
    gradients of what runs through the wrapped module's forward). `at_step` sets the
    growing margin and the triplet's draw of negatives for each optimizer step."""

    def __init__(self, model: DualEncoder, config: RetrieverTrainConfig):
        super().__init__()
        self.model, self.config = model, config
        self.register_buffer("margin", torch.tensor(config.margin), persistent=False)
        self.negatives = torch.Generator()

    def at_step(self, step: int) -> None:
        c = self.config
        self.margin.fill_(margin_at(step, c.margin, c.margin_growth, c.margin_every))
        self.negatives.manual_seed(c.seed * 1_000_003 + step)  # the same draw on every worker

    def forward(
        self,
        image: Tensor,
        image_group: Tensor,
        caption_group: Tensor,
        mfcc: Tensor | None = None,
        tokens: Tensor | None = None,
    ) -> Tensor:
        images = self.model.embed_images(image)
        queries = self.model.embed_queries(mfcc if mfcc is not None else tokens)
        if self.config.gather and dist.is_initialized() and dist.get_world_size() > 1:
            images, queries = (torch.cat(dist_nn.all_gather(t)) for t in (images, queries))
            image_group, caption_group = (_gathered(t) for t in (image_group, caption_group))
        scores = self.model.scores(images, queries)
        mask = match_mask(image_group, caption_group)
        if self.config.loss == "mms":
            return mms_loss(scores, mask, self.margin)
        return triplet_loss(scores, mask, self.margin, self.negatives)


def _gathered(t: Tensor) -> Tensor:
    parts = [torch.empty_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, t)
    return torch.cat(parts)


def train_loop(loop_config: dict[str, Any]) -> None:
    """Ray Train's per-worker loop (importable, so workers find it in the installed package)."""
    config = RetrieverTrainConfig.model_validate(loop_config["config"])
    vocab = Vocabulary.from_json(loop_config["vocab"]) if loop_config["vocab"] else None
    torch.manual_seed(config.seed)
    model = DualEncoder(RetrieverConfig.model_validate(loop_config["model"]))
    if loop_config["init"] is not None:  # a resumed run then loads its checkpoint over it
        model.load_state_dict(ray.get(loop_config["init"]))
    loss = RetrievalLoss(model, config)
    rank = ray.train.get_context().get_world_rank()
    dev, dev_inputs = ray.get(loop_config["dev"]) if rank == 0 else (None, None)
    audio = config.audio.model_dump() if config.modality == "speech" else None
    task = training.Task(
        model=model,
        loss=loss,
        evaluate=lambda: (dev_scores(model, dev, dev_inputs), {}),
        save=partial(save_retriever, model, vocab=vocab, audio=audio),
        at_step=loss.at_step,
    )
    training.run(task, config, loop_config)
