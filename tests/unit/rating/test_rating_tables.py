"""The papers' human tables from constructed ratings, checked against answers worked by hand."""

from __future__ import annotations

import random

import pytest

from conceptual.rating.tables import human_tables
from conceptual.rating.tasks import AnswerError, kind, new_task_set


def caption_item(n: int, approach: str = "curated") -> dict:
    return {
        "item_id": f"{approach}-{n}",
        "approach": approach,
        "text": f"caption {n}",
        "image": b"jpeg",
        "image_id": f"image-{n}",
        "source_id": f"record-{n}",
        "results": None,
    }


def task_set(kind_name: str, items: list[dict], raters: int = 3):
    return new_task_set(kind_name, items, raters, 0, {"data": "/data"}, random.Random(0))


def rows(answers: dict[str, list[str]]) -> list[dict]:
    """item -> answers of raters r0, r1, ... as CSV rows."""
    return [
        {"rater": f"r{r}", "item_id": item, "answer": answer}
        for item, given in answers.items()
        for r, answer in enumerate(given)
    ]


def test_good_by_one_two_and_three_raters():
    tasks = task_set("caption_quality", [caption_item(n) for n in range(7)])
    # GOOD counts per item: 1, 2, 3, 1, 2, 3 (item 6 has two raters: not counted).
    # good_1plus = 6/6, good_2plus = 4/6, good_3 = 2/6. Agreement: each triple GGG, GGB,
    # GBB twice, which is kappa 0 (test_rating_agreement works that triple by hand).
    answers = {
        f"curated-{n}": ["GOOD" if r <= n % 3 else "BAD" for r in range(3)] for n in range(6)
    }
    answers["curated-6"] = ["GOOD", "GOOD"]
    tables = human_tables(tasks, rows(answers))
    m = tables.metrics
    assert (m["good_1plus"], m["good_2plus"], m["good_3"]) == pytest.approx((1, 4 / 6, 2 / 6))
    assert m["fleiss_kappa"] == pytest.approx(0.0, abs=1e-12)
    assert (m["items"], m["items_rated"], m["ratings"], m["raters"]) == (7, 6, 20, 3)
    assert (m["items.r0"], m["items.r1"], m["items.r2"]) == (7, 7, 6)
    assert tables.tables["caption_quality"] == [
        {"approach": "curated", "items": 6, "good_1plus": 1.0, "good_2plus": 4 / 6, "good_3": 2 / 6}
    ]


def test_bad_rows_are_counted_and_left_out():
    tasks = task_set("caption_quality", [caption_item(n) for n in range(2)])
    good = rows({"curated-0": ["GOOD"] * 3, "curated-1": ["BAD"] * 3})
    bad = [
        {"rater": "r0", "item_id": "curated-0", "answer": "BAD"},  # a second answer
        {"rater": "r9", "item_id": "no-such-item", "answer": "GOOD"},
        {"rater": "r8", "item_id": "curated-1", "answer": "maybe"},
        {"rater": "", "item_id": "curated-1", "answer": "GOOD"},
    ]
    tables = human_tables(tasks, good + bad)
    assert tables.metrics["good_1plus"] == 0.5 and tables.metrics["fleiss_kappa"] == 1.0
    assert tables.metrics["ratings_skipped"] == 4
    assert {r["reason"]: r["ratings"] for r in tables.tables["skipped"]} == {
        "answered_twice": 1,
        "unknown_item": 1,
        "not_an_answer": 1,
        "no_rater": 1,
    }


def test_a_baseline_gets_its_own_keys():
    items = [caption_item(0, "model"), caption_item(1, "model"), caption_item(0, "baseline")]
    tasks = task_set("caption_quality", items, raters=2)
    answers = {"model-0": ["GOOD", "GOOD"], "model-1": ["GOOD", "BAD"], "baseline-0": ["BAD"] * 2}
    m = human_tables(tasks, rows(answers)).metrics
    # With two raters the keys are good_1plus and good_2 (all of them).
    assert (m["good_1plus"], m["good_2"]) == (1.0, 0.5)
    assert (m["baseline.good_1plus"], m["baseline.good_2"]) == (0.0, 0.0)


