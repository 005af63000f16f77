"""Hypernymization quality on real before/after pairs of the Conceptual Captions transform.

    make bench   # or: .venv/bin/pytest -m benchmark tests/benchmarks/test_hypernymization_quality.py -s

`cc_val_slug_pairs_dev.tsv` pairs an original stock-photo description (recovered from the
image URL, lowercased, punctuation lost, sometimes cut short) with what Google's pipeline
made of the full alt-text. We transform the description (transformation only, no filters:
the slugs are lowercase and would fail the capitalization rule) and score against Google's
caption with token F1, BLEU-4 and CIDEr-D, beside the identity baseline (the description
unchanged). A description the transform rejects scores as an empty caption; the kept-only
figures are reported too. The pairs are split in two halves by a hash of the description:
rules were tuned looking at the first ("tuning") only, so the second ("check") shows any
over-fitting.

- `test_hypernymization_quality`: the scores, by half, and the artifacts left (none wanted);
- `test_rule_ablation`: token F1 with each registered rule (`hypernymize.RULES`, in the
  order they run) switched off by `HypernymConfig.disabled_rules` (and `restore_case`),
  as a table for BENCHMARKS.md;
- `test_hypernymization_throughput`: captions per second on the dev slugs and on the demo
  corpus's text survivors; with HYPERNYM_BASELINE=path/to/an/older/hypernymize.py the
  older module is timed in the same run, alternating, for a ratio on a shared machine.
"""

from __future__ import annotations

import csv
import hashlib
import importlib.util
import os
import statistics
import sys
import time

from conceptual.metrics import caption_scores, token_f1
from conceptual.text.curate import TextCurator
from conceptual.text.filters import TextFilters
from conceptual.text.hypernymize import RULES, HypernymConfig, Hypernymizer
from conceptual_demo.corpus import generate_candidates

HALVES = ("tuning", "check")
DEMO_CANDIDATES = 5000  # demo corpus rows; about 1,000 survive the cheap filters
ROUNDS = 3  # timing rounds per module, alternating old and new


def read_pairs(real_data) -> list[dict]:
    with open(real_data / "cc_val_slug_pairs_dev.tsv", newline="") as f:
        pairs = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    for pair in pairs:
        digest = hashlib.sha1(pair["description_slug"].encode()).hexdigest()
        pair["half"] = HALVES[int(digest, 16) % 2]
    return pairs


def words(text: str) -> str:
    """The text's tokens that hold a letter or digit: what a slug, which lost its
    punctuation, can give."""
    return " ".join(w for w in text.split() if any(c.isalnum() for c in w))


def covered(slug: str, reference: str) -> str:
    """The reference's words up to the last one the slug also has: the part of the
    alt-text a slug cut short still covers (all of it when they share no word)."""
    ref, slug_words = words(reference).split(), set(slug.split())
    last = max((i for i, w in enumerate(ref) if w in slug_words), default=len(ref) - 1)
    return " ".join(ref[: last + 1])


def score(hypotheses: list[str], references: list[str], slugs: list[str]) -> dict[str, float]:
    """Token F1 as the README defines it (every token), then on words only and on words
    against the covered part of the reference (secondary views of what a slug can give),
    BLEU-4 and CIDEr-D."""
    refs = {i: [r] for i, r in enumerate(references)}
    hyps = {i: h for i, h in enumerate(hypotheses)}
    scores = caption_scores(hyps, refs, metrics=("BLEU-4", "CIDEr"))
    triples = list(zip(hypotheses, references, slugs, strict=True))
    return {
        "token_f1": round(statistics.mean(token_f1(h, r) for h, r, _ in triples), 4),
        "token_f1_words": round(
            statistics.mean(token_f1(words(h), words(r)) for h, r, _ in triples), 4
        ),
        "token_f1_words_covered": round(
            statistics.mean(token_f1(words(h), covered(s, r)) for h, r, s in triples), 4
        ),
        **{k: round(scores[k], 4) for k in ("BLEU-4", "CIDEr")},
    }


def mean_f1(hypotheses: list[str], pairs: list[dict]) -> float:
    return statistics.mean(
        token_f1(h, p["conceptual_caption"]) for h, p in zip(hypotheses, pairs, strict=True)
    )


def test_hypernymization_quality(real_data, record):
    pairs = read_pairs(real_data)
    slugs = [p["description_slug"] for p in pairs]
    references = [p["conceptual_caption"] for p in pairs]

    curator = TextCurator()
    started = time.perf_counter()
    outcomes = curator.process(slugs, apply_filters=False)
    seconds = time.perf_counter() - started
    transformed = [o.caption or "" for o in outcomes]
    kept = [i for i, o in enumerate(outcomes) if o.kept]
    artifacts = {
        caption: found
        for caption in transformed
        if (found := curator.hypernymizer.artifacts(caption))
    }

    identity = [" ".join(s.split()) for s in slugs]
    halves = {
        half: {
            "pairs": len(members := [i for i, p in enumerate(pairs) if p["half"] == half]),
            "identity_token_f1": round(
                mean_f1([identity[i] for i in members], [pairs[i] for i in members]), 4
            ),
            "hypernymizer_token_f1": round(
                mean_f1([transformed[i] for i in members], [pairs[i] for i in members]), 4
            ),
        }
        for half in HALVES
    }
    record(
        "hypernymization_quality",
        {
            "pairs": len(pairs),
            "seconds": round(seconds, 2),
            "kept": len(kept),
            "identity_baseline": score(identity, references, slugs),
            "hypernymizer": score(transformed, references, slugs),
            "halves": halves,
            "artifacts": artifacts,
            "kept_only": {
                name: score(
                    [captions[i] for i in kept],
                    [references[i] for i in kept],
                    [slugs[i] for i in kept],
                )
                for name, captions in (
                    ("identity_baseline", identity),
                    ("hypernymizer", transformed),
                )
            },
        },
    )


