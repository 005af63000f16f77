"""A learned image&text alignment score (issue 59): how well a caption describes its image,
as the cosine of the two in a scorer's joint embedding, which curation keeps pairs by
(`alignment.*`, `overlap.rule`; docs/curation.md).

A scorer is named by a URI and loaded once per actor:

- the platform's own dual encoder, a text retriever or the contrastive model:
  `models:/contrastive@champion`, `models:/retriever-text/3`, `runs:/<id>/model` or a path
  (what registry.resolve takes). It reads the image's pooled CNN vector, the features job's,
  which the vision step already computes (`embedding`), and the caption's token ids.
- an open_clip model, for those who have its weights: `open_clip:ViT-B-32@PATH_OR_TAG` (a
  local checkpoint, or a tag open_clip downloads). It reads the decoded image itself.

    scorer = load_scorer("models:/contrastive@champion")
    scores = scorer.score(embeddings, ["a dog runs on the grass", ...])   # (N,) cosines

`scorer.reads` says which input it takes ("embedding" or "image"). On a GPU it runs there;
on a CPU it scores in batches of `batch_size`. `combined` is overlap.rule: how a pair's label
verdict and its score make one verdict.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal, Protocol

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from pydantic import Field, model_validator

from conceptual.config import Config
from conceptual.models.saving import FeatureSettings, SavedRetriever, load
from conceptual.records import Rejection
from conceptual.vision.cnn import FEATURE_CHANNELS, resolve_device

ALIGNMENT_STAGE, LOW_ALIGNMENT = "alignment", "low_alignment"
OPEN_CLIP = "open_clip:"
Reads = Literal["embedding", "image"]
# What the vision step's embeddings are: the features job's default CNN and size.
VISION_FEATURES = FeatureSettings(model="efficientnet-lite0", image_size=256)
TRAIN_HINT = (
    "train one on the features job's pooled vectors (python -m conceptual.jobs.train_contrastive "
    "--features OUT/features-run; docs/retrieval.md) and name it as models:/contrastive@champion, "
    "runs:/<id>/model or its folder"
)
OPEN_CLIP_HINT = (
    "install open_clip and a torchvision built for the installed torch: "
    "pip install 'conceptual[open_clip]'"
)


class AlignmentConfig(Config):
    """`scorer` (a URI, as load_scorer takes it) scores every pair that passes the image
    filters (its `alignment_score`, in curated and rejected records alike); a pair then needs
    `min_score` (a cosine), or a place in the top `keep_fraction` of the run's scored pairs
    (DataComp's rule, decided once every pair is scored), as overlap.rule combines the score
    with the label rule. Neither: the score is only recorded."""

    scorer: str | None = None
    min_score: float | None = Field(default=None, ge=-1, le=1)
    keep_fraction: float | None = Field(default=None, gt=0, le=1)
    batch_size: int = Field(default=256, gt=0)  # pairs per forward pass of the scorer

    @property
    def threshold_rule(self) -> bool:
        return self.min_score is not None or self.keep_fraction is not None

    @property
    def reads_embeddings(self) -> bool:
        """Whether the scorer reads the vision step's pooled CNN vectors (open_clip reads the
        decoded image)."""
        return self.scorer is not None and not self.scorer.startswith(OPEN_CLIP)

    @model_validator(mode="after")
    def _one_rule_with_a_scorer(self) -> AlignmentConfig:
        if self.min_score is not None and self.keep_fraction is not None:
            raise ValueError("alignment.min_score or alignment.keep_fraction, not both")
        if self.threshold_rule and self.scorer is None:
            raise ValueError(
                "alignment.min_score and alignment.keep_fraction need alignment.scorer (e.g. "
                "models:/contrastive@champion)"
            )
        return self


def low_alignment(score: float, threshold: float, labels: Rejection | None = None) -> Rejection:
    """The rejection of a pair scoring under `threshold` (and, by overlap.rule=either, failing
    the label rule too: `labels`)."""
    detail = f"alignment score {score:.4f} < {threshold:.4f}"
    if labels is not None:
        detail += f"; labels: {labels.reason} ({labels.detail})"
    return Rejection(LOW_ALIGNMENT, detail)


def combined(
    rule: str, labels: Rejection | None, score: float | None, threshold: float | None
) -> Rejection | None:
    """A pair's verdict by overlap.rule from the label rule's (`labels`: its rejection, or
    None when it keeps the pair) and its score against `threshold` (None: not decided here,
    so the score rejects nothing). The label rule's own rejection stands under "labels" and
    "both"; every other is low_alignment, under "either" only when both rules fail it."""
    if rule == "labels" or (rule == "both" and labels is not None):
        return labels
    low = threshold is not None and score is not None and score < threshold
    if not low or (rule == "either" and labels is None):
        return None
    return low_alignment(score, threshold, labels if rule == "either" else None)


class ScorerError(ValueError):
    """A scorer that cannot be had: the message says what to train or install."""


class Scorer(Protocol):
    reads: Reads  # the image input score() takes: pooled CNN vectors, or decoded images

    def score(self, images: np.ndarray | Sequence[Image.Image], captions: Sequence[str]):
        """(N,) float32 cosines of each image with its caption."""
        ...


class RetrieverScorer:
    """A text dual encoder (models.retriever.DualEncoder over pooled vectors) as a scorer:
    the cosine of its image and caption embeddings (a normalized model's scores before its
    learned scale)."""

    reads: Reads = "embedding"

    def __init__(self, saved: SavedRetriever, device: torch.device, batch_size: int = 256):
        self.model, self.vocab = saved.model.to(device), saved.vocab
        self.device, self.batch_size = device, batch_size

    @torch.inference_mode()
    def score(self, images: np.ndarray, captions: Sequence[str]) -> np.ndarray:
        images = np.asarray(images, np.float32)
        if images.shape != (len(captions), self.model.config.image_dim):
            raise ValueError(
                f"{images.shape} image vectors for {len(captions)} captions; this scorer "
                f"reads ({len(captions)}, {self.model.config.image_dim})"
            )
        scores = np.empty(len(captions), np.float32)
        for start in range(0, len(captions), self.batch_size):
            end = start + self.batch_size
            tokens = self.vocab.encode_array(captions[start:end], self.model.config.max_tokens)
            image = self.model.embed_images(torch.as_tensor(images[start:end], device=self.device))
            text = self.model.embed_queries(torch.as_tensor(tokens, device=self.device))
            cosines = (F.normalize(image, dim=-1) * F.normalize(text, dim=-1)).sum(dim=-1)
            scores[start:end] = cosines.float().cpu().numpy()
        return scores


class OpenClipScorer:
    """An open_clip model: its own image preprocessing over the decoded image, its own
    tokenizer over the caption."""

    reads: Reads = "image"

    def __init__(self, model, preprocess, tokenizer, device: torch.device, batch_size: int = 64):
        self.model, self.preprocess, self.tokenizer = model.to(device).eval(), preprocess, tokenizer
        self.device, self.batch_size = device, batch_size

    @torch.inference_mode()
    def score(self, images: Sequence[Image.Image], captions: Sequence[str]) -> np.ndarray:
        if len(images) != len(captions):
            raise ValueError(f"{len(images)} images for {len(captions)} captions")
        scores = np.empty(len(captions), np.float32)
        for start in range(0, len(captions), self.batch_size):
            end = start + self.batch_size
            pixels = torch.stack([self.preprocess(image) for image in images[start:end]])
            image = self.model.encode_image(pixels.to(self.device))
            text = self.model.encode_text(self.tokenizer(list(captions[start:end])).to(self.device))
            cosines = (F.normalize(image, dim=-1) * F.normalize(text, dim=-1)).sum(dim=-1)
            scores[start:end] = cosines.float().cpu().numpy()
        return scores


def load_scorer(uri: str, device: str = "auto", batch_size: int = 256) -> Scorer:
    """The scorer `uri` names, on `device` ("auto": CUDA when torch sees a GPU); ScorerError
    naming what to train or install when it cannot be loaded."""
    where = resolve_device(device)
    if uri.startswith(OPEN_CLIP):
        return open_clip_scorer(uri.removeprefix(OPEN_CLIP), where, batch_size)
    return RetrieverScorer(saved_retriever(uri), where, batch_size)


def check_scorer(config: AlignmentConfig) -> None:
    """The scorer loaded once as a run starts, so that a missing one stops it there, with
    what to train or install, rather than in every actor."""
    if config.scorer is not None:
        load_scorer(config.scorer, "cpu", config.batch_size)


def saved_retriever(uri: str) -> SavedRetriever:
    """The text dual encoder at `uri`, checked to read what the vision step computes."""
    try:
        directory = Path(uri) if Path(uri).is_dir() else models_uri(uri)
        saved = load(directory, kind=SavedRetriever)
    except (ValueError, OSError) as error:
        raise ScorerError(f"alignment.scorer={uri}: {error}. No scorer: {TRAIN_HINT}") from error
    config = saved.model.config
    problem = None
    if config.modality != "text":
        problem = "is a speech retriever; a scorer reads captions"
    elif config.photo_size is not None or config.image_dim != FEATURE_CHANNELS:
        problem = "does not read the pooled CNN vectors the vision step computes"
    elif saved.features not in (None, VISION_FEATURES):
        problem = (
            f"was trained on features of {saved.features.model} at {saved.features.image_size}"
            f" px; the vision step computes {VISION_FEATURES.model} at "
            f"{VISION_FEATURES.image_size} px"
        )
    if problem:
        raise ScorerError(f"alignment.scorer={uri} ({Path(directory)}) {problem}: {TRAIN_HINT}")
    return saved


def models_uri(uri: str) -> Path:
    """The local folder of a models:/ or runs:/ URI (imported here: MLflow is slow to
    import, and a scorer in a folder needs none of it)."""
    if ":" not in uri:
        raise ValueError(f"no folder {uri}")
    from conceptual.registry import resolve

    return resolve(uri)


def parse_open_clip(spec: str) -> tuple[str, str | None]:
    """`ARCH@PATH_OR_TAG` -> (architecture, pretrained); no `@`: random weights, which only
    a test wants, so it is refused."""
    arch, at, pretrained = spec.partition("@")
    if not arch or not at or not pretrained:
        raise ScorerError(
            f"alignment.scorer=open_clip:{spec}: name it open_clip:ARCH@PATH_OR_TAG, e.g. "
            "open_clip:ViT-B-32@/models/vit-b-32.pt or open_clip:ViT-B-32@laion2b_s34b_b79k"
        )
    return arch, pretrained


def open_clip_scorer(spec: str, device: torch.device, batch_size: int) -> OpenClipScorer:
    arch, pretrained = parse_open_clip(spec)
    try:
        import open_clip
    except ImportError as error:  # open_clip, or the torchvision it imports, is missing
        raise ScorerError(
            f"alignment.scorer={OPEN_CLIP}{spec}: {error}; {OPEN_CLIP_HINT}"
        ) from error
    try:
        model, _, preprocess = open_clip.create_model_and_transforms(arch, pretrained=pretrained)
    except (RuntimeError, ValueError, OSError) as error:
        raise ScorerError(
            f"alignment.scorer={OPEN_CLIP}{spec}: cannot load {arch} from {pretrained}: {error}"
        ) from error
    return OpenClipScorer(model, preprocess, open_clip.get_tokenizer(arch), device, batch_size)
