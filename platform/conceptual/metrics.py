"""The metrics the platform shares, each family's in one place: token F1 (hypernymization
quality, caption checks), the COCO caption evaluation metrics (captioners), Recall@k with its
chance level (retrievers), and precision, recall, F1 and AUC of a binary classifier (the
fluency classifier)."""

from __future__ import annotations

import re
import shutil
from collections import Counter
from collections.abc import Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from conceptual import resampled_metrics
from conceptual.intervals import mean_over


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


# What pycocoevalcap's PTBTokenizer does, without its Java process, so scores do not depend
# on whether the machine has Java: lowercase, split clitics ("dog's" -> "dog 's", "don't" ->
# "do n't") and punctuation off words, then drop the punctuation tokens it drops.
_CLITIC = re.compile(r"(?<=\w)(n't|'s|'re|'ve|'ll|'d|'m)\b")
_TOKEN = re.compile(r"n't|'[a-z]+|[\w]+(?:[-.'/&][\w]+)*|\.\.\.|--|\S")
_DROPPED_PUNCTUATION = set(". ? ! , : ; - -- ... ' '' ` `` \" ( ) { }".split())


def coco_tokenize(text: str) -> str:
    """A caption as the COCO caption evaluation tokenizes it: lowercased PTB tokens without
    punctuation, joined by single spaces. Agrees with PTBTokenizer on plain captions (all
    but one of Flickr8k-mini's 3,990); it leaves brackets out and "u.s." as "u.s"."""
    tokens = _TOKEN.findall(_CLITIC.sub(r" \1", text.lower()))
    return " ".join(t for t in tokens if t not in _DROPPED_PUNCTUATION)


CAPTION_METRICS = ("BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4", "ROUGE-L", "CIDEr", "METEOR", "SPICE")
JAVA_METRICS = ("METEOR", "SPICE")


def find_java() -> str | None:
    """The `java` executable METEOR and SPICE run on, or None."""
    return shutil.which("java")


def _spice_dir() -> Path:
    import pycocoevalcap.spice

    return Path(pycocoevalcap.spice.__file__).parent


def spice_missing_jars() -> list[Path]:
    """The Stanford CoreNLP jars SPICE needs and does not have. pycocoevalcap downloads them
    on first use, which cannot work offline, so we look before constructing its scorer."""
    from pycocoevalcap.spice.get_stanford_models import JAR, SPICELIB

    lib = _spice_dir() / SPICELIB
    jars = (lib / f"{JAR}.jar", lib / f"{JAR}-models.jar")
    return [jar for jar in jars if not jar.is_file()]


def java_metric_unavailable(metric: str) -> str | None:
    """Why METEOR or SPICE cannot be computed on this machine, or None when it can."""
    if find_java() is None:
        return f"{metric} needs Java: no `java` on PATH (install default-jre-headless)"
    if metric == "SPICE" and (missing := spice_missing_jars()):
        names = ", ".join(jar.name for jar in missing)
        return (
            f"SPICE needs Stanford CoreNLP ({names} in {missing[0].parent}), which pycocoevalcap "
            "downloads on first use; fetch them once with network access: "
            "python -m pycocoevalcap.spice.get_stanford_models"
        )
    return None


@contextmanager
def _meteor() -> Iterator[Any]:
    """pycocoevalcap's METEOR scorer, whose Java process is stopped on exit. Its own cleanup
    runs only in __del__, whenever that happens, and deadlocks on the scorer's lock if
    compute_score raised while holding it; so we release the lock and stop the process here."""
    from pycocoevalcap.meteor.meteor import Meteor

    meteor = Meteor()
    try:
        yield meteor
    finally:
        if meteor.lock.locked():
            meteor.lock.release()
        process = meteor.meteor_p
        for stream in (process.stdin, process.stdout, process.stderr):
            stream.close()
        process.kill()
        process.wait()


# Each scorer returns its corpus score(s) and, given resample counts, the score(s) of every
# resample (resampled_metrics says how each is recomputed), or None without counts.
Resampled = np.ndarray | None


def _meteor_score(gts: dict, res: dict, counts: np.ndarray | None) -> tuple[float, Resampled]:
    with _meteor() as meteor:
        score = float(meteor.compute_score(gts, res)[0])
        return score, None if counts is None else resampled_metrics.meteor(meteor, gts, res, counts)


