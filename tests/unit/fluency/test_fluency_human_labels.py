"""Human fluency labels (conceptual.fluency.human_labels): a fluency_label task set's answers,
two raters per sentence, kept only where they agree on FLUENT or NOT_FLUENT."""

import math

import pytest

from conceptual.fluency.human_labels import human_pairs, merged
from conceptual.fluency.labels import LabelledPair
from conceptual.rating.tables import agreed, human_tables
from conceptual.rating.tasks import AnswerError, TaskSet, kind

SENTENCES = [  # (record id, translation, English original)
    ("r1", "一只狗在草地上跑。", "A dog runs on the grass ."),
    ("r2", "狗草地运行在一只上。", "A dog runs on the grass ."),
    ("r3", "两个孩子在公园里踢足球。", "Two children play soccer in a park ."),
    ("r4", "一个男人在骑自行车。", "A man rides a bike ."),
]
ORIGINALS = {record: english for record, _, english in SENTENCES}


def task_set() -> TaskSet:
    items = [
        {"item_id": f"i{n}", "approach": "baidu", "text": text, "image": None,
         "image_id": f"photo{n}", "source_id": record, "results": None}
        for n, (record, text, _) in enumerate(SENTENCES)
    ]  # fmt: skip
    manifest = {"task_set": "fluency_label-x", "kind": "fluency_label", "raters": 2}
    return TaskSet({**manifest, "approaches": ["baidu"], "source": {"data": "d"}}, items)


# i0 both fluent, i1 both not, i2 disagree, i3 both difficult
ROWS = [
    {"rater": rater, "item_id": item, "answer": answer}
    for item, answers in {
        "i0": ("FLUENT", "fluent"),
        "i1": ("NOT_FLUENT", "not fluent"),
        "i2": ("FLUENT", "NOT_FLUENT"),
        "i3": ("DIFFICULT", "DIFFICULT"),
    }.items()
    for rater, answer in zip(("ann", "bob"), answers)
]


def test_the_answers_are_the_papers_three_grades():
    fluency_label = kind("fluency_label")
    assert fluency_label.parse(" not fluent ", {}) == "NOT_FLUENT"
    assert fluency_label.parse("difficult", {}) == "DIFFICULT"
    with pytest.raises(AnswerError, match="FLUENT, NOT_FLUENT or DIFFICULT"):
        fluency_label.parse("4/5", {})


def test_a_sentence_is_labelled_only_when_its_two_raters_agree():
    assert agreed(["FLUENT", "FLUENT"]) is True
    assert agreed(["NOT_FLUENT", "NOT_FLUENT"]) is False
    assert agreed(["FLUENT", "NOT_FLUENT"]) is None  # inconsistent: dropped
    assert agreed(["DIFFICULT", "DIFFICULT"]) is None
    assert agreed(["FLUENT"]) is None  # one rater is not two


def test_human_pairs_carry_the_english_original_and_the_agreed_label():
    pairs = human_pairs(task_set(), ROWS, ORIGINALS)
    assert [(p.text, p.original, p.fluent) for p in pairs] == [
        (SENTENCES[0][1], SENTENCES[0][2], True),
        (SENTENCES[1][1], SENTENCES[1][2], False),
    ]
    assert pairs[0].image == "photo0" and pairs[0].source == "baidu"
    assert human_pairs(task_set(), ROWS, {}) == []  # no original: no source views


def test_human_labels_replace_the_derived_label_of_the_same_sentence():
    derived = [
        LabelledPair("p", 0, "baidu", SENTENCES[0][1], SENTENCES[0][2], "ref", 0.2, False),
        LabelledPair("q", 1, "google", "别的句子。", "Another sentence .", "ref", 0.7, True),
    ]
    human = human_pairs(task_set(), ROWS, ORIGINALS)
    together = merged(derived, human)
    assert [p.fluent for p in together] == [True, True, False]
    assert together[0].image == "q" and math.isnan(together[1].agreement)


def test_rating_results_tabulates_the_agreed_labels():
    tables = human_tables(task_set(), ROWS)
    (row,) = tables.tables["fluency_label"]
    assert (row["items"], row["labelled"], row["fluent"]) == (4, 2, 0.5)
    assert tables.metrics["baidu.labelled"] == 2


def test_other_task_sets_are_refused():
    tasks = task_set()
    tasks.manifest["kind"] = "zh_caption"
    with pytest.raises(ValueError, match="fluency_label tasks"):
        human_pairs(tasks, [], ORIGINALS)
