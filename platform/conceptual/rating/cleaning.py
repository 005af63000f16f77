"""A split cleaned by people (Conceptual Captions section 3: the test set keeps only the
images whose caption 2 or more of 3 raters judged GOOD): which records of a curated split
stay, from a caption_quality task set made from that data and its ratings.

Each record of the split is kept, or dropped with a stable reason (they are metrics):

| reason | the record |
|---|---|
| `not_rated` | has no item in the task set, or an item nobody rated |
| `rated_another_caption` | has an item, but the item showed another caption than the record's (the task set came from data curated with other settings) |
| `fewer_good_than_min` | was rated GOOD by fewer than `min_good` raters |

Ratings are read as rating_results reads them (conceptual.rating.tables.collect): a rater's
second answer to an item, answers that are no answer and unknown items are left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from conceptual.rating.tables import collect
from conceptual.rating.tasks import GOOD, TaskSet

STAGE = "clean_split"
NOT_RATED = "not_rated"
ANOTHER_CAPTION = "rated_another_caption"
FEWER_GOOD = "fewer_good_than_min"
REASONS = (NOT_RATED, ANOTHER_CAPTION, FEWER_GOOD)
# What rating_tasks --data names the dataset's captions (pipelines/rating/rating_tasks.py).
CURATED_APPROACH = "curated"


@dataclass(frozen=True)
class Judged:
    """What the raters said of one record's caption."""

    caption: str  # the caption the item showed
    good: int  # raters who answered GOOD
    ratings: int  # raters who answered at all


def judgements(tasks: TaskSet, rows: list[dict[str, Any]]) -> dict[str, Judged]:
    """Record id -> its item's judgement, from a caption_quality task set of a dataset's
    captions (`rating_tasks --kind caption_quality --data ...`) and its rating rows.
    ValueError for any other task set: a model's captions say nothing of the dataset's."""
    if tasks.kind.name != "caption_quality":
        raise ValueError(
            f"the task set {tasks.name} is a {tasks.kind.name} task set: cleaning a split needs "
            "caption_quality tasks (rating_tasks --kind caption_quality --data CURATED)"
        )
    if "data" not in tasks.manifest["source"]:
        raise ValueError(
            f"the task set {tasks.name} rates a model's captions (it came from run "
            f"{tasks.manifest['source'].get('run_id')}): cleaning a split needs the dataset's "
            "own captions rated (rating_tasks --kind caption_quality --data CURATED)"
        )
    by_item = collect(tasks, rows).by_item
    return {
        item["source_id"]: Judged(
            item["text"],
            list(by_item.get(item["item_id"], {}).values()).count(GOOD),
            len(by_item.get(item["item_id"], {})),
        )
        for item in tasks.items
        if item["approach"] == CURATED_APPROACH
    }


def verdict(
    record_id: str, caption: str | None, judged: dict[str, Judged], min_good: int
) -> tuple[str, str] | None:
    """None when the record stays, else (reason, detail)."""
    found = judged.get(record_id)
    if found is None or not found.ratings:
        return NOT_RATED, "no item of the task set" if found is None else "no rater answered"
    if found.caption != caption:
        return ANOTHER_CAPTION, f"the item showed {found.caption!r}"
    if found.good < min_good:
        return FEWER_GOOD, f"{found.good} GOOD of {found.ratings} ratings, {min_good} needed"
    return None
