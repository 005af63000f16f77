"""Dual-encoder training (docs/spec/retrieval.md) through the training core (pipelines/
training.py): an image tower over the features job's pooled vectors (or, with
model.image_backbone=finetune, the CNN itself over the curated photos) and a speech or text
tower, trained with the masked margin softmax loss (or the triplet baseline) on in-batch
negatives, one MLflow run, the checkpoint with the best dev mean R@10 as the run's model.

    FEATURES/features/*.parquet (records.FEATURES)  ->  MLflow run (params, loss per step,
    [SPEECH/clips/*.parquet (records.CLIP)]             dev R@k per epoch, learning curve,
                                                        the best model under model/)

What is the retrievers' here: the rows (pipelines/families/retriever/retrieval_data.py: pairs, random crops,
MFCCs with SpecAugment or token ids), the loss's settings (models/losses.py's
RetrievalLoss: both towers, the match mask, the growing margin, set by the core before
every optimizer step), and the dev scoring (pipelines/families/retriever/evaluate_retriever.py). The
optimizer defaults are the spec's: Adam, lr 0.001 decayed x0.999 every 1,000 steps, L2
weight decay 4e-5. A fine-tuned CNN takes model.backbone_lr_scale of that rate
(DualEncoder.optimizer_groups).

A teacher (`teacher=TEXT_MODEL_URI`, speech only): the speech tower also learns to put each
clip where the teacher's frozen text tower puts the clip's caption (distillation_loss, MMS
or cosine, `distill.*`). The speech model takes the teacher's image settings and starts
from its image tower and scale, so the teacher's caption embeddings already lie next to
their images in the space the speech tower is pulled into. The schedule is joint: every
step adds `distill.weight` x the distillation loss to the image-alignment loss, from the
first step. Why not distillation first, then alignment: with the image tower starting as
the teacher's, both losses pull the speech tower toward the same place, and a separate
phase would only spend epochs; joint also lets clips without a photo (`--teacher-speech`
outputs, e.g. synthesized cc_val_captions) teach the tower in every batch while the
photo's clips align. Clips without a photo in the train split add only the distillation
term; clips of captions or images of the features' other splits never teach (the dev and
test sets stay unseen). Every epoch logs the loss's terms `distill_loss` and
`alignment_loss` (the epoch's means on rank 0) and the dev clips' speech_to_text.R@k
against the teacher's embeddings of the dev captions.

Warm starts (`init.*`, the paper's Table 2): `init=URI` loads a whole saved retriever (its
towers' settings and vocabulary too); `init.image`, `init.speech`, `init.text` load one
tower each from a saved retriever's (this run's settings for that tower must match the
saved ones; `init.text` brings the saved vocabulary).

Negatives from every worker: with several workers each one gathers the embeddings (and
match ids) of all workers' batches, with their gradients, and computes the loss of the
global batch (models/losses.py: gathered). The effective batch of negatives is batch_size x
workers, as in the paper's 32 GPUs; `gather=false` keeps each worker's own batch.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from functools import partial
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import ray
import torch
from pydantic import Field, model_validator
from torch import Tensor

from conceptual import registry
from conceptual.config import Config
from conceptual.metrics import KS, recall_at_k
from conceptual.models.losses import RetrievalLoss, margin_at
from conceptual.models.retriever import DualEncoder, Modality, RetrieverConfig, RetrieverSettings
from conceptual.models.saving import (
    LANGUAGE_MODEL,
    FeatureSettings,
    SavedRetriever,
    load,
    save_retriever,
)
from conceptual.models.vocab import Vocabulary
from conceptual.pipelines.families.retriever.evaluate_retriever import SELECT_BY, dev_scores, embed
from conceptual.pipelines.families.retriever.retrieval_data import (
    PhotoAugmentConfig,
    eval_set,
    photo_crops,
    pooled_crops,
    query_inputs,
    teacher_pairs,
    train_examples,
    train_pairs,
)
from conceptual.pipelines.features.features_data import (
    TRAIN_SPLIT,
    feature_files,
    feature_settings,
    split_images,
    train_captions,
)
from conceptual.pipelines.training import training
from conceptual.runtime import init_ray
from conceptual.speech.audio import decode_16k
from conceptual.speech.augment import SpeechAugmentConfig, augmented, row_generator
from conceptual.speech.features import AudioFeatureConfig, clip_features, samples_features
from conceptual.speech.language_model import arpa
from conceptual.speech.recognizer import words
from conceptual.splits import drawn_subset
from conceptual.vision.cnn import FEATURE_CHANNELS


class MarginConfig(Config):
    """The spec's growing margin: `start`, x `growth` every `every` optimizer steps, capped at
    `max`. The paper grew it every 1,000 of its ~3 M steps: 3,000 times, to
    0.001 x 1.002^3000 = 0.40. Runs here take a few hundred steps (3,135 clips at batch 48:
    66 steps an epoch), where every=1000 would never grow it; the default grows it ten times
    a step, so a 300-step run ends where the paper's did, and `max` holds a longer run
    there. every=1000 max=.inf is the paper's schedule for a 3 M-step run. `margin=X` sets
    the start alone."""

    start: float = Field(default=0.001, ge=0)
    growth: float = Field(default=1.002, ge=1)
    every: float = Field(default=0.1, gt=0)
    max: float = Field(default=0.4, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _a_number_is_the_start(cls, data: Any) -> Any:
        return {"start": data} if isinstance(data, int | float) else data

    def at(self, step: int) -> float:
        return margin_at(step, self.start, self.growth, self.every, self.max)


class InitConfig(Config):
    """Saved retrievers (model URIs or directories) to start from. `init=URI` sets `model`."""

    model: str | None = None  # the whole model: weights, towers' settings, vocabulary
    image: str | None = None  # one tower's weights; this run's settings must match its
    speech: str | None = None
    text: str | None = None  # with its vocabulary

    @model_validator(mode="before")
    @classmethod
    def _a_uri_is_the_whole_model(cls, data: Any) -> Any:
        return {"model": data} if isinstance(data, str) else data

    def towers(self) -> dict[str, str]:
        """Tower name -> URI, for the towers set one at a time."""
        return {t: uri for t in ("image", "speech", "text") if (uri := getattr(self, t))}


class DistillConfig(Config):
    """With `teacher`: the speech tower learns the teacher text tower's caption embeddings."""

    loss: Literal["mms", "cosine"] = "mms"
    weight: float = Field(default=1.0, gt=0)  # beside the image-alignment loss's 1


