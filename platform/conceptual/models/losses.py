"""Every model family's training loss, in one module (as open_clip's loss.py).

A family's loss is a module whose forward reads a batch's columns (each named as its
argument), runs the model and returns the batch's named terms (`Terms`): under "loss" the
total that the step backpropagates, and beside it each part of the total worth watching, by
the name the training core logs its epoch mean under (`distill_loss`). The model runs inside
the loss's forward so that a DistributedDataParallel wrapper around the loss sees the step.

- CaptionLoss: the captioner's token cross-entropy (caption_loss), with label smoothing and
  each caption weighted by the fluency strategy (sample_weights).
- RetrievalLoss: the dual encoder's masked margin softmax (mms_loss), triplet loss
  (triplet_loss) or InfoNCE (info_nce_loss: CLIP's symmetric cross-entropy over the
  model's cosine scores times its learned temperature, the contrastive family's) over
  in-batch negatives (match_mask), the first two with the growing margin (margin_at); with
  a teacher, the distillation term beside it (distillation_loss).
- FluencyLoss: the four view classifiers' cross-entropy (fluency_loss).

In-batch negatives from every worker come through `gathered`, written once here.

    loss = RetrievalLoss(model, margins=margin_at, kind="mms")
    terms = loss(**batch)          # {"loss": ..., "alignment_loss": ..., "distill_loss": ...}
    terms["loss"].backward()
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dist_nn
import torch.nn.functional as F
from torch import Tensor, nn

from conceptual.fluency.model import FLUENT_ABOVE, FluencyModel
from conceptual.models.captioner import Captioner
from conceptual.models.retriever import DualEncoder
from conceptual.models.vocab import PAD

TOTAL = "loss"  # the term the step backpropagates
Terms = dict[str, Tensor]
FluencyStrategy = Literal["none", "only", "rejection", "weighted"]

# ---------------------------------------------------------------- every worker's batch


def all_workers() -> bool:
    """Whether this process is one of several data-parallel workers."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def gathered(*tensors: Tensor | None) -> tuple[Tensor | None, ...]:
    """Each tensor's rows from every worker, in rank order (Ray Train splits the rows
    equally, so every worker's batch has one size); None stays None. A tensor that needs a
    gradient keeps it (torch.distributed.nn's all_gather): each worker computes the loss
    of the whole global batch, its own rows get the sum of every worker's gradient for
    them, and DDP's averaging then gives exactly the global batch's gradient. Ids and
    targets are gathered plainly."""
    return tuple(None if t is None else _gathered(t) for t in tensors)


def _gathered(t: Tensor) -> Tensor:
    if t.requires_grad:
        return torch.cat(dist_nn.all_gather(t))
    parts = [torch.empty_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, t)
    return torch.cat(parts)


# ---------------------------------------------------------------- the captioner


class CaptionLoss(nn.Module):
    """The captioner's loss over a batch's `features`, `tokens` and, for the fluency
    strategies that weigh in the loss, each caption's `fluency` score."""

    def __init__(
        self,
        captioner: Captioner,
        label_smoothing: float = 0.0,
        fluency: FluencyStrategy = "none",
    ):
        super().__init__()
        self.captioner = captioner
        self.label_smoothing = label_smoothing
        self.fluency = fluency

    def forward(self, features: Tensor, tokens: Tensor, fluency: Tensor | None = None) -> Terms:
        weights = None if fluency is None else sample_weights(fluency, self.fluency)
        loss = caption_loss(self.captioner, features, tokens, self.label_smoothing, weights)
        return {TOTAL: loss}


def caption_loss(
    captioner: Captioner,
    features: Tensor,
    tokens: Tensor,
    label_smoothing: float = 0.0,
    weights: Tensor | None = None,
) -> Tensor:
    """Mean cross-entropy of predicting `tokens[:, 1:]` from `tokens[:, :-1]` (teacher
    forcing), where `tokens` are encoded captions (<bos> ... <eos>, padded); padding does
    not count. `label_smoothing` spreads that share of each target's probability over the
    vocabulary. `weights` (B,) multiply each caption's loss; the mean is over the tokens of
    the captions weighted above zero, so all ones give the plain mean and a zero leaves the
    caption out of the batch (fluency-guided training: sample_weights)."""
    logits = captioner(features, tokens[:, :-1]).transpose(1, 2)
    targets = tokens[:, 1:]
    if weights is None:
        return F.cross_entropy(logits, targets, ignore_index=PAD, label_smoothing=label_smoothing)
    per_token = F.cross_entropy(  # 0 at padding
        logits, targets, ignore_index=PAD, label_smoothing=label_smoothing, reduction="none"
    )
    counted = (targets != PAD).sum(1) * (weights > 0)
    return (weights * per_token.sum(1)).sum() / counted.sum().clamp(min=1)


