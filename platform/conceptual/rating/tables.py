"""The papers' human tables from a task set's ratings.

- caption_quality (Conceptual Captions Tables 2 and 4): the share of items rated GOOD by at
  least 1, 2, ... raters and by all of them: `good_1plus`, `good_2plus`, `good_3` for three
  raters per item. The task set's first approach gets the plain keys, the others (the
  nearest-neighbour baseline beside a captioner) the same keys after `APPROACH.`.
- retrieval (spoken-captions Table 4): human R@1 and R@5, a query found when an image in
  its top 1 or 5 is a match by a majority of its raters, beside automatic R@1/5 on the same
  queries (found only when the query's own image is there); and how often raters took the
  query's own image for a match (`own_image_match`: what automatic recall assumes).
- zh_caption (fluency Table 6): the mean and standard deviation (over ratings, n - 1) of
  relevance and fluency per approach, each rating of an item's captions shown side by side
  going to the approach of the caption in that place (the item's `sentences`); `items`
  counts the rated items showing the approach.

Agreement: `fleiss_kappa` over every judgement (an item's answer; retrieval: each image
shown; zh_caption: each scale of each caption shown, and each scale alone) and, for the
1-5 scales, Krippendorff's alpha with the interval distance. Only items with the task set's
number of raters count (`items_rated`); ratings of unknown items, answers that are no answer
and a rater's second answer to an item are left out and counted by reason (`skipped`).
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from conceptual.rating.agreement import fleiss_kappa, interval, krippendorff_alpha
from conceptual.rating.tasks import (
    FLUENT,
    GOOD,
    MATCH,
    NOT_FLUENT,
    RESULTS_SHOWN,
    SCALES,
    TaskSet,
    grades,
    sentences,
)

MIN_RATERS = 2  # of a fluency label: the fluency paper's two native speakers


@dataclass
class Ratings:
    by_item: dict[str, dict[str, str]]  # item -> rater -> answer (stored form)
    seconds: dict[str, list[float]]  # rater -> time on each item (the page's answers)
    skipped: Counter[str] = field(default_factory=Counter)

    def rated(self, items: list[dict[str, Any]], raters: int) -> list[dict[str, Any]]:
        return [item for item in items if len(self.by_item.get(item["item_id"], {})) >= raters]

    def answers(self, item: dict[str, Any]) -> list[str]:
        return list(self.by_item[item["item_id"]].values())


def collect(tasks: TaskSet, rows: list[dict[str, Any]]) -> Ratings:
    """Rows with `rater`, `item_id`, `answer` (and `seconds` from the page's database)."""
    items = tasks.by_id()
    ratings = Ratings({}, {})
    for row in rows:
        rater, item_id = str(row.get("rater") or "").strip(), str(row.get("item_id") or "")
        if not rater:
            ratings.skipped["no_rater"] += 1
            continue
        if item_id not in items:
            ratings.skipped["unknown_item"] += 1
            continue
        try:
            answer = tasks.kind.parse(str(row.get("answer") or ""), items[item_id])
        except ValueError:
            ratings.skipped["not_an_answer"] += 1
            continue
        given = ratings.by_item.setdefault(item_id, {})
        if rater in given:
            ratings.skipped["answered_twice"] += 1
            continue
        given[rater] = answer
        if (seconds := number(row.get("seconds"))) is not None:
            ratings.seconds.setdefault(rater, []).append(seconds)
    return ratings


def number(value: Any) -> float | None:
    """A time taken as a number, or None (a CSV's empty or unreadable cell)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


@dataclass
class Tables:
    metrics: dict[str, float]
    tables: dict[str, list[dict[str, Any]]]  # name -> rows


def human_tables(tasks: TaskSet, rows: list[dict[str, Any]]) -> Tables:
    ratings = collect(tasks, rows)
    rated = ratings.rated(tasks.items, tasks.raters)
    table, metrics = TABLES[tasks.kind.name](tasks, ratings, rated)
    raters = rater_table(ratings)
    metrics |= {
        "items": len(tasks.items),
        "items_rated": len(rated),
        "ratings": sum(len(r) for r in ratings.by_item.values()),
        "ratings_skipped": sum(ratings.skipped.values()),
        "raters": len(raters),
        **{f"items.{row['rater']}": row["items"] for row in raters},
    }
    skipped = [{"reason": r, "ratings": n} for r, n in sorted(ratings.skipped.items())]
    return Tables(metrics, {tasks.kind.name: table, "raters": raters, "skipped": skipped})


def by_approach(tasks: TaskSet, rated: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    return {a: [i for i in rated if i["approach"] == a] for a in tasks.manifest["approaches"]}


def prefix(tasks: TaskSet, approach: str, always: bool = False) -> str:
    """The metric keys' prefix of an approach: none for the one evaluated (module docstring)."""
    return "" if approach == tasks.manifest["approaches"][0] and not always else f"{approach}."


def share(hits: list[bool]) -> float | None:
    return sum(hits) / len(hits) if hits else None


def caption_quality(
    tasks: TaskSet, ratings: Ratings, rated: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    n = tasks.raters
    names = [f"good_{k}plus" for k in range(1, n)] + [f"good_{n}"]
    rows, metrics = [], {}
    for approach, items in by_approach(tasks, rated).items():
        good = [ratings.answers(i).count(GOOD) for i in items]
        row: dict[str, Any] = {"approach": approach, "items": len(items)}
        for k, name in enumerate(names, start=1):
            row[name] = share([g >= k for g in good])
        rows.append(row)
        metrics |= {prefix(tasks, approach) + k: v for k, v in row.items() if k in names}
    metrics["fleiss_kappa"] = fleiss_kappa([ratings.answers(i) for i in rated])
    return rows, metrics


def matches(ratings: Ratings, item: dict[str, Any]) -> list[bool]:
    """Each image shown: a match by a majority of the item's raters."""
    answers = ratings.answers(item)
    return [
        sum(a[position] == MATCH for a in answers) * 2 > len(answers)
        for position in range(len(item["results"]))
    ]


def retrieval(
    tasks: TaskSet, ratings: Ratings, rated: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    rows, metrics = [], {}
    automatic = tasks.manifest["source"].get("automatic") or {}
    for approach, items in by_approach(tasks, rated).items():
        judged = [(item, matches(ratings, item)) for item in items]
        row: dict[str, Any] = {"approach": approach, "queries": len(items)}
        for k in (1, RESULTS_SHOWN):
            row[f"human R@{k}"] = share([found_within(item, m, k) for item, m in judged])
            row[f"automatic R@{k}"] = share(
                [found_within(item, [r["correct"] for r in item["results"]], k) for item in items]
            )
            row[f"automatic R@{k} (all queries)"] = automatic.get(f"R@{k}")
        row["own_image_match"] = share(
            [m[p] for item, m in judged for p, r in enumerate(item["results"]) if r["correct"]]
        )
        rows.append(row)
        metrics |= {
            prefix(tasks, approach) + key.replace(" (all queries)", ".all").replace(" ", "."): v
            for key, v in row.items()
            if key not in ("approach", "queries")
        }
    subjects = [[a[p] for a in ratings.answers(i)] for i in rated for p in range(len(i["results"]))]
    metrics["fleiss_kappa"] = fleiss_kappa(subjects)
    return rows, metrics


def found_within(item: dict[str, Any], hits: list[bool], k: int) -> bool:
    """Whether an image ranked k or better is a hit (the query's own image, added below the
    top 5, has no rank)."""
    return any(
        hit and r["rank"] is not None and r["rank"] <= k for r, hit in zip(item["results"], hits)
    )


def zh_caption(
    tasks: TaskSet, ratings: Ratings, rated: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    # Each caption shown: its approach and its raters' (relevance, fluency).
    shown = [
        (sentence["approach"], [grades(a)[place] for a in ratings.answers(item)])
        for item in rated
        for place, sentence in enumerate(sentences(item))
    ]
    rows, metrics = [], {}
    for approach in tasks.manifest["approaches"]:
        judged = [given for a, given in shown if a == approach]
        row: dict[str, Any] = {"approach": approach, "items": len(judged)}
        for s, scale in enumerate(SCALES):
            values = [grade[s] for given in judged for grade in given]
            row[f"{scale}_mean"] = statistics.fmean(values) if values else None
            row[f"{scale}_std"] = statistics.stdev(values) if len(values) > 1 else None
        rows.append(row)
        metrics |= {prefix(tasks, approach, always=True) + k: v for k, v in row.items() if "_" in k}
    scales = {
        scale: [[grade[s] for grade in given] for _, given in shown]
        for s, scale in enumerate(SCALES)
    }
    metrics["fleiss_kappa"] = fleiss_kappa([u for units in scales.values() for u in units])
    for scale, units in scales.items():
        metrics[f"fleiss_kappa.{scale}"] = fleiss_kappa(units)
        metrics[f"krippendorff_alpha.{scale}"] = krippendorff_alpha(units, interval)
    return rows, metrics


def agreed(answers: Sequence[str]) -> bool | None:
    """Fluent (True) or not (False) when at least two raters agree on it; None otherwise."""
    if len(answers) < MIN_RATERS or len(set(answers)) != 1:
        return None
    grade = answers[0]
    return True if grade == FLUENT else False if grade == NOT_FLUENT else None


def fluency_label(
    tasks: TaskSet, ratings: Ratings, rated: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Per translator: the sentences the raters agreed on (the labels train_fluency reads)
    and the share of them fluent (the fluency paper: under 30%)."""
    rows, metrics = [], {}
    for approach, items in by_approach(tasks, rated).items():
        grades = [agreed(ratings.answers(i)) for i in items]
        labelled = [g for g in grades if g is not None]
        row = {"approach": approach, "items": len(items), "labelled": len(labelled)}
        row["fluent"] = share(labelled)
        rows.append(row)
        metrics |= {
            prefix(tasks, approach, always=True) + k: v for k, v in row.items() if k != "approach"
        }
    metrics["fleiss_kappa"] = fleiss_kappa([ratings.answers(i) for i in rated])
    return rows, metrics


TABLES = {
    "caption_quality": caption_quality,
    "retrieval": retrieval,
    "zh_caption": zh_caption,
    "fluency_label": fluency_label,
}


def rater_table(ratings: Ratings) -> list[dict[str, Any]]:
    """How many items each rater answered (and their median seconds on one, from the page)."""
    items: Counter[str] = Counter(r for given in ratings.by_item.values() for r in given)
    return [
        {
            "rater": rater,
            "items": n,
            "median_seconds": statistics.median(ratings.seconds[rater])
            if ratings.seconds.get(rater)
            else None,
        }
        for rater, n in sorted(items.items())
    ]