class RetrieverTrainConfig(training.TrainingConfig):
    modality: Modality = "speech"
    # mms; triplet (the baseline); infonce (CLIP's, over the scaled cosine scores: the
    # contrastive family's, pipelines/families/contrastive/train_contrastive.py)
    loss: Literal["mms", "triplet", "infonce"] = "mms"
    model: RetrieverSettings = RetrieverSettings()
    audio: AudioFeatureConfig = AudioFeatureConfig()  # speech: MFCCs, crop length, SpecAugment
    augment: SpeechAugmentConfig = SpeechAugmentConfig()  # speech: speed, room, noise (off)
    image: PhotoAugmentConfig = PhotoAugmentConfig()  # model.image_backbone=finetune: distortion
    margin: MarginConfig = MarginConfig()
    gather: bool = True  # in-batch negatives from every worker (see the module's docstring)
    # Saved retrievers to start from: init=URI the whole model (its towers' settings, so
    # model.* is then not used, and for text its vocabulary); init.image/speech/text one tower.
    init: InitConfig = InitConfig()
    teacher: str | None = None  # speech: a text retriever whose caption embeddings it learns
    distill: DistillConfig = DistillConfig()
    min_count: int = 2  # text: words seen at least this often in the train captions
    # A seeded draw (by `seed`) of this share of the train split's images, with all their
    # captions and clips: training on subsets (the paper's Figure 3). Not under data.*,
    # the training core's input path.
    train_fraction: float = Field(default=1.0, gt=0, le=1)
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