def ablation_variants() -> dict[str, HypernymConfig]:
    """Everything on, then each registered rule off in the order the rules run (and
    `restore_case` off): the rows of BENCHMARKS.md's ablation table."""
    return {
        "all rules": HypernymConfig(),
        **{f"without {rule.name}": HypernymConfig(disabled_rules=[rule.name]) for rule in RULES},
        "without restore_case": HypernymConfig(restore_case=False),
    }


def ablation_row(captions: list[str], pairs: list[dict]) -> dict[str, float]:
    """Token F1 of one variant's captions, on all pairs and by half."""
    return {
        "all": round(mean_f1(captions, pairs), 4),
        **{
            half: round(
                mean_f1(
                    [c for c, p in zip(captions, pairs) if p["half"] == half],
                    [p for p in pairs if p["half"] == half],
                ),
                4,
            )
            for half in HALVES
        },
    }


def ablation_table(rows: dict[str, dict[str, float]]) -> list[str]:
    """The markdown table: each variant's F1, what the rule buys (the F1 lost without it)
    and what it does (its registered description)."""
    does = {f"without {rule.name}": rule.does for rule in RULES}
    does["without restore_case"] = "capitalizes likely names in caseless text before parsing"
    full = rows["all rules"]["all"]
    table = [
        "| rules | token F1 | tuning half | check half | what the rule buys | what it does |",
        "|---|---|---|---|---|---|",
    ]
    for name, row in rows.items():
        gain = "" if name == "all rules" else f"{full - row['all']:+.4f}"
        table.append(
            f"| {name} | {row['all']:.4f} | {row['tuning']:.4f} | {row['check']:.4f} | {gain} "
            f"| {does.get(name, '')} |"
        )
    return table


def test_rule_ablation(real_data, record, nlp):
    """Token F1 (rejections as empty) with everything on, then with each rule off."""
    pairs = read_pairs(real_data)
    slugs = [p["description_slug"] for p in pairs]
    rows = {}
    for name, config in ablation_variants().items():
        captions = [r.caption or "" for r in Hypernymizer(config, nlp=nlp).transform(slugs)]
        rows[name] = ablation_row(captions, pairs)
    table = ablation_table(rows)
    print("\n" + "\n".join(table))
    record("hypernymization_ablation", {"pairs": len(pairs), "rows": rows, "table": table})


def demo_texts(n: int) -> list[str]:
    """The demo corpus's alt-texts that survive the cheap filters, cleaned: what the
    pipeline parses and transforms."""
    filters = TextFilters()
    checked = (filters.check(row["alt_text"]) for row in generate_candidates(n))
    return [cleaned for cleaned, rejection in checked if rejection is None]


def load_module(path: str):
    spec = importlib.util.spec_from_file_location("hypernymize_baseline", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_hypernymization_throughput(real_data, record, nlp):
    """Captions per second of Hypernymizer.transform (parse and rules) and of the rules
    alone (transform_doc on parsed docs), best of ROUNDS, alternating modules."""
    corpora = {
        "dev slugs": [p["description_slug"] for p in read_pairs(real_data)],
        "demo corpus": demo_texts(DEMO_CANDIDATES),
    }
    modules = {"current": Hypernymizer(nlp=nlp)}
    if baseline := os.environ.get("HYPERNYM_BASELINE"):
        modules["baseline"] = load_module(baseline).Hypernymizer(nlp=nlp)
    results = {}
    for corpus, texts in corpora.items():
        docs = list(modules["current"].parse(texts))
        best = {name: {"transform": float("inf"), "rules": float("inf")} for name in modules}
        for _ in range(ROUNDS):
            for name, hypernymizer in modules.items():
                started = time.perf_counter()
                hypernymizer.transform(texts)
                middle = time.perf_counter()
                for doc in docs:
                    hypernymizer.transform_doc(doc)
                ended = time.perf_counter()
                best[name]["transform"] = min(best[name]["transform"], middle - started)
                best[name]["rules"] = min(best[name]["rules"], ended - middle)
        results[corpus] = {
            "texts": len(texts),
            **{
                name: {part: round(len(texts) / seconds, 1) for part, seconds in parts.items()}
                for name, parts in best.items()
            },
        }
        if "baseline" in best:
            results[corpus]["ratio_transform"] = round(
                best["baseline"]["transform"] / best["current"]["transform"], 3
            )
    record(
        "hypernymization_throughput",
        {"captions_per_second": results, "load_average": os.getloadavg()},
    )
