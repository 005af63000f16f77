"""The COCO caption metrics over bootstrap resamples of the test images (intervals.py),
each recomputed per resample as pycocoevalcap would score that set of images, every drawn
image with all its references. Every one is exact, not an average of per-image scores
standing in for a corpus score:

- BLEU-n: the corpus score is a function of sums over images (clipped n-gram matches,
  n-grams guessed, hypothesis length, closest reference length; the brevity penalty comes
  from the last two), so a resample's sums are `counts @ per-image statistics`.
- CIDEr (pycocoevalcap's CIDEr-D): its IDF comes from the references of the scored images
  and changes with every resample: a resample's document frequencies are `counts @` the
  image-by-n-gram incidence of the references. Every tf-idf product in an image's score is
  tf x tf' x idf², so the image's cosine numerators and squared norms are linear in idf²,
  and one sparse product gives them for all resamples at once.
- METEOR: its corpus score is not the mean of the segment scores but METEOR's score of the
  summed sufficient statistics (the fragmentation penalty is taken on the totals, a segment
  matched whole adding no chunk); Java's scorer scores each resample's summed statistics,
  all resamples in one EVAL line.
- ROUGE-L and SPICE: the corpus score is the mean of the per-image scores
  (`intervals.mean_over`).

Inputs are pycocoevalcap's: `gts` id -> tokenized references, `res` id -> [tokenized
hypothesis], ids 0..n-1 in the order of the columns of `counts` (samples, n).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

Tokenized = Mapping[int, Sequence[str]]

BLEU_N = 4
CIDER_N, CIDER_SIGMA = 4, 6.0  # pycocoevalcap's Cider()
BLEU_SMALL, BLEU_TINY = 1e-9, 1e-15  # pycocoevalcap's guards against dividing by zero
RESAMPLE_CELLS = 4_000_000  # floats of one chunk of resamples' dense intermediates
METEOR_CHUNK = 200  # resamples per EVAL line
# Where METEOR 1.5's segment statistics (its SCORE reply) keep the lengths, the chunks and
# the matched words of the hypothesis and the references.
TEST_LENGTH, REF_LENGTH, CHUNKS, TEST_MATCHES, REF_MATCHES = 0, 1, 20, 21, 22


def _ids(gts: Tokenized, counts: np.ndarray) -> range:
    if list(gts) != list(range(len(gts))) or counts.shape[1] != len(gts):
        raise ValueError("ids must be 0..n-1 with one column of counts per id")
    return range(len(gts))


def bleu(gts: Tokenized, res: Tokenized, counts: np.ndarray) -> dict[str, np.ndarray]:
    """BLEU-1..4 per resample (module docstring), with pycocoevalcap's own n-gram counting
    and its "closest" reference length."""
    from pycocoevalcap.bleu.bleu_scorer import cook_refs, cook_test

    stats = []  # per image: testlen, reflen, guess 1..4, correct 1..4
    for i in _ids(gts, counts):
        cooked = cook_test(res[i][0], cook_refs(gts[i]), eff="closest")
        stats.append([cooked["testlen"], cooked["reflen"], *cooked["guess"], *cooked["correct"]])
    totals = counts @ np.array(stats, dtype=float)
    test_len, ref_len = totals[:, 0], totals[:, 1]
    guess, correct = totals[:, 2 : 2 + BLEU_N], totals[:, 2 + BLEU_N :]
    precision = np.cumprod((correct + BLEU_TINY) / (guess + BLEU_SMALL), axis=1)
    scores = precision ** (1 / np.arange(1, BLEU_N + 1))
    ratio = (test_len + BLEU_TINY) / (ref_len + BLEU_SMALL)
    brevity = np.where(ratio < 1, np.exp(1 - 1 / np.minimum(ratio, 1)), 1.0)
    return {f"BLEU-{n}": scores[:, n - 1] * brevity for n in range(1, BLEU_N + 1)}


class _Columns:
    """n-gram -> column number, assigned on first sight."""

    def __init__(self) -> None:
        self.index: dict[tuple[str, ...], int] = {}

    def __call__(self, ngram: tuple[str, ...]) -> int:
        return self.index.setdefault(ngram, len(self.index))


class _Sparse:
    """Entries of a (n-grams, rows) matrix, added one at a time."""

    def __init__(self) -> None:
        self.cols: list[int] = []
        self.rows: list[int] = []
        self.values: list[float] = []

    def add(self, column: int, row: int, value: float) -> None:
        self.cols.append(column)
        self.rows.append(row)
        self.values.append(value)

    def matrix(self, columns: int, rows: int) -> Any:
        from scipy import sparse  # only the bootstrap needs it

        shape = (columns, rows)
        return sparse.csr_matrix((self.values, (self.cols, self.rows)), shape=shape)


def cider(gts: Tokenized, res: Tokenized, counts: np.ndarray) -> np.ndarray:
    """CIDEr per resample with the document frequencies of the resample's references
    (module docstring); pycocoevalcap's n-gram counting, clipping, bigram-count length
    penalty and x10."""
    statistics = _CiderStatistics(gts, res, len(_ids(gts, counts)))
    chunk = max(1, RESAMPLE_CELLS // statistics.widest)
    return np.concatenate(
        [statistics.scores(counts[start : start + chunk]) for start in range(0, len(counts), chunk)]
    )


class _CiderStatistics:
    """The test set's n-gram statistics, as sparse (n-grams, rows) matrices whose product
    with idf² gives every image's squared tf-idf norms and every reference's clipped
    overlap with the hypothesis, per n-gram order (row = image or reference x order)."""

    def __init__(self, gts: Tokenized, res: Tokenized, images: int) -> None:
        from pycocoevalcap.cider.cider_scorer import precook

        column = _Columns()
        incidence, hyp_norms, ref_norms, overlaps = _Sparse(), _Sparse(), _Sparse(), _Sparse()
        penalty, ref_image = [], []  # per reference, over all images
        for i in range(images):
            hyp = precook(res[i][0], CIDER_N)
            for ngram, tf in hyp.items():
                hyp_norms.add(column(ngram), i * CIDER_N + len(ngram) - 1, tf * tf)
            refs = [precook(ref, CIDER_N) for ref in gts[i]]
            for ngram in {ngram for ref in refs for ngram in ref}:
                incidence.add(column(ngram), i, 1.0)
            for ref in refs:
                first_row = len(penalty) * CIDER_N
                for ngram, tf in ref.items():
                    ref_norms.add(column(ngram), first_row + len(ngram) - 1, tf * tf)
                    if ngram in hyp:
                        overlap = min(hyp[ngram], tf) * tf
                        overlaps.add(column(ngram), first_row + len(ngram) - 1, overlap)
                delta = _bigrams(hyp) - _bigrams(ref)
                penalty.append(np.exp(-(delta**2) / (2 * CIDER_SIGMA**2)))
                ref_image.append(i)
        grams, rows = len(column.index), len(penalty) * CIDER_N
        self.images = images
        self.incidence = incidence.matrix(grams, images)  # does image i's references hold g
        self.hyp_norms = hyp_norms.matrix(grams, images * CIDER_N)
        self.ref_norms, self.overlaps = ref_norms.matrix(grams, rows), overlaps.matrix(grams, rows)
        self.ref_image, self.penalty = np.array(ref_image), np.array(penalty)
        self.first_refs = np.searchsorted(self.ref_image, np.arange(images))
        self.refs_per_image = np.bincount(self.ref_image, minlength=images)
        self.widest = max(grams, rows)

    def scores(self, drawn: np.ndarray) -> np.ndarray:
        """CIDEr of each resample in `drawn` (resamples, images)."""
        frequency = (self.incidence @ drawn.T).T  # (resamples, n-grams)
        idf_squared = ((np.log(self.images) - np.log(np.maximum(1.0, frequency))) ** 2).T
        by_order = (len(drawn), -1, CIDER_N)
        hyp_sq = (self.hyp_norms.T @ idf_squared).T.reshape(by_order)
        ref_sq = (self.ref_norms.T @ idf_squared).T.reshape(by_order)
        overlap = (self.overlaps.T @ idf_squared).T.reshape(by_order)
        norms = np.sqrt(hyp_sq[:, self.ref_image, :] * ref_sq)
        cosine = np.divide(overlap, norms, out=np.zeros_like(overlap), where=norms > 0)
        per_ref = cosine.mean(axis=2) * self.penalty  # (resamples, references)
        per_image = np.add.reduceat(per_ref, self.first_refs, axis=1) / self.refs_per_image
        return (drawn * per_image * 10.0).sum(axis=1) / self.images


def _bigrams(counts: Mapping[tuple[str, ...], int]) -> int:
    """pycocoevalcap CIDEr's "length" of a sentence: its number of bigrams."""
    return sum(tf for ngram, tf in counts.items() if len(ngram) == 2)


