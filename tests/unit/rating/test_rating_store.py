"""The rating page's store on a real SQLite file: assignment to distinct raters, undo,
resuming after a restart, and refusals that change nothing."""

from __future__ import annotations

import random

import pytest

from conceptual.jobs import rating_page
from conceptual.pipelines.rating.rating_results import ratings
from conceptual.rating.store import RatingStore, Refused
from conceptual.rating.tables import human_tables
from conceptual.rating.tasks import new_task_set


def tasks(items: int, raters: int):
    rows = [
        {"item_id": f"item-{n}", "approach": "curated", "text": f"caption {n}", "image": b"x",
         "image_id": None, "source_id": f"r{n}", "results": None}
        for n in range(items)
    ]  # fmt: skip
    return new_task_set("caption_quality", rows, raters, 0, {"data": "d"}, random.Random(0))


def answer_all(store: RatingStore, rater: str, answer: str = "GOOD") -> list[str]:
    done = []
    while (item := store.current(rater)) is not None:
        store.answer(rater, item, answer)
        done.append(item)
    return done


def test_each_item_goes_to_its_number_of_distinct_raters(tmp_path):
    task_set = tasks(4, raters=2)
    store = RatingStore(task_set, f"sqlite:///{tmp_path / 'ratings.db'}")
    order = [item["item_id"] for item in task_set.items]
    assert answer_all(store, "ann") == order  # in the task set's order
    assert answer_all(store, "bob", "BAD") == order
    assert store.current("cat") is None  # every item has its two raters
    assert store.progress("cat").complete == 4
    assert len(store.ratings()) == 8


def test_an_item_on_screen_counts_towards_its_raters(tmp_path):
    task_set = tasks(2, raters=1)
    store = RatingStore(task_set, f"sqlite:///{tmp_path / 'ratings.db'}")
    first, second = (item["item_id"] for item in task_set.items)
    assert store.current("ann") == first
    assert store.current("ann") == first  # shown again until answered
    assert store.current("bob") == second  # ann holds the first
    assert store.current("cat") is None


def test_refused_answers_change_nothing(tmp_path):
    store = RatingStore(tasks(3, raters=2), f"sqlite:///{tmp_path / 'ratings.db'}")
    shown = store.current("ann")
    other = next(i for i in store.order if i != shown)
    cases = [
        ("no-such-item", "GOOD", 404, "no item"),
        (shown, "EXCELLENT", 400, "GOOD or BAD"),
        (other, "GOOD", 409, "not the item ann was shown"),
    ]
    for item, answer, status, message in cases:
        with pytest.raises(Refused, match=message) as refused:
            store.answer("ann", item, answer)
        assert refused.value.status == status
        assert store.ratings() == [] and store.current("ann") == shown
    assert store.answer("ann", shown, " good ") == "GOOD"
    with pytest.raises(Refused, match="already answered") as twice:
        store.answer("ann", shown, "BAD")
    assert twice.value.status == 409
    assert [(r["item_id"], r["answer"]) for r in store.ratings()] == [(shown, "GOOD")]


def test_undo_and_resume_after_a_restart(tmp_path):
    url = f"sqlite:///{tmp_path / 'ratings.db'}"
    task_set = tasks(3, raters=1)
    store = RatingStore(task_set, url)
    with pytest.raises(Refused, match="no answer to undo"):
        store.undo("ann")
    first = store.current("ann")
    store.answer("ann", first, "GOOD")
    second = store.current("ann")
    store.answer("ann", second, "BAD")
    assert store.undo("ann") == second
    assert store.current("ann") == second
    assert [r["item_id"] for r in store.ratings()] == [first]

    restarted = RatingStore(task_set, url)  # a new server process on the same database
    assert restarted.current("ann") == second
    restarted.answer("ann", second, "GOOD")
    assert [(r["item_id"], r["answer"]) for r in restarted.ratings()] == [
        (first, "GOOD"),
        (second, "GOOD"),
    ]
    assert restarted.progress("ann").answered == 2
    assert all(r["seconds"] >= 0 for r in restarted.ratings())


def test_the_tables_read_the_pages_answers(tmp_path):
    url = f"sqlite:///{tmp_path / 'ratings.db'}"
    task_set = tasks(2, raters=2)
    store = RatingStore(task_set, url)
    for rater, answer in (("ann", "GOOD"), ("bob", "BAD")):
        answer_all(store, rater, answer)
    tables = human_tables(task_set, ratings(task_set, None, url))
    assert tables.metrics["good_1plus"] == 1.0 and tables.metrics["good_2"] == 0.0
    assert [row["rater"] for row in tables.tables["raters"]] == ["ann", "bob"]
    assert all(row["median_seconds"] >= 0 for row in tables.tables["raters"])


def test_the_page_refuses_a_task_set_that_is_not_there(tmp_path, capsys):
    assert rating_page.main(["--tasks", str(tmp_path / "nothing")]) == 2
    assert "error:" in capsys.readouterr().err


def test_two_page_servers_on_one_database_never_give_an_item_too_many_answers(tmp_path):
    """Each server has its own lock (two processes did: one item got 4 answers when it wanted
    3); the database's write lock, taken as each transaction begins, orders them."""
    import threading

    url = f"sqlite:///{tmp_path / 'ratings.db'}"
    task_set = tasks(6, raters=3)
    servers = [RatingStore(task_set, url), RatingStore(task_set, url)]
    start = threading.Barrier(8)

    def rater(n: int) -> None:
        store = servers[n % 2]
        start.wait()
        answer_all(store, f"rater{n}")

    threads = [threading.Thread(target=rater, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    answers = [r["item_id"] for r in servers[0].ratings()]
    assert len(answers) == 6 * 3
    assert {answers.count(item) for item in set(answers)} == {3}


def test_an_item_given_out_again_after_its_hold_is_not_answered_twice_over(tmp_path, monkeypatch):
    """An item left on screen past HOLD_S goes to another rater; if both answer, the later
    is refused, and their page moves on."""
    from conceptual.rating import store as store_module

    store = RatingStore(tasks(2, raters=1), f"sqlite:///{tmp_path / 'ratings.db'}")
    first = store.current("ann")
    monkeypatch.setattr(store_module, "HOLD_S", -1)  # ann's hold has run out
    assert store.current("bob") == first
    store.answer("bob", first, "GOOD")
    with pytest.raises(Refused, match="has all its 1 answers"):
        store.answer("ann", first, "BAD")
    assert store.current("ann") != first


def test_an_invitation_is_a_token_kept_only_as_its_hash(tmp_path):
    url = f"sqlite:///{tmp_path / 'ratings.db'}"
    store = RatingStore(tasks(1, raters=1), url)
    token = store.invite("ann")
    assert len(token) >= 32 and store.invited(token) == "ann" and store.invited("ann") is None
    assert token.encode() not in (tmp_path / "ratings.db").read_bytes()
    again = store.invite("ann")  # a new link ends the old one
    assert store.invited(again) == "ann" and store.invited(token) is None
    assert store.invitations() == 1
    assert RatingStore(tasks(1, raters=1), url).csrf_key() == store.csrf_key()  # one per database