def _spice_score(gts: dict, res: dict, counts: np.ndarray | None) -> tuple[float, Resampled]:
    from pycocoevalcap.spice.spice import Spice

    score, per_image = Spice().compute_score(gts, res)
    f_scores = [image["All"]["f"] for image in per_image]
    return float(score), None if counts is None else mean_over(counts, np.array(f_scores))


def _bleu_scores(
    gts: dict, res: dict, counts: np.ndarray | None
) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    from pycocoevalcap.bleu.bleu import Bleu

    bleu, _ = Bleu(4).compute_score(gts, res, verbose=0)
    scores = {f"BLEU-{n}": float(bleu[n - 1]) for n in range(1, 5)}
    return scores, {} if counts is None else resampled_metrics.bleu(gts, res, counts)


def _rouge_score(gts: dict, res: dict, counts: np.ndarray | None) -> tuple[float, Resampled]:
    from pycocoevalcap.rouge.rouge import Rouge

    score, per_image = Rouge().compute_score(gts, res)
    return float(score), None if counts is None else mean_over(counts, per_image)


def _cider_score(gts: dict, res: dict, counts: np.ndarray | None) -> tuple[float, Resampled]:
    from pycocoevalcap.cider.cider import Cider

    score = float(Cider().compute_score(gts, res)[0])
    return score, None if counts is None else resampled_metrics.cider(gts, res, counts)


def caption_scores(
    hypotheses: Mapping[Hashable, str],
    references: Mapping[Hashable, Sequence[str]],
    metrics: Sequence[str] = CAPTION_METRICS,
    resamples: np.ndarray | None = None,
) -> dict[str, Any]:
    """Corpus scores from the COCO caption evaluation code (pycocoevalcap): one hypothesis
    and any number of references per id, all tokenized with `coco_tokenize`.

    Returns each requested metric, `count` (the number of ids scored) and `unavailable`
    (metric -> why, for METEOR/SPICE when Java or SPICE's jars are missing; such a metric
    is None, never a made-up number). CIDEr is CIDEr-D with document frequencies from these
    references: scores depend on the set, so report it and its size with them.

    With `resamples` (intervals.resample_counts: one column per id, in the order of
    `hypotheses`), also `resampled`: each computed metric's score on every resample of the
    ids, recomputed as resampled_metrics describes."""
    unknown = set(metrics) - set(CAPTION_METRICS)
    if unknown:
        raise ValueError(f"unknown caption metrics {sorted(unknown)}; known: {CAPTION_METRICS}")
    if set(hypotheses) != set(references):
        raise ValueError("hypotheses and references must cover the same ids")
    if not hypotheses:
        raise ValueError("no captions to score")
    # Positional ids: SPICE round-trips them through JSON and METEOR through a text protocol.
    ids = list(hypotheses)
    res = {i: [coco_tokenize(hypotheses[key])] for i, key in enumerate(ids)}
    gts = {i: [coco_tokenize(ref) for ref in references[key]] for i, key in enumerate(ids)}

    scores: dict[str, float | None] = {}
    resampled: dict[str, np.ndarray] = {}
    unavailable: dict[str, str] = {}
    if any(m.startswith("BLEU") for m in metrics):
        bleu, bleu_resampled = _bleu_scores(gts, res, resamples)
        scores.update(bleu)
        resampled.update(bleu_resampled)
    computed = [("ROUGE-L", _rouge_score), ("CIDEr", _cider_score)]
    computed += [("METEOR", _meteor_score), ("SPICE", _spice_score)]
    for metric, compute in computed:
        if metric not in metrics:
            continue
        why = java_metric_unavailable(metric) if metric in JAVA_METRICS else None
        if why:
            scores[metric], unavailable[metric] = None, why
            continue
        scores[metric], on_resamples = compute(gts, res, resamples)
        if on_resamples is not None:
            resampled[metric] = on_resamples
    report = {**{m: scores[m] for m in metrics}, "count": len(ids), "unavailable": unavailable}
    if resamples is not None:
        report["resampled"] = {m: v for m, v in resampled.items() if m in metrics}
    return report


# ---------------------------------------------------------------- retrieval

KS = (1, 5, 10, 50, 100)
# recall_at_k ranks this many queries at a time: 1024 x 10,000 targets is about 60 MB.
QUERY_CHUNK = 1024


