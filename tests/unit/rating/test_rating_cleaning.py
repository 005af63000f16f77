"""Which records of a split people's ratings keep (conceptual.rating.cleaning), no Ray."""

from __future__ import annotations

import random

import pytest
from test_rating_tables import caption_item, rows, task_set  # beside it, on the path

from conceptual.rating.cleaning import judgements, verdict
from conceptual.rating.tasks import new_task_set


def test_a_record_stays_with_min_good_answers_else_a_reason():
    tasks = task_set("caption_quality", [caption_item(n) for n in range(4)])
    given = rows({"curated-0": ["GOOD", "GOOD", "BAD"], "curated-1": ["GOOD", "BAD", "BAD"],
                  "curated-2": ["GOOD", "GOOD"]})  # fmt: skip
    # a rater's second answer and an unknown item are left out, as rating_results does
    given += [{"rater": "r0", "item_id": "curated-1", "answer": "GOOD"},
              {"rater": "r9", "item_id": "nowhere", "answer": "GOOD"}]  # fmt: skip
    judged = judgements(tasks, given)
    assert verdict("record-0", "caption 0", judged, 2) is None
    assert verdict("record-1", "caption 1", judged, 2) == (
        "fewer_good_than_min",
        "1 GOOD of 3 ratings, 2 needed",
    )
    assert verdict("record-1", "caption 1", judged, 1) is None
    # two raters of three, both GOOD: min_good counts GOOD answers, not the share
    assert verdict("record-2", "caption 2", judged, 2) is None
    assert verdict("record-3", "caption 3", judged, 1) == ("not_rated", "no rater answered")
    assert verdict("record-9", "caption 9", judged, 1) == ("not_rated", "no item of the task set")
    # curated again with other settings: the raters judged another caption
    reason, detail = verdict("record-0", "a hypernymized caption", judged, 2)
    assert reason == "rated_another_caption" and "caption 0" in detail


def test_only_the_datasets_own_captions_can_clean_it():
    model = new_task_set(
        "caption_quality", [caption_item(0, "model")], 3, 0, {"run_id": "abc"}, random.Random(0)
    )
    with pytest.raises(ValueError, match="rates a model's captions"):
        judgements(model, [])
    zh = task_set("zh_caption", [caption_item(0)])
    with pytest.raises(ValueError, match="needs caption_quality tasks"):
        judgements(zh, [])