def prepare(
    config: RetrieverTrainConfig,
    features_uri: str,
    speech_uri: str | None = None,
    teacher_speech: Sequence[str] = (),
) -> training.Prepared:
    """A run on a features dataset and, for speech, its clips (the module's docstring): the
    model's starting point, the dev set and the rows. `teacher_speech`: more clips (with
    `teacher`) that teach the speech tower by their captions alone."""
    if config.modality == "speech" and speech_uri is None:
        raise ValueError("modality=speech needs spoken captions: --speech URI")
    if config.teacher and config.modality != "speech":
        raise ValueError("teacher= teaches a speech tower: it needs modality=speech")
    if teacher_speech and not config.teacher:
        raise ValueError("--teacher-speech clips teach through a teacher: set teacher=URI")
    speech_uri = speech_uri if config.modality == "speech" else None
    init_ray()
    files = feature_files(features_uri, config.allow_incomplete)
    images = split_images(files, features_uri, TRAIN_SPLIT, every_crop=True)
    images = images.subset(drawn_subset(images.image_ids, config.train_fraction, config.seed))
    image_dim = images.pooled.shape[-1]
    teacher = load_teacher(config.teacher, image_dim) if config.teacher else None
    # A text model's own captions: its vocabulary, and the language model the recognizer
    # hears spoken queries with (asr.lm=captions).
    captions = train_captions(files, features_uri) if config.modality == "text" else []
    if captions and config.train_fraction < 1:  # only what the run trains on
        captions = [images.captions[record] for record in sorted(images.captions)]
    initial, vocab = None, None
    if config.init.model:
        initial, vocab, model_config = starting_point(config, image_dim)
    else:
        if config.init.text:
            vocab = load(registry.resolve(config.init.text), kind=SavedRetriever).vocab
        elif config.modality == "text":
            vocab = Vocabulary.build(captions, min_count=config.min_count)
        model_config = retriever_config(config, image_dim, vocab, teacher)
        initial = tower_weights(config.init.towers(), model_config, teacher)
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
    loop_config = {
        "model": model_config.model_dump(),
        "vocab": vocab.to_json() if vocab else None,
        "features": feature_settings(features_uri).model_dump(),
        "init": None if initial is None else ray.put(initial),
        "dev": ray.put((dev, dev_inputs)),  # rank 0 fetches it; the driver keeps it alive
    }
    if teacher is not None:
        loop_config["dev_targets"] = teacher.embed_captions(dev["captions"])

    def rows(resolved: RetrieverTrainConfig) -> ray.data.Dataset:
        pairs = train_pairs(features_uri, files, images, speech_uri, config.allow_incomplete)
        if teacher_speech:
            more = teacher_pairs(features_uri, files, teacher_speech, config.allow_incomplete)
            pairs = pairs.union(more).randomize_block_order()
        targets = None if teacher is None else teacher.targets()
        if model_config.photo_size is None:
            image_input = pooled_crops(images, np.float16 if resolved.use_gpu else np.float32)
        else:
            image_input = photo_crops(features_uri, images, model_config.photo_size, config.image)
        return train_examples(
            pairs, image_input, config.modality, query_input(config, vocab), targets
        )

    return training.Prepared(
        data={"--features": features_uri, "--speech": speech_uri}
        | {f"--teacher-speech {i}": uri for i, uri in enumerate(teacher_speech)},
        params={
            "features_uri": features_uri,
            "speech_uri": speech_uri,
            "teacher_speech": " ".join(teacher_speech) or None,
            "train_images": len(images.image_ids),
            "dev_images": len(dev["image_ids"]),
            "dev_queries": len(dev["query_ids"]),
            **({"vocab_size": len(vocab)} if vocab else {}),
        },
        loop_config=loop_config,
        rows=rows,
        eval_size=len(dev["image_ids"]),
        model_files={LANGUAGE_MODEL: arpa(words(c) for c in captions)} if captions else {},
        eval_set=dev["name"],
    )


