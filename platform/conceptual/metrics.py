"""Small text metrics the platform shares (hypernymization quality, caption checks)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Mapping, Sequence


def token_f1(hypothesis: str, reference: str) -> float:
    """Bag-of-tokens F1 between two texts: lowercased, split on whitespace, each token
    counted as often as it occurs in both. 1.0 when both are empty, 0.0 when only one is."""
    hyp, ref = Counter(hypothesis.lower().split()), Counter(reference.lower().split())
    if not hyp or not ref:
        return float(not hyp and not ref)
    common = sum((hyp & ref).values())
    if common == 0:
        return 0.0
    precision, recall = common / sum(hyp.values()), common / sum(ref.values())
    return 2 * precision * recall / (precision + recall)


CAPTION_METRICS = ("BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4", "ROUGE-L", "CIDEr")


def caption_scores(
    hypotheses: Mapping[Hashable, str],
    references: Mapping[Hashable, Sequence[str]],
    metrics: Sequence[str] = CAPTION_METRICS,
) -> dict[str, float]:
    """Corpus scores from the COCO caption evaluation code (pycocoevalcap) for already
    tokenized, lowercased captions. CIDEr is CIDEr-D, with document frequencies from these
    references: scores depend on the set, so report it with them."""
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.rouge.rouge import Rouge

    unknown = set(metrics) - set(CAPTION_METRICS)
    if unknown:
        raise ValueError(f"unknown caption metrics {sorted(unknown)}; known: {CAPTION_METRICS}")
    if set(hypotheses) != set(references):
        raise ValueError("hypotheses and references must cover the same ids")
    res = {key: [text] for key, text in hypotheses.items()}
    gts = {key: list(refs) for key, refs in references.items()}
    scores: dict[str, float] = {}
    if any(m.startswith("BLEU") for m in metrics):
        bleu, _ = Bleu(4).compute_score(gts, res, verbose=0)
        scores.update({f"BLEU-{n}": float(bleu[n - 1]) for n in range(1, 5)})
    if "ROUGE-L" in metrics:
        scores["ROUGE-L"] = float(Rouge().compute_score(gts, res)[0])
    if "CIDEr" in metrics:
        scores["CIDEr"] = float(Cider().compute_score(gts, res)[0])
    return {m: scores[m] for m in metrics}
