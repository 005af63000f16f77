"""The fluency paper's Table 6 side by side: a zh_caption item shows every approach's
Chinese caption of one photo together, in an order drawn by the task set's seed and kept in
the item; the page grades each caption on its own (Starlette's test client; the browser
test presses the keys), and the table gives each grade to the approach of the caption in
its place. A task set written before side-by-side items still reads."""

from __future__ import annotations

import io
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from starlette.testclient import TestClient

from conceptual import storage
from conceptual.pipelines.rating.rating_tasks import side_by_side
from conceptual.rating.page import form_token, rating_app
from conceptual.rating.store import RatingStore
from conceptual.rating.tables import human_tables
from conceptual.rating.tasks import (
    ITEM,
    ITEMS,
    MANIFEST,
    AnswerError,
    kind,
    new_task_set,
    read_task_set,
)

# Each approach's caption, segmented as captions.json holds it (shown unsegmented).
CAPTIONS = {"late translation": "一个 人", "without fluency": "一个 男人",
            "rejection sampling": "一个 男人 在 跑步", "weighted loss": "一只 狗 在 草地 上"}  # fmt: skip
APPROACHES = tuple(CAPTIONS)
WRITTEN_BY = {caption.replace(" ", ""): approach for approach, caption in CAPTIONS.items()}


def items(images: int = 6) -> list[dict]:
    return [
        side_by_side(
            {"id": f"img{n}", "image_id": f"img{n}"},
            CAPTIONS,
            {f"img{n}": b"jpeg"},
        )
        for n in range(images)
    ]


def zh_tasks(seed: int, images: int = 6, raters: int = 2):
    return new_task_set("zh_caption", items(images), raters, seed, {}, random.Random(seed))


def orders(tasks) -> dict[str, list[str]]:
    return {item["item_id"]: [s["approach"] for s in item["sentences"]] for item in tasks.items}


def test_every_approach_once_an_item_in_an_order_the_seed_draws():
    a, b, c = zh_tasks(0), zh_tasks(0), zh_tasks(1)
    assert orders(a) == orders(b) and a.name == b.name  # the same seed, the same set
    assert orders(a).keys() == orders(c).keys()  # an item's id is what it shows...
    assert orders(a) != orders(c) and a.name != c.name  # ...its order is the seed's
    assert len({tuple(order) for order in orders(a).values()}) > 1  # each item its own order
    assert a.manifest["approaches"] == list(APPROACHES)  # in the source's order
    for item in a.items:
        assert sorted(orders(a)[item["item_id"]]) == sorted(APPROACHES)
        # each caption with its own approach, unsegmented
        assert all(WRITTEN_BY[s["text"]] == s["approach"] for s in item["sentences"])
    # One image: two seeds that order it differently make two task sets, so that answers
    # stored under a set's name are never read in another order.
    one = {seed: zh_tasks(seed, images=1) for seed in range(8)}
    differ = [s for s in one if orders(one[s]) != orders(one[0])]
    assert differ and one[differ[0]].name != one[0].name


# Two raters, each grading a caption by what it says (its approach's sentence).
GRADES = {
    "r0": {"late translation": "2/1", "without fluency": "3/2", "rejection sampling": "4/5",
           "weighted loss": "5/4"},
    "r1": {"late translation": "1/1", "without fluency": "3/4", "rejection sampling": "3/5",
           "weighted loss": "5/5"},
}  # fmt: skip


def answer(rater: str, item: dict) -> str:
    """The rater's answer: a grade for each caption, in the order the item shows them,
    by what the caption says."""
    return " ".join(GRADES[rater][WRITTEN_BY[s["text"]]] for s in item["sentences"])


def test_table_6_gives_each_grade_to_the_approach_shown_in_its_place():
    tasks = zh_tasks(3, images=3)
    assert any(order != list(APPROACHES) for order in orders(tasks).values())
    rows = [
        {"rater": rater, "item_id": item["item_id"], "answer": answer(rater, item)}
        for item in tasks.items
        for rater in GRADES
    ]
    tables = human_tables(tasks, rows)
    # Over 3 images: late translation's relevance 2 and 1 -> 1.5, fluency 1; without
    # fluency 3 and 3 -> 3 (std 0), fluency 2 and 4 -> 3; rejection sampling 4, 3 -> 3.5,
    # fluency 5; weighted loss 5, fluency 4 and 5 -> 4.5.
    by_approach = {row["approach"]: row for row in tables.tables["zh_caption"]}
    assert list(by_approach) == list(APPROACHES)
    expected = {"late translation": (1.5, 1.0), "without fluency": (3.0, 3.0),
                "rejection sampling": (3.5, 5.0), "weighted loss": (5.0, 4.5)}  # fmt: skip
    for approach, (relevance, fluency) in expected.items():
        row = by_approach[approach]
        assert row["items"] == 3
        assert (row["relevance_mean"], row["fluency_mean"]) == (relevance, fluency)
        assert tables.metrics[f"{approach}.relevance_mean"] == relevance
    assert tables.metrics["without fluency.relevance_std"] == 0.0
    assert tables.metrics["items_rated"] == 3 and tables.metrics["ratings_skipped"] == 0
    item = tasks.items[0]
    assert kind("zh_caption").parse(" 4/05  3/2 1/1 5/5 ", item) == "4/5 3/2 1/1 5/5"
    for wrong in ("4/5 3/2 1/1", "4/5 3/2 1/1 5/5 5/5", "4/5 3/2 1/1 6/5", "4/5"):
        with pytest.raises(AnswerError, match="for each caption in the order shown"):
            kind("zh_caption").parse(wrong, item)