def starting_point(
    config: RetrieverTrainConfig, image_dim: int
) -> tuple[dict[str, Tensor], Vocabulary | None, RetrieverConfig]:
    """The weights, vocabulary and model config of `config.init.model`, checked against the
    run: the same modality and (unless it fine-tunes the CNN on the photos) image features; a
    speech model's frames follow this run's audio."""
    loaded = load(registry.resolve(config.init.model), kind=SavedRetriever)
    model, vocab = loaded.model, loaded.vocab
    saved = model.config
    if saved.modality != config.modality or _other_features(saved, image_dim):
        raise ValueError(
            f"init={config.init.model} is a {saved.modality} retriever over {saved.image_dim}-d "
            f"image features; this run trains {config.modality} over {image_dim}-d features"
        )
    frames = 1 + round(config.audio.seconds * 100)
    return model.state_dict(), vocab, saved.model_copy(update={"frames": frames})


def _other_features(saved: RetrieverConfig, image_dim: int) -> bool:
    """A saved model over other image features than this run's (a fine-tuned CNN reads photos)."""
    return saved.photo_size is None and saved.image_dim != image_dim


class Teacher:
    """A saved text retriever whose text tower embeds captions for the speech tower to learn;
    frozen, on the CPU (a caption's embedding costs far less than its clip's MFCCs)."""

    def __init__(self, model: DualEncoder, vocab: Vocabulary):
        self.model, self.vocab = model.eval(), vocab

    def embed_captions(self, captions: Sequence[str]) -> np.ndarray:
        tokens = self.vocab.encode_array(list(captions), self.model.config.max_tokens)
        return embed(self.model.embed_queries, tokens, torch.device("cpu")).numpy()

    def targets(self):
        """What the training rows' tasks call on a batch's captions (the teacher shipped once
        through the object store, rebuilt once per worker process)."""
        saved = (self.model.state_dict(), self.model.config.model_dump(), self.vocab.to_json())
        return partial(_teacher_targets, shared=(ray.put(saved),))


@functools.lru_cache(maxsize=2)
def _rebuilt_teacher(ref: ray.ObjectRef) -> Teacher:
    weights, model_config, vocab = ray.get(ref)
    model = DualEncoder(RetrieverConfig.model_validate(model_config))
    model.load_state_dict(weights)
    return Teacher(model, Vocabulary.from_json(vocab))


def _teacher_targets(captions: list[str], shared: tuple[ray.ObjectRef]) -> np.ndarray:
    return _rebuilt_teacher(shared[0]).embed_captions(captions)


def load_teacher(uri: str, image_dim: int) -> Teacher:
    """The teacher of `teacher=URI`: a text retriever over this run's image features."""
    loaded = load(registry.resolve(uri), kind=SavedRetriever)
    model, vocab = loaded.model, loaded.vocab
    if model.config.modality != "text" or _other_features(model.config, image_dim):
        raise ValueError(
            f"teacher={uri} is a {model.config.modality} retriever over "
            f"{model.config.image_dim}-d image features; a teacher is a text retriever over "
            f"this run's {image_dim}-d features"
        )
    return Teacher(model, vocab)