def sample_weights(
    fluency: Tensor, strategy: FluencyStrategy, generator: torch.Generator | None = None
) -> Tensor:
    """Each caption's weight in the loss under a fluency strategy (pipelines/
    train_captioner.py), from its fluency score: 1 or 0 for rejection sampling (u ~ U(0, 0.5)
    drawn per caption per call), 1 or the score for the weighted loss, 1 or 0 for fluency
    only, all 1 for none."""
    fluent = fluency > FLUENT_ABOVE
    if strategy == "weighted":
        return torch.where(fluent, torch.ones_like(fluency), fluency)
    if strategy == "rejection":
        u = torch.rand(fluency.shape, generator=generator, device=fluency.device) * FLUENT_ABOVE
        return (fluent | (fluency > u)).to(fluency.dtype)
    if strategy == "only":
        return fluent.to(fluency.dtype)
    return torch.ones_like(fluency)


# ---------------------------------------------------------------- the retrievers


class RetrievalLoss(nn.Module):
    """The dual encoder's loss over a batch's columns (docs/spec/retrieval.md): both towers,
    the match mask, `kind` ("mms", "triplet", or "infonce" over the model's scaled scores)
    over in-batch negatives, from every worker with `gather`.

    `at_step` sets the margin (`margins`: optimizer step -> margin) and the triplet's draw
    of negatives (the same on every worker: seeded by `seed` and the step) before each
    optimizer step. With a teacher the batch also holds each caption's `target` embedding
    and whether the row has a photo (`has_image`): the alignment term is over the rows with
    one, the distillation term (`distill`: "mms" or "cosine") over all, and the total adds
    `distill_weight` x the distillation term to the alignment."""

    def __init__(
        self,
        model: DualEncoder,
        margins: Callable[[int], float],
        kind: Literal["mms", "triplet", "infonce"] = "mms",
        seed: int = 0,
        gather: bool = True,
        distill: Literal["mms", "cosine"] = "mms",
        distill_weight: float = 1.0,
    ):
        super().__init__()
        self.model, self.kind, self.margins = model, kind, margins
        self.seed, self.gather = seed, gather
        self.distill, self.distill_weight = distill, distill_weight
        self.register_buffer("margin", torch.tensor(margins(0)), persistent=False)
        self.negatives = torch.Generator()

    def at_step(self, step: int) -> None:
        self.margin.fill_(self.margins(step))
        self.negatives.manual_seed(self.seed * 1_000_003 + step)

    def forward(
        self,
        image: Tensor,
        image_group: Tensor,
        caption_group: Tensor,
        mfcc: Tensor | None = None,
        tokens: Tensor | None = None,
        target: Tensor | None = None,
        has_image: Tensor | None = None,
    ) -> Terms:
        images = self.model.embed_images(image)
        queries = self.model.embed_queries(mfcc if mfcc is not None else tokens)
        if self.gather and all_workers():
            images, queries, image_group, caption_group, target, has_image = gathered(
                images, queries, image_group, caption_group, target, has_image
            )
        if target is None:
            return {TOTAL: self.aligned(images, queries, image_group, caption_group)}
        distill = distillation_loss(
            queries, target.float(), caption_group, self.distill, self.model.scores
        )
        rows = has_image.bool()
        aligned = self.aligned(images[rows], queries[rows], image_group[rows], caption_group[rows])
        return {
            TOTAL: aligned + self.distill_weight * distill,
            "alignment_loss": aligned,
            "distill_loss": distill,
        }

    def aligned(
        self, images: Tensor, queries: Tensor, image_group: Tensor, caption_group: Tensor
    ) -> Tensor:
        """The image-alignment loss; 0 for a batch of fewer than two photos' rows."""
        if len(images) < 2:
            return queries.sum() * 0.0  # no negatives to contrast with
        scores = self.model.scores(images, queries)
        mask = match_mask(image_group, caption_group)
        if self.kind == "triplet":
            return triplet_loss(scores, mask, self.margin, self.negatives)
        if self.kind == "infonce":
            return info_nce_loss(scores, mask)
        return mms_loss(scores, mask, self.margin)


def match_mask(image_groups: Tensor, caption_groups: Tensor | None = None) -> Tensor:
    """The spec's M as a bool (B, B): True (1) where image i and query j are a valid negative
    pair, False (0) where they share an image or, given caption groups, a caption (the same
    text twice in the batch). Symmetric, with a False diagonal."""
    same = image_groups[:, None] == image_groups[None, :]
    if caption_groups is not None:
        same |= caption_groups[:, None] == caption_groups[None, :]
    return ~same