def test_the_page_grades_each_caption_on_its_own(tmp_path):
    tasks = zh_tasks(0, images=1, raters=1)
    (item,) = tasks.items
    store = RatingStore(tasks, f"sqlite:///{tmp_path / 'ratings.db'}")
    client = TestClient(rating_app(store, open_raters=True, hosts=["testserver"]))
    shown = client.get("/rate/ann").text
    places = [shown.index(f"{s['text']}</div>") for s in item["sentences"]]
    assert places == sorted(places)  # in the item's order
    for n in range(len(APPROACHES)):
        for scale in ("relevance", "fluency"):
            assert shown.count(f"name='{scale}.{n}'") == 5  # its own 1-5
    assert not any(approach in shown for approach in APPROACHES)  # never shown
    csrf = form_token(store.csrf_key(), tasks.name, "ann")
    form = {"item_id": item["item_id"], "csrf": csrf}
    for n, s in enumerate(item["sentences"]):
        relevance, fluency = GRADES["r0"][s["approach"]].split("/")
        form |= {f"relevance.{n}": relevance, f"fluency.{n}": fluency}
    missing = {k: v for k, v in form.items() if k != "fluency.2"}
    refused = client.post("/rate/ann/answer", data=missing)
    assert refused.status_code == 400 and "for each caption" in refused.text
    assert client.post("/rate/ann/answer", data=form).status_code == 200  # the next page
    (stored,) = store.ratings()
    assert stored["answer"] == answer("r0", item)
    row = {r["approach"]: r for r in human_tables(tasks, [stored]).tables["zh_caption"]}
    assert row["weighted loss"]["relevance_mean"] == 5 and row["late translation"]["items"] == 1


def test_a_task_set_of_one_caption_an_item_still_reads(tmp_path):
    """Written before side-by-side items: no `sentences` column, an answer of one grade."""
    old = [
        {"item_id": f"{a}-0", "approach": a, "text": f"{a}的句子", "image": b"jpeg",
         "image_id": "img0", "source_id": "img0", "results": None}
        for a in ("A", "B")
    ]  # fmt: skip
    schema = pa.schema([f for f in ITEM if f.name != "sentences"])
    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(old, schema=schema), buffer)
    storage.write_bytes(str(tmp_path / ITEMS), buffer.getvalue())
    manifest = {"task_set": "zh_caption-old", "kind": "zh_caption", "raters": 1,
                "approaches": ["A", "B"], "source": {}}  # fmt: skip
    storage.write_json(str(tmp_path / MANIFEST), manifest)
    storage.write_json(str(tmp_path / storage.SUCCESS), {"items": 2})
    tasks = read_task_set(str(tmp_path))
    rows = [{"rater": "r0", "item_id": "A-0", "answer": "4/5"},
            {"rater": "r0", "item_id": "B-0", "answer": "2/3"}]  # fmt: skip
    table = human_tables(tasks, rows).tables["zh_caption"]
    assert [(r["approach"], r["relevance_mean"], r["fluency_mean"]) for r in table] == [
        ("A", 4, 5),
        ("B", 2, 3),
    ]
    store = RatingStore(tasks, f"sqlite:///{tmp_path / 'ratings.db'}")
    client = TestClient(rating_app(store, open_raters=True, hosts=["testserver"]))
    shown = client.get("/rate/ann").text
    assert shown.count("的句子</div>") == 1 and "name='relevance.0'" in shown


def test_the_page_takes_a_fluency_label_by_its_button(tmp_path):
    item = {"item_id": "t0", "approach": "baidu", "text": "一个男人在跑步", "image": b"jpeg",
            "image_id": "img0", "source_id": "rec0", "results": None}  # fmt: skip
    tasks = new_task_set("fluency_label", [item], 1, 0, {}, random.Random(0))
    store = RatingStore(tasks, f"sqlite:///{tmp_path / 'ratings.db'}")
    client = TestClient(rating_app(store, open_raters=True, hosts=["testserver"]))
    shown = client.get("/rate/ann").text
    assert "一个男人在跑步" in shown and "id='not-fluent'" in shown and "F: fluent" in shown
    csrf = form_token(store.csrf_key(), tasks.name, "ann")
    form = {"item_id": "t0", "csrf": csrf, "answer": "NOT_FLUENT"}
    assert client.post("/rate/ann/answer", data=form).status_code == 200
    assert [r["answer"] for r in store.ratings()] == ["NOT_FLUENT"]
