"""Human fluency labels, as the fluency paper made them: two raters grade each translated
sentence FLUENT, NOT_FLUENT or DIFFICULT (a `fluency_label` task set: rating_tasks
--kind fluency_label --data CHINESE_IMPORT --raters 2), and a sentence is labelled only when
its raters agree on FLUENT or NOT_FLUENT (rating.tables.agreed); inconsistent grades are
dropped, as the paper dropped them, and so is DIFFICULT.

    pairs = human_pairs(read_task_set(TASKS), rating_rows, originals)   # list[LabelledPair]

train_fluency reads them beside the derived chrF labels (conceptual.fluency.labels): a
sentence people graded takes their label instead of the derived one.
"""

from __future__ import annotations

import math
from typing import Any

from conceptual.fluency.labels import LabelledPair
from conceptual.rating.tables import agreed, collect
from conceptual.rating.tasks import TaskSet


def human_pairs(
    tasks: TaskSet, rows: list[dict[str, Any]], originals: dict[str, str]
) -> list[LabelledPair]:
    """The task set's sentences its raters agreed on, each with its English original
    (`originals`: record id -> English, of the dataset the task set was made from); a
    sentence without one is left out. ValueError for another kind of task set."""
    if tasks.kind.name != "fluency_label":
        raise ValueError(
            f"the task set {tasks.name} is {tasks.kind.name}: fluency labels come from "
            "fluency_label tasks (rating_tasks --kind fluency_label --data CHINESE_IMPORT)"
        )
    ratings = collect(tasks, rows)
    graded = {
        item["item_id"]: fluent
        for item in tasks.items
        if item["item_id"] in ratings.by_item
        and (fluent := agreed(ratings.answers(item))) is not None
    }
    pairs = []
    for item in tasks.items:
        original = originals.get(item["source_id"])
        if item["item_id"] in graded and original:
            image = item["image_id"] or item["source_id"]
            pair = LabelledPair(
                image, 0, item["approach"], item["text"], original, "", math.nan,
                graded[item["item_id"]],
            )  # fmt: skip
            pairs.append(pair)
    return pairs


def merged(derived: list[LabelledPair], human: list[LabelledPair]) -> list[LabelledPair]:
    """The derived labels and the human ones; a sentence (text and original) people graded
    takes their label."""
    graded = {(p.text, p.original) for p in human}
    return [p for p in derived if (p.text, p.original) not in graded] + human