def tower_weights(
    towers: dict[str, str], model_config: RetrieverConfig, teacher: Teacher | None = None
) -> dict[str, Tensor] | None:
    """The weights the run starts from when its towers are loaded one at a time (`towers`:
    tower -> saved retriever), as a state dict of the model's keys (None: none loaded); a
    teacher's image tower and scale unless init.image names another. Each tower is checked
    by loading it into a model of this run's settings: a mismatch is a clear error here,
    not a failed worker."""
    sources: dict[str, DualEncoder] = {}
    if teacher is not None:
        sources["image"] = teacher.model
    for tower, uri in towers.items():
        wanted = "text" if tower == "text" else "speech" if tower == "speech" else None
        saved = load(registry.resolve(uri), kind=SavedRetriever).model
        if wanted and wanted != model_config.modality:
            raise ValueError(f"init.{tower}: this run trains a {model_config.modality} tower")
        if wanted and saved.config.modality != wanted:
            raise ValueError(f"init.{tower}={uri} is a {saved.config.modality} retriever")
        sources[tower] = saved
    if not sources:
        return None
    model = DualEncoder(model_config)
    for tower, saved in sources.items():
        part = "image" if tower == "image" else "query"
        try:
            getattr(model, part).load_state_dict(getattr(saved, part).state_dict())
        except RuntimeError as error:
            raise ValueError(
                f"the {tower} tower of {towers.get(tower, 'the teacher')} does not fit this "
                f"run's model settings (model.*): {str(error).splitlines()[0]}"
            ) from error
        if tower == "image" and model_config.normalize and saved.config.normalize:
            model.log_scale.data.copy_(saved.log_scale.data)  # the scale their scores had
    return model.state_dict()


def unused_keys(config: RetrieverTrainConfig) -> tuple[str, ...]:
    """Keys of the other modality's tower, of the photos when the CNN is not fine-tuned and of
    the margin under InfoNCE (not logged as this run's params)."""
    unused = ()
    if config.model.image_backbone == "features":
        unused = (
            "model.image_size",
            "model.image_init",
            *(f"image.{key}" for key in PhotoAugmentConfig.model_fields),
        )
    if config.loss == "infonce":  # no margin: the learned scale sets the softmax's sharpness
        unused = (*unused, *(f"margin.{key}" for key in MarginConfig.model_fields))
    if config.modality == "speech":
        text = ("text_architecture", "text_d_model", "text_layers", "text_heads", "max_tokens")
        return tuple(f"model.{key}" for key in text) + ("min_count", "init.text", *unused)
    return (
        "init.speech",
        "teacher",
        "distill.loss",
        "distill.weight",
        "model.speech_tower",
        "model.speech_channels",
        "model.speech_residual",
        "audio.n_mfcc",
        "audio.n_mels",
        "audio.seconds",
        "audio.freq_mask",
        "audio.time_mask",
        "audio.cmvn",
        *(f"augment.{key}" for key in SpeechAugmentConfig.model_fields),
        *unused,
    )


def retriever_config(
    config: RetrieverTrainConfig,
    image_dim: int,
    vocab: Vocabulary | None,
    teacher: Teacher | None = None,
) -> RetrieverConfig:
    """The model's settings with what the data decides (a fine-tuned CNN decides image_dim
    itself); with a teacher, its image tower's and embedding's settings, which the model
    starts from."""
    settings = config.model.model_dump()
    if teacher is not None:
        taught = (
            "embed_dim",
            "normalize",
            "image_backbone",
            "image_size",
            "image_init",
            "image_hidden",
        )
        settings |= {key: getattr(teacher.model.config, key) for key in taught}
    finetune = settings["image_backbone"] == "finetune"
    return RetrieverConfig(
        **settings,
        modality=config.modality,
        image_dim=FEATURE_CHANNELS if finetune else image_dim,
        n_mfcc=config.audio.n_mfcc,
        frames=1 + round(config.audio.seconds * 100),
        vocab_size=len(vocab) if vocab else 0,
    )


def query_input(config: RetrieverTrainConfig, vocab: Vocabulary | None):
    """What a training batch's query tower reads, from the pairs' columns."""
    if config.modality == "speech":
        return partial(_mfccs, audio=config.audio, augment=config.augment)
    return partial(_tokens, vocab=vocab, max_tokens=config.model.max_tokens)


