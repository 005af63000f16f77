"""A caption language model for the recognizer: a trigram model of a training split's
captions in the ARPA format PocketSphinx reads, in place of its general English model.

Smoothing is absolute discounting with back-off (Ney, Essen and Kneser 1994), each order's
discount from its counts of counts, D = n1 / (n1 + 2 n2); the mass it frees goes to the
next lower order through back-off weights, and the unigrams' to a uniform share for every
word and <unk>. Captions are a narrow language ("a dog runs through the grass"): on the
shared gTTS clips of 60 Flickr8k photos, a model of other photos' captions took
PocketSphinx's word error rate from 0.55 to 0.26 (BENCHMARKS.md).

    text = arpa([["a", "dog", "runs"], ...])     # the ARPA file's text
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence

BEGIN, END, UNKNOWN = "<s>", "</s>", "<unk>"
ORDER = 3


def arpa(sentences: Iterable[Sequence[str]], order: int = ORDER) -> str:
    """The ARPA text of an `order`-gram model of `sentences` (lists of lower-case words)."""
    counts = _counts(sentences, order)
    if not counts[0]:
        raise ValueError("a language model needs at least one word")
    probs = _probabilities(counts)
    backoffs = _backoffs(counts, probs)
    lines = ["\\data\\"] + [f"ngram {n + 1}={len(probs[n])}" for n in range(order)]
    for n in range(order):
        lines += ["", f"\\{n + 1}-grams:"]
        for gram, p in sorted(probs[n].items()):
            line = f"{-99.0 if p is None else math.log10(p):.6f}\t{' '.join(gram)}"
            if n < order - 1 and gram in backoffs[n]:
                line += f"\t{math.log10(backoffs[n][gram]):.6f}"
            lines.append(line)
    return "\n".join([*lines, "", "\\end\\", ""])


def _counts(sentences: Iterable[Sequence[str]], order: int) -> list[Counter]:
    counts: list[Counter] = [Counter() for _ in range(order)]
    for sentence in sentences:
        if not sentence:
            continue
        tokens = [BEGIN, *sentence, END]
        for n in range(1, order + 1):
            for i in range(len(tokens) - n + 1):
                counts[n - 1][tuple(tokens[i : i + n])] += 1
    del counts[0][(BEGIN,)]  # a sentence starts with it; it is never predicted
    return counts


def _discount(counts: Counter) -> float:
    of = Counter(counts.values())
    n1, n2 = of[1], of[2]
    return n1 / (n1 + 2 * n2) if n1 and n2 else 0.5


def _probabilities(counts: list[Counter]) -> list[dict[tuple[str, ...], float | None]]:
    """Each seen n-gram's discounted probability (unigrams with their uniform share)."""
    unigrams = counts[0]
    total, discount = sum(unigrams.values()), _discount(unigrams)
    uniform = discount * len(unigrams) / total / (len(unigrams) + 1)  # + <unk>
    probs: list[dict] = [{g: (c - discount) / total + uniform for g, c in unigrams.items()}]
    probs[0][(UNKNOWN,)] = uniform
    probs[0][(BEGIN,)] = None  # in the file (-99), as ARPA readers expect
    for level in counts[1:]:
        discount, context = _discount(level), Counter()
        for gram, count in level.items():
            context[gram[:-1]] += count
        probs.append({g: (c - discount) / context[g[:-1]] for g, c in level.items()})
    return probs


def _backoffs(counts: list[Counter], probs: list[dict]) -> list[dict[tuple[str, ...], float]]:
    """Each context's back-off weight: the mass its seen words freed, over what the lower
    order gives the words it did not see."""
    backoffs: list[dict] = [{} for _ in counts]

    def backed_off(gram: tuple[str, ...]) -> float:
        n = len(gram)
        if n == 1:
            return probs[0].get(gram) or probs[0][(UNKNOWN,)]
        if gram in probs[n - 1]:
            return probs[n - 1][gram]
        return backoffs[n - 2].get(gram[:-1], 1.0) * backed_off(gram[1:])

    for n in range(1, len(counts)):
        seen = defaultdict(list)
        for gram in counts[n]:
            seen[gram[:-1]].append(gram)
        for context, grams in seen.items():
            left = 1.0 - sum(probs[n][g] for g in grams)
            lower = 1.0 - sum(backed_off(g[1:]) for g in grams)
            backoffs[n - 1][context] = max(left, 1e-12) / lower if lower > 1e-12 else 1.0
    return backoffs