def mms_loss(scores: Tensor, mask: Tensor, margin: float | Tensor) -> Tensor:
    """The spec's L_MMS = L_xy + L_yx: a softmax cross-entropy over each row (an image among
    the queries) and each column (a query among the images), the positive on the diagonal
    lowered by the margin, the entries that M marks as matches left out."""
    positive = torch.eye(len(scores), dtype=torch.bool, device=scores.device)
    logits = torch.where(positive, scores - margin, scores.masked_fill(~mask.bool(), float("-inf")))
    target = torch.arange(len(scores), device=scores.device)
    return F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target)


def triplet_loss(
    scores: Tensor,
    mask: Tensor,
    margin: float | Tensor,
    generator: torch.Generator | None = None,
) -> Tensor:
    """The spec's L_T, divided by B (the mean over the batch, so its scale does not depend on
    B): for each pair k, one negative query m drawn uniformly where M_km = 1 and one negative
    image n where M_nk = 1, each hinged against Z_kk. A row or column with no valid negative
    adds 0."""
    valid = mask.bool()
    positive = scores.diagonal()
    k = torch.arange(len(scores), device=scores.device)
    device = generator.device if generator is not None else scores.device

    def draw(dim: int) -> Tensor:
        # Uniform priorities, every invalid entry below every valid one: the argmax is a
        # uniformly drawn valid negative (or an invalid one, zeroed below, when none is).
        priorities = torch.rand(scores.shape, generator=generator, device=device)
        return priorities.to(scores.device).masked_fill(~valid, -1.0).argmax(dim=dim)

    rows = F.relu(scores[k, draw(1)] - positive + margin) * valid.any(dim=1)
    columns = F.relu(scores[draw(0), k] - positive + margin) * valid.any(dim=0)
    return (rows + columns).mean()


def margin_at(
    step: int,
    start: float = 0.001,
    growth: float = 1.002,
    every: float = 1000,
    most: float = math.inf,
) -> float:
    """The spec's growing margin: `start`, multiplied by `growth` every `every` steps (a
    fraction of a step grows it several times a step), never above `most`."""
    growths = math.floor(round(step / every, 9))  # 30 // 0.1 is 299.0 in floating point
    try:
        return min(start * growth**growths, most)
    except OverflowError:  # far past any cap
        return most


def distillation_loss(
    queries: Tensor,
    targets: Tensor,
    caption_groups: Tensor,
    kind: Literal["mms", "cosine"],
    scores: Callable[[Tensor, Tensor], Tensor],
) -> Tensor:
    """How far the query tower's embeddings (B, D) are from a frozen teacher's embeddings of
    the same captions (B, D). "cosine": the mean of 1 - cos, each clip pulled to its own
    caption alone; "mms": the masked margin softmax with the teacher's embeddings in the
    image tower's place (`scores(targets, queries)`, margin 0), so each clip must also be
    nearer its caption than the batch's other captions (copies of its caption are masked)."""
    if kind == "cosine":
        return (1 - F.cosine_similarity(queries, targets, dim=-1)).mean()
    return mms_loss(scores(targets, queries), match_mask(caption_groups), 0.0)


# ---------------------------------------------------------------- the fluency classifier


class FluencyLoss(nn.Module):
    """The four view classifiers' loss over a batch's columns: each view's ids, their
    `lengths` and the pair's `label`."""

    def __init__(self, model: FluencyModel):
        super().__init__()
        self.model = model

    def forward(
        self,
        zh_words: Tensor,
        zh_pos: Tensor,
        en_words: Tensor,
        en_pos: Tensor,
        lengths: Tensor,
        label: Tensor,
    ) -> Terms:
        logits = self.model(zh_words, zh_pos, en_words, en_pos, lengths)
        return {TOTAL: fluency_loss(logits, lengths, label)}


def fluency_loss(logits: Tensor, lengths: Tensor, label: Tensor) -> Tensor:
    """Cross-entropy of every present view against the pair's label (0 or 1), averaged over
    views and pairs. The views share no weights, so each classifier gets its own
    cross-entropy's gradient (times 1/4, which Adam's steps do not feel)."""
    present = lengths > 0
    targets = label[:, None].expand_as(present)
    return F.cross_entropy(logits[present], targets[present], reduction="none").mean()


# ---------------------------------------------------------------- contrastive (CLIP)


def info_nce_loss(logits: Tensor, mask: Tensor | None = None) -> Tensor:
    """CLIP's symmetric InfoNCE over (B, B) logits, pair i the positive of row i and column
    i: the mean of the cross-entropy of each row (an image among the texts) and of each
    column (a text among the images). With `mask` (match_mask), the entries it marks as
    matches (the same image or caption twice in the batch) are no negatives: left out."""
    if mask is not None:
        positive = torch.eye(len(logits), dtype=torch.bool, device=logits.device)
        logits = logits.masked_fill(~(mask.bool() | positive), float("-inf"))
    target = torch.arange(len(logits), device=logits.device)
    return (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target)) / 2