def recall_at_k(
    scores: np.ndarray | Tensor, relevant: np.ndarray | Tensor, ks: Sequence[int] = KS
) -> dict[int, float]:
    """The fraction of queries with a relevant target among their top k, for each k
    (found at k: query_ranks < k, so always when k > T - relevant)."""
    rank = torch.as_tensor(query_ranks(scores, relevant))
    return {k: (rank < k).double().mean().item() for k in ks}


def query_ranks(scores: np.ndarray | Tensor, relevant: np.ndarray | Tensor) -> np.ndarray:
    """Each query's rank, from 0. scores (Q, T) query by target; relevant (Q, T) bool, at
    least one per query. A query's rank is the number of irrelevant targets scoring at
    least as high as its best relevant one: ties count against the query, so a model that
    scores everything alike gets chance, not perfect, recall."""
    scores = torch.as_tensor(scores)
    relevant = torch.as_tensor(relevant, device=scores.device).bool()
    if scores.shape != relevant.shape:
        raise ValueError(f"scores {tuple(scores.shape)} and relevant {tuple(relevant.shape)}")
    if not relevant.any(dim=1).all():
        raise ValueError("every query needs at least one relevant target")
    if scores.isnan().any():
        raise ValueError("scores contain NaN (a NaN would rank its relevant target first)")
    ranks = []
    for start in range(0, len(scores), QUERY_CHUNK):
        chunk, hits = scores[start : start + QUERY_CHUNK], relevant[start : start + QUERY_CHUNK]
        best = chunk.masked_fill(~hits, float("-inf")).amax(dim=1, keepdim=True)
        ranks.append(((chunk >= best) & ~hits).sum(dim=1))
    return torch.cat(ranks).cpu().numpy()


def chance_recall(relevant: np.ndarray | Tensor, ks: Sequence[int] = KS) -> dict[int, float]:
    """recall_at_k's expected value under a uniformly random ranking: a query with r of T
    targets relevant misses at k with probability C(T-r, k) / C(T, k), computed exactly as
    the product over i < k of (T-r-i) / (T-i)."""
    relevant = np.asarray(relevant, dtype=bool)
    n_targets = relevant.shape[1]
    counts, queries = np.unique(relevant.sum(axis=1), return_counts=True)
    if counts[0] == 0:
        raise ValueError("every query needs at least one relevant target")
    out = {}
    for k in ks:
        i = np.arange(min(k, n_targets))
        missed = np.array(
            [np.prod(np.clip(n_targets - r - i, 0, None) / (n_targets - i)) for r in counts]
        )
        out[k] = float(((1 - missed) * queries).sum() / len(relevant))
    return out


# ---------------------------------------------------------------- binary classification


def binary_scores(predicted: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """Precision, recall and F1 of the positive class, and the share predicted positive
    (`predicted_fluent`: the fluency classifier's name for it)."""
    hits = float(np.sum(predicted & labels))
    precision = hits / max(int(predicted.sum()), 1)
    recall = hits / max(int(labels.sum()), 1)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "precision": precision,
        "recall": recall,
        "F1": f1,
        "predicted_fluent": float(predicted.mean()) if len(predicted) else 0.0,
    }


def auc(values: np.ndarray, labels: np.ndarray) -> float:
    """The area under the ROC curve of `values` ranking positive items above the others (ties
    count half); NaN when the labels hold one class only."""
    positives, negatives = int(labels.sum()), int((~labels).sum())
    if not positives or not negatives:
        return float("nan")
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    ranks = (np.cumsum(counts) - (counts - 1) / 2)[inverse]  # 1-based, ties averaged
    return float((ranks[labels].sum() - positives * (positives + 1) / 2) / (positives * negatives))


def classifier_scores(values: np.ndarray, labels: np.ndarray, above: float) -> dict[str, float]:
    """binary_scores of the decision `values > above`, and the AUC of the values."""
    return {**binary_scores(values > above, labels), "AUC": auc(values, labels)}


def coco_results(captions: Mapping[Any, str]) -> list[dict[str, Any]]:
    """Image id -> caption as the COCO results JSON that the COCO caption evaluation
    (`COCO.loadRes`), the COCO server and the Conceptual Captions leaderboard read:
    `[{"image_id": ..., "caption": ...}]`, in the order given."""
    return [{"image_id": image_id, "caption": caption} for image_id, caption in captions.items()]