def result(rank, correct):
    return {"image_id": f"i{rank}", "image": b"jpeg", "rank": rank, "correct": correct}


def test_human_recall_beside_automatic_recall():
    # Query A: its own image at rank 2; raters take rank 1 for a match (2 of 3) and rank 2
    # (3 of 3): human R@1 hit, automatic R@1 miss, both R@5 hits.
    # Query B: its own image is not in the top 5 (shown with rank None); raters mark only it
    # (2 of 3) and one rater rank 2: no human hit, no automatic hit.
    # human R@1 = R@5 = 1/2; automatic R@1 = 0, R@5 = 1/2; the own image a match in 2 of 2.
    a = [result(2, True), result(1, False), result(3, False), result(4, False), result(5, False)]
    b = [result(1, False), result(None, True), result(2, False), result(3, False),
         result(4, False), result(5, False)]  # fmt: skip
    items = [
        {**caption_item(0, "model"), "item_id": "A", "image": None, "results": a},
        {**caption_item(1, "model"), "item_id": "B", "image": None, "results": b},
    ]
    tasks = task_set("retrieval", items)
    tasks.manifest["source"]["automatic"] = {"R@1": 0.25, "R@5": 0.6}
    answers = {"A": ["YYNNN", "YYNNN", "YNNNN"], "B": ["NYNNNN", "NYYNNN", "NNNNNN"]}
    tables = human_tables(tasks, rows(answers))
    m = tables.metrics
    assert (m["human.R@1"], m["human.R@5"]) == (0.5, 0.5)
    assert (m["automatic.R@1"], m["automatic.R@5"]) == (0.0, 0.5)
    assert (m["automatic.R@1.all"], m["automatic.R@5.all"]) == (0.25, 0.6)
    assert m["own_image_match"] == 1.0
    with pytest.raises(AnswerError, match="one Y"):
        kind("retrieval").parse("YNN", items[0])  # five images shown, three marks


def test_relevance_and_fluency_per_approach():
    # Approach A: relevance 4, 5, 3, 3 -> mean 3.75, sample std sqrt(2.75 / 3) = 0.9574;
    # fluency 5, 5, 4, 4 -> mean 4.5, std sqrt(1 / 3) = 0.5774. Approach B: relevance 1, 2
    # -> 1.5, std sqrt(0.5) = 0.7071; fluency 2, 2 -> 2, std 0.
    # Krippendorff's alpha of relevance over units [4,5], [3,3], [1,2] is 5/6 (worked by
    # hand in test_rating_agreement).
    items = [caption_item(0, "A"), caption_item(1, "A"), caption_item(0, "B")]
    tasks = task_set("zh_caption", items, raters=2)
    answers = {"A-0": ["4/5", "5/5"], "A-1": ["3/4", "3/4"], "B-0": ["1/2", "2/2"]}
    tables = human_tables(tasks, rows(answers))
    m = tables.metrics
    assert (m["A.relevance_mean"], m["A.relevance_std"]) == pytest.approx((3.75, 0.9574), abs=1e-4)
    assert (m["A.fluency_mean"], m["A.fluency_std"]) == pytest.approx((4.5, 0.5774), abs=1e-4)
    assert (m["B.relevance_mean"], m["B.relevance_std"]) == pytest.approx((1.5, 0.7071), abs=1e-4)
    assert (m["B.fluency_mean"], m["B.fluency_std"]) == (2.0, 0.0)
    assert m["krippendorff_alpha.relevance"] == pytest.approx(5 / 6)
    assert kind("zh_caption").parse(" 4/05 ", items[0]) == "4/5"
    for bad in ("4", "6/1", "0/3", "a/b", "4/5/1"):
        with pytest.raises(AnswerError):
            kind("zh_caption").parse(bad, items[0])
