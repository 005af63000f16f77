"""Every family's loss (conceptual.models.losses) against a hand computation, their named
terms, and the gather of in-batch negatives across two gloo workers (no Ray)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from test_retriever_model import TINY  # the same tiny towers (pytest puts tests/unit on the path)

from conceptual.models.captioner import Captioner, CaptionerConfig
from conceptual.models.losses import (
    TOTAL,
    CaptionLoss,
    InfoNCELoss,
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
    loss = InfoNCELoss()(images, texts)
    assert set(loss) == {TOTAL}
    assert loss[TOTAL].item() == pytest.approx((rows + columns) / 2, rel=1e-5)


def test_info_nce_is_low_for_aligned_pairs_and_high_for_shuffled_ones():
    embeddings = F.normalize(
        torch.randn(16, 32, generator=torch.Generator().manual_seed(0)), dim=-1
    )
    loss = InfoNCELoss()
    aligned = loss(embeddings, embeddings)[TOTAL].item()
    shuffled = loss(embeddings, embeddings.roll(1, dims=0))[TOTAL].item()
    assert aligned < 0.05 < math.log(16) < shuffled


def test_the_temperature_is_learned_from_log_1_over_0_07_and_capped_at_100():
    loss = InfoNCELoss()
    assert loss.logit_scale.item() == pytest.approx(math.log(1 / 0.07))
    assert [name for name, _ in loss.named_parameters()] == ["logit_scale"]
    images, texts = (F.normalize(torch.randn(4, 8), dim=-1) for _ in range(2))
    loss(images, texts)[TOTAL].backward()
    assert loss.logit_scale.grad is not None and loss.logit_scale.grad.item() != 0
    with torch.no_grad():
        loss.logit_scale.fill_(math.log(1000))
    loss.logit_scale.grad = None
    capped = loss(images, texts)[TOTAL]
    capped.backward()
    assert loss.logit_scale.grad.item() == 0  # past the cap: no gradient, it stays
    at_cap = info_nce_loss(100 * images @ texts.T)
    torch.testing.assert_close(capped, at_cap)


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

        generator = torch.Generator().manual_seed(1)
        every = [F.normalize(torch.randn(8, 16, generator=generator), dim=-1) for _ in range(2)]
        for t in every:
            t.requires_grad_()
        whole = InfoNCELoss(gather=False)
        expected = whole(*every)[TOTAL]
        expected.backward()
        mine = [t.detach()[rank * 4 : rank * 4 + 4].clone().requires_grad_() for t in every]
        shared = InfoNCELoss()
        loss = shared(*mine)[TOTAL]
        loss.backward()
        torch.testing.assert_close(loss, expected)
        torch.testing.assert_close(shared.logit_scale.grad, whole.logit_scale.grad)
        # each worker's rows get every worker's gradient for them: DDP's mean is the whole's
        for part, t in zip(mine, every):
            torch.testing.assert_close(part.grad / WORLD, t.grad[rank * 4 : rank * 4 + 4])

        model, batch = retriever(), text_batch(8)
        RetrievalLoss(model, margins=margin_at, gather=False)(**batch)[TOTAL].backward()
        expected = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        half = {k: v[rank * 4 : rank * 4 + 4] for k, v in batch.items()}
        RetrievalLoss(model, margins=margin_at)(**half)[TOTAL].backward()
        for parameter, want in zip(model.parameters(), expected):
            dist.all_reduce(parameter.grad)  # DDP's average
            torch.testing.assert_close(parameter.grad / WORLD, want, rtol=1e-4, atol=1e-6)
    finally:
        dist.destroy_process_group()


def test_the_gathered_loss_of_two_workers_is_the_global_batchs(tmp_path):
    mp.spawn(_two_workers, args=(str(tmp_path / "store"),), nprocs=WORLD)
