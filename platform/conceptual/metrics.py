"""Text metrics the platform shares: token F1 (hypernymization quality, caption checks) and
the COCO caption evaluation metrics (captioner evaluation)."""

from __future__ import annotations

import re
import shutil
from collections import Counter
from collections.abc import Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

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
