"""Small text metrics the platform shares (hypernymization quality, caption checks)."""

from __future__ import annotations

from collections import Counter


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