def meteor(scorer: Any, gts: Tokenized, res: Tokenized, counts: np.ndarray) -> np.ndarray:
    """METEOR per resample: the running pycocoevalcap Meteor `scorer` scores each resample's
    summed segment statistics (module docstring). As METEOR's own sum does, a segment
    matched whole (every word, one chunk: no fragmentation penalty) adds no chunk."""
    stats = np.array(
        [[float(x) for x in scorer._stat(res[i][0], gts[i]).split()] for i in _ids(gts, counts)]
    )
    whole = (
        (stats[:, CHUNKS] == 1)
        & (stats[:, TEST_MATCHES] == stats[:, TEST_LENGTH])
        & (stats[:, REF_MATCHES] == stats[:, REF_LENGTH])
    )
    stats[whole, CHUNKS] = 0
    out = []
    for start in range(0, len(counts), METEOR_CHUNK):
        summed = counts[start : start + METEOR_CHUNK] @ stats
        line = "EVAL" + "".join(" ||| " + " ".join(map(repr, row.tolist())) for row in summed)
        scorer.meteor_p.stdin.write(f"{line}\n".encode())
        scorer.meteor_p.stdin.flush()
        out += [float(scorer.meteor_p.stdout.readline()) for _ in summed]
        scorer.meteor_p.stdout.readline()  # the score of all lines together
    return np.array(out)
