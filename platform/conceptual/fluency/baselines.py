"""The fluency paper's baselines (Lan, Li, Dong 2017, Table 2), exactly as it states them:

    random_guess(n, seed)                          # each sentence fluent with probability 0.5
    rule = MeanFluentLength.fit(train_words, train_labels)
    rule.predict(test_words)                       # fluent if shorter than the mean fluent length

The length rule runs on the English source's length and on the Chinese translation's:
a sentence is fluent when it is shorter than the mean length of the fluent sentences of
the training labels. It is fixed by the paper, not tuned: the tuned rule (its direction
and threshold set on the dev labels) is pipelines/families/fluency/train_fluency.length_rule, reported
beside these.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

RANDOM_FLUENT = 0.5  # a coin: the paper's guess knows nothing of the label's share


def random_guess(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(predicted fluent (n,) bool, the scores it thresholds (n,) in [0, 1)), seeded so a
    table is the same on every run."""
    scores = np.random.default_rng(seed).random(n)
    return scores < RANDOM_FLUENT, scores


@dataclass(frozen=True)
class MeanFluentLength:
    """Fluent when shorter than `mean`: the mean length of the fluent training sentences."""

    mean: float

    @classmethod
    def fit(cls, lengths: np.ndarray, labels: np.ndarray) -> MeanFluentLength:
        """Without a fluent training sentence the mean is 0, so no sentence is called fluent
        (a held-out table on few labels still gets its row, not an error)."""
        labels = np.asarray(labels, dtype=bool)
        return cls(float(np.asarray(lengths)[labels].mean()) if labels.any() else 0.0)

    def predict(self, lengths: np.ndarray) -> np.ndarray:
        return np.asarray(lengths) < self.mean

    def scores(self, lengths: np.ndarray) -> np.ndarray:
        """Higher for shorter sentences: what the rule ranks by (its AUC)."""
        return -np.asarray(lengths, dtype=float)