def _mfccs(
    batch: pa.Table,
    rng: np.random.Generator,
    audio: AudioFeatureConfig,
    augment: SpeechAugmentConfig | None = None,
) -> np.ndarray:
    """A random crop of each clip with SpecAugment (a new draw every epoch); with
    `augment` on, of one of the clip's variants (speech/augment.py), drawn every epoch from
    `augment.variants`, each regenerable from its seed."""
    clips = batch["audio"].to_pylist()
    if augment is None or not augment.enabled:
        return np.stack([clip_features(clip, audio, rng) for clip in clips])
    heard = []
    for clip in clips:
        variant = row_generator(augment, clip, int(rng.integers(augment.variants)))
        heard.append(samples_features(augmented(decode_16k(clip), augment, variant), audio, rng))
    return np.stack(heard)


def _tokens(
    batch: pa.Table, rng: np.random.Generator, vocab: Vocabulary, max_tokens: int
) -> np.ndarray:
    return vocab.encode_array(batch["caption"].to_pylist(), max_tokens)


# ---------------------------------------------------------------- the workers


def train_loop(loop_config: dict[str, Any]) -> None:
    """Ray Train's per-worker loop (importable, so workers find it in the installed package)."""
    config = RetrieverTrainConfig.model_validate(loop_config["config"])
    vocab = Vocabulary.from_json(loop_config["vocab"]) if loop_config["vocab"] else None
    torch.manual_seed(config.seed)
    model = DualEncoder(RetrieverConfig.model_validate(loop_config["model"]))
    if loop_config["init"] is not None:  # a resumed run then loads its checkpoint over it
        model.load_state_dict(ray.get(loop_config["init"]))
    loss = retrieval_loss(model, config)
    dev, dev_inputs = training.dev_data(loop_config["dev"], elsewhere=(None, None))
    audio = config.audio.model_dump() if config.modality == "speech" else None
    features = FeatureSettings.model_validate(loop_config["features"])
    dev_targets = loop_config.get("dev_targets")

    def evaluate() -> tuple[dict[str, float], dict[str, str]]:
        metrics = dev_scores(model, dev, dev_inputs)
        if dev_targets is not None:
            metrics |= speech_to_text(model, dev_inputs, dev_targets, dev["captions"])
        return metrics, {}

    task = training.Task(
        model=model,
        loss=loss,
        evaluate=evaluate,
        save=partial(save_retriever, model, vocab=vocab, audio=audio, features=features),
        at_step=loss.at_step,
    )
    training.run(task, config, loop_config)


def retrieval_loss(model: DualEncoder, config: RetrieverTrainConfig) -> RetrievalLoss:
    """The run's loss as its config sets it (the triplet's negatives seeded by `seed`)."""
    return RetrievalLoss(
        model,
        margins=config.margin.at,
        kind=config.loss,
        seed=config.seed,
        gather=config.gather,
        distill=config.distill.loss,
        distill_weight=config.distill.weight,
    )


@torch.no_grad()
def speech_to_text(
    model: DualEncoder, mfccs: np.ndarray, targets: np.ndarray, captions: Sequence[str]
) -> dict[str, float]:
    """R@k of the dev clips among the teacher's embeddings of the dev captions (each caption
    once; a clip's relevant target is its own caption): how well the tower learned its
    teacher, apart from the images."""
    was_training = model.training
    model.eval()
    queries = embed(model.embed_queries, mfccs, next(model.parameters()).device).cpu()
    model.train(was_training)
    distinct = sorted(set(captions))
    first = {caption: captions.index(caption) for caption in distinct}
    texts = torch.as_tensor(targets[[first[c] for c in distinct]])
    scores = model.scores(texts, queries).T  # (clips, captions)
    relevant = np.array([[c == t for t in distinct] for c in captions])
    found = recall_at_k(scores, relevant, [k for k in KS if k <= 10])
    return {f"speech_to_text.R@{k}": v for k, v in found.items()}


RECIPE = training.Recipe(
    job="train_retriever",
    config=RetrieverTrainConfig,
    saved=SavedRetriever,
    select_by=SELECT_BY,
    model_name=lambda config: model_name(config.modality),
    variant=variant,
    prepare=prepare,
    train_loop=train_loop,
    reports=lambda config, metric: metric == "epoch" or "R@" in metric,
    unused_keys=unused_keys,
)
