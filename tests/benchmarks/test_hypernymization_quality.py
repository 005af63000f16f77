"""Hypernymization quality on real before/after pairs of the Conceptual Captions transform.

    make bench   # or: .venv/bin/pytest -m benchmark tests/benchmarks/test_hypernymization_quality.py -s

`cc_val_slug_pairs_dev.tsv` pairs an original stock-photo description (recovered from the
image URL, lowercased) with what Google's pipeline made of the full alt-text. We transform
the description (transformation only, no filters: the slugs are lowercase and would fail
the capitalization rule) and score against Google's caption with token F1, BLEU-4 and
CIDEr-D, beside the identity baseline (the description unchanged). A description the
transform rejects scores as an empty caption; the kept-only figures are reported too.
"""

from __future__ import annotations

import csv
import time

from conceptual.metrics import caption_scores, token_f1
from conceptual.text.curate import TextCurator


def score(hypotheses: list[str], references: list[str]) -> dict[str, float]:
    refs = {i: [r] for i, r in enumerate(references)}
    hyps = {i: h for i, h in enumerate(hypotheses)}
    scores = caption_scores(hyps, refs, metrics=("BLEU-4", "CIDEr"))
    f1 = sum(token_f1(h, r) for h, r in zip(hypotheses, references)) / len(references)
    return {"token_f1": round(f1, 4), **{k: round(scores[k], 4) for k in ("BLEU-4", "CIDEr")}}


def test_hypernymization_quality(real_data, record):
    with open(real_data / "cc_val_slug_pairs_dev.tsv", newline="") as f:
        pairs = list(csv.DictReader(f, delimiter="\t"))
    slugs = [p["description_slug"] for p in pairs]
    references = [p["conceptual_caption"] for p in pairs]

    curator = TextCurator()
    started = time.perf_counter()
    outcomes = curator.process(slugs, apply_filters=False)
    seconds = time.perf_counter() - started
    transformed = [o.caption or "" for o in outcomes]
    kept = [i for i, o in enumerate(outcomes) if o.kept]

    identity = [" ".join(s.split()) for s in slugs]
    record(
        "hypernymization_quality",
        {
            "pairs": len(pairs),
            "seconds": round(seconds, 2),
            "kept": len(kept),
            "identity_baseline": score(identity, references),
            "hypernymizer": score(transformed, references),
            "kept_only": {
                "identity_baseline": score(
                    [identity[i] for i in kept], [references[i] for i in kept]
                ),
                "hypernymizer": score(
                    [transformed[i] for i in kept], [references[i] for i in kept]
                ),
            },
        },
    )
