"""Fluency scores from a saved classifier, for any code that has sentences to score:

    FluencyScorer(model_dir).score(["一只狗在草地上跑。"])    # (1,) float32, fluent above 0.5

The score_fluency job, the captioner's evaluation and compare_fluency score with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from conceptual.fluency.model import encode, predict, scores
from conceptual.fluency.views import sentence_views
from conceptual.models.saving import SavedFluency, load


class FluencyScorer:
    """Fluency scores from a saved classifier (models.saving.SavedFluency), in this process:
    for translations with their English sources, and for Chinese sentences without one
    (native or generated captions, scored on the Chinese views)."""

    def __init__(self, model_dir: str | Path, device: str = "cpu", batch_size: int = 256):
        saved = load(model_dir, device, SavedFluency)
        self.model, self.vocabs = saved.model, saved.vocabs
        self.batch_size = batch_size

    def view_probabilities(
        self, chinese: Sequence[str | None], english: Sequence[str | None] | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Each view's P(fluent), (N, 4), and each view's length in ids, (N, 4) (0: missing)."""
        views = sentence_views(chinese, english)
        columns = encode(views, self.vocabs, self.model.config.max_tokens)
        return predict(self.model, columns, self.batch_size), columns["lengths"]

    def score(
        self, chinese: Sequence[str | None], english: Sequence[str | None] | None = None
    ) -> np.ndarray:
        """(N,) float32 in [0, 1]: fluent above fluency.model.FLUENT_ABOVE (0.5)."""
        return scores(*self.view_probabilities(chinese, english))
