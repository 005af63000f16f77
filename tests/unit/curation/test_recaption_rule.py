"""Recaptioning's rule (pipelines/curation/recaption.py `choose`, CapFilt's filter): every caption of
an image scoring min_score or more is kept, web or synthetic; an image none of whose
captions reaches it keeps its best one, so that no image is lost."""

from __future__ import annotations

import pytest

from conceptual.pipelines.curation.recaption import Choice, choose


@pytest.mark.parametrize(
    ("web", "synthetic", "kept"),
    [
        ([0.5, 0.1, 0.4], 0.2, Choice((0, 2), False)),  # the web captions that pass
        ([0.1, 0.2], 0.35, Choice((), True)),  # only the synthetic one passes
        ([0.31, 0.1], 0.9, Choice((0,), True)),  # both sources
        ([0.1, 0.25], 0.2, Choice((1,), False)),  # none passes: the best, a web one
        ([0.1, 0.15], 0.2, Choice((), True)),  # none passes: the best, the synthetic one
        ([], 0.1, Choice((), True)),  # an image with no web caption left
    ],
)
def test_each_caption_is_kept_by_its_score_and_no_image_is_lost(web, synthetic, kept):
    assert choose(web, synthetic, min_score=0.3) == kept
