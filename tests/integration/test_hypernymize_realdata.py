"""Hypernymization quality on real before/after pairs of Google's pipeline (the dev set), a
regression test, not a timing: mean token F1 of transform(slug) against the released
caption, beside the identity baseline (the slug unchanged, tokenized the same way), and no
caption with an artifact of a removal (Hypernymizer.artifacts)."""

from __future__ import annotations

import csv
import statistics

import pytest

from conceptual.metrics import token_f1
from conceptual.text.hypernymize import Hypernymizer

pytestmark = [pytest.mark.integration, pytest.mark.realdata]

# Measured (BENCHMARKS.md, "Hypernymization quality"): hypernymized 0.8085, identity 0.7439
# (rejections count as 0). Issue 20's target of 0.85 is not reached; this floor keeps what
# was reached from sliding back.
MIN_F1 = 0.807
MIN_GAIN = 0.04


def test_hypernymization_on_dev_pairs(real_data, nlp):
    with open(real_data / "cc_val_slug_pairs_dev.tsv", newline="") as f:
        pairs = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    assert len(pairs) == 1085
    slugs = [p["description_slug"] for p in pairs]
    references = [p["conceptual_caption"] for p in pairs]
    hypernymizer = Hypernymizer(nlp=nlp)

    captions = [r.caption or "" for r in hypernymizer.transform(slugs)]
    identity = statistics.mean(
        token_f1(" ".join(t.lower_ for t in nlp.tokenizer(slug)), ref)
        for slug, ref in zip(slugs, references)
    )
    ours = statistics.mean(token_f1(c, ref) for c, ref in zip(captions, references))
    artifacts = {c: found for c in captions if (found := hypernymizer.artifacts(c))}
    print(f"\ndev token F1: hypernymized {ours:.4f}, identity {identity:.4f}")
    assert artifacts == {}
    assert ours >= MIN_F1
    assert ours > identity + MIN_GAIN
