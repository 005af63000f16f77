"""Every family's loss (conceptual.models.losses) against a hand computation, their named
terms, and the gather of in-batch negatives across two gloo workers (no Ray)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from test_retriever_model import TINY  # the same tiny towers (pytest puts this folder on the path)

from conceptual.models.captioner import Captioner, CaptionerConfig
from conceptual.models.losses import (
    TOTAL,
    CaptionLoss,
    RetrievalLoss,
    caption_loss,
    distillation_loss,
    gathered,
    info_nce_loss,
    margin_at,
    match_mask,
    mms_loss,
    sample_weights,
)
from conceptual.models.retriever import DualEncoder, RetrieverConfig
from conceptual.models.vocab import BOS, EOS

WORLD = 2


def test_info_nce_is_clips_symmetric_cross_entropy_written_out():
    images = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    texts = torch.tensor([[1.0, 0.0], [0.6, 0.8]])
    s = 1 / 0.07  # exp(logit_scale) as it starts

    def ce(positive, other):
        return -math.log(math.exp(positive) / (math.exp(positive) + math.exp(other)))

    rows = (ce(s * 1.0, s * 0.6) + ce(s * 0.8, s * 0.0)) / 2  # each image among the texts
    columns = (ce(s * 1.0, s * 0.0) + ce(s * 0.8, s * 0.6)) / 2  # each text among the images
    loss = info_nce_loss(s * images @ texts.T)
    assert loss.item() == pytest.approx((rows + columns) / 2, rel=1e-5)


def test_info_nce_is_low_for_aligned_pairs_and_high_for_shuffled_ones():
    embeddings = F.normalize(
        torch.randn(16, 32, generator=torch.Generator().manual_seed(0)), dim=-1
    )
    aligned = info_nce_loss(embeddings @ embeddings.T / 0.07).item()
    shuffled = info_nce_loss(embeddings @ embeddings.roll(1, dims=0).T / 0.07).item()
    assert aligned < 0.05 < math.log(16) < shuffled


def test_the_contrastive_loss_learns_the_dual_encoders_temperature():
    """loss=infonce (the contrastive family's) over the model's scores: the scale it learns
    is the model's own, so checkpoints save it and the service scores with it."""
    model, batch = retriever(), text_batch(8)
    terms = RetrievalLoss(model, margins=margin_at, gather=False, kind="infonce")(**batch)
    assert set(terms) == {TOTAL}
    terms[TOTAL].backward()
    assert model.log_scale.grad is not None and model.log_scale.grad.item() != 0


def test_info_nce_leaves_out_the_matches_a_mask_marks():
    logits = torch.tensor([[2.0, 5.0, 0.0], [5.0, 2.0, 0.0], [0.0, 0.0, 2.0]])
    mask = match_mask(torch.tensor([0, 0, 1]))  # rows 0 and 1 are the same image
    assert info_nce_loss(logits, mask) < info_nce_loss(logits)
    kept = torch.tensor([[2.0, -math.inf, 0.0], [-math.inf, 2.0, 0.0], [0.0, 0.0, 2.0]])
    torch.testing.assert_close(info_nce_loss(logits, mask), info_nce_loss(kept))


def retriever(modality: str = "text") -> DualEncoder:
    torch.manual_seed(0)
    return DualEncoder(RetrieverConfig(modality=modality, **TINY))


def text_batch(size: int = 6, seed: int = 0) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return {
        "image": torch.randn(size, TINY["image_dim"], generator=generator),
        "image_group": torch.arange(size) // 2,  # two captions per image
        "caption_group": torch.arange(size),
        "tokens": torch.randint(4, TINY["vocab_size"], (size, 6), generator=generator),
    }


def test_the_retrieval_loss_is_the_masked_margin_softmax_of_the_models_scores():
    model, batch = retriever(), text_batch()
    loss = RetrievalLoss(model, margins=lambda step: 0.01 * step)
    loss.at_step(20)
    terms = loss(**batch)
    scores = model(batch["image"], batch["tokens"])
    mask = match_mask(batch["image_group"], batch["caption_group"])
    assert set(terms) == {TOTAL}
    torch.testing.assert_close(terms[TOTAL], mms_loss(scores, mask, 0.2))
    infonce = RetrievalLoss(model, margins=margin_at, kind="infonce")(**batch)
    torch.testing.assert_close(infonce[TOTAL], info_nce_loss(scores, mask))


def test_a_teachers_distillation_is_a_term_of_its_own_beside_the_alignment():
    model, batch = retriever(), text_batch()
    batch["target"] = F.normalize(torch.randn(6, TINY["embed_dim"]), dim=-1)
    batch["has_image"] = torch.tensor([1, 1, 1, 1, 0, 0])
    loss = RetrievalLoss(model, margins=margin_at, distill="cosine", distill_weight=0.5)
    loss.at_step(0)
    terms = loss(**batch)
    assert set(terms) == {TOTAL, "alignment_loss", "distill_loss"}
    queries = model.embed_queries(batch["tokens"])
    distill = distillation_loss(queries, batch["target"], batch["caption_group"], "cosine", None)
    scores = model(batch["image"][:4], batch["tokens"][:4])
    aligned = mms_loss(scores, match_mask(batch["image_group"][:4], torch.arange(4)), 0.001)
    torch.testing.assert_close(terms["distill_loss"], distill)
    torch.testing.assert_close(terms["alignment_loss"], aligned)
    torch.testing.assert_close(terms[TOTAL], aligned + 0.5 * distill)


def test_the_caption_loss_weighs_captions_by_their_fluency_strategy():
    torch.manual_seed(0)
    settings = dict(architecture="rnn", feature_map="1x1", d_model=16, dropout=0.0)
    captioner = Captioner(CaptionerConfig(**settings, vocab_size=12, feature_dim=8))
    features = torch.randn(3, 1, 8)
    tokens = torch.tensor([[BOS, 5, 6, EOS], [BOS, 7, EOS, 0], [BOS, 8, 9, EOS]])
    fluency = torch.tensor([0.9, 0.2, 0.0])
    terms = CaptionLoss(captioner, 0.1, "weighted")(features, tokens, fluency)
    weights = sample_weights(fluency, "weighted")
    assert set(terms) == {TOTAL}
    torch.testing.assert_close(
        terms[TOTAL], caption_loss(captioner, features, tokens, 0.1, weights)
    )
    plain = CaptionLoss(captioner)(features, tokens)[TOTAL]
    torch.testing.assert_close(plain, caption_loss(captioner, features, tokens))


# ---------------------------------------------------------------- two workers


def _two_workers(rank: int, store: str) -> None:
    """Each worker holds half of one global batch; the gathered loss is the global batch's,
    and with DDP's averaging the gradients are the global batch's gradients."""
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=WORLD)
    try:
        ids = gathered(torch.tensor([rank, rank]))[0]
        assert ids.tolist() == [0, 0, 1, 1]

        for kind in ("mms", "infonce"):
            model, batch = retriever(), text_batch(8)
            whole = RetrievalLoss(model, margins=margin_at, gather=False, kind=kind)
            expected_loss = whole(**batch)[TOTAL]
            expected_loss.backward()
            expected = [p.grad.clone() for p in model.parameters()]
            model.zero_grad()
            half = {k: v[rank * 4 : rank * 4 + 4] for k, v in batch.items()}
            loss = RetrievalLoss(model, margins=margin_at, kind=kind)(**half)[TOTAL]
            loss.backward()
            torch.testing.assert_close(loss, expected_loss)
            # each worker's rows get every worker's gradient for them: DDP's mean is the whole's
            for parameter, want in zip(model.parameters(), expected):
                dist.all_reduce(parameter.grad)  # DDP's average
                torch.testing.assert_close(parameter.grad / WORLD, want, rtol=1e-4, atol=1e-6)
    finally:
        dist.destroy_process_group()


def test_the_gathered_loss_of_two_workers_is_the_global_batchs(tmp_path):
    mp.spawn(_two_workers, args=(str(tmp_path / "store"),), nprocs=WORLD)
