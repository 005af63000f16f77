import os
import shutil
from pathlib import Path

import pytest

from conceptual import metrics
from conceptual.metrics import caption_scores, coco_tokenize

needs_java = pytest.mark.skipif(shutil.which("java") is None, reason="no java on PATH")
WITHOUT_JAVA = ("BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4", "ROUGE-L", "CIDEr")

REFS = {
    0: ["a dog runs on the beach", "A dog is running on sand ."],
    1: ["a man rides a red bike"],
    2: ["two cats sleep on a sofa"],
}


def java_children() -> list[int]:
    """Ids of Java processes this test process started and that are still running."""
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            name, fields = stat.read_text().rsplit(")", 1)  # "pid (name", " state ppid ..."
        except OSError:
            continue  # the process ended while we looked
        if int(fields.split()[1]) == os.getpid() and "java" in name:
            children.append(int(stat.parent.name))
    return children


def test_coco_tokenize_matches_the_ptb_tokenizer_on_plain_captions():
    assert coco_tokenize("A dog's ball , isn't it ?") == "a dog 's ball is n't it"
    assert coco_tokenize('He said "hi" -- twice...') == "he said hi twice"
    assert coco_tokenize("a t-shirt and 3.5 e-mails") == "a t-shirt and 3.5 e-mails"


def test_identical_captions_score_perfectly_and_unrelated_ones_do_not():
    same = caption_scores({k: v[0] for k, v in REFS.items()}, REFS, metrics=WITHOUT_JAVA)
    assert same["BLEU-4"] == pytest.approx(1.0, abs=1e-6) and same["ROUGE-L"] == pytest.approx(1.0)
    assert same["CIDEr"] > 5  # CIDEr-D of exact matches is 10 before the length penalty
    assert same["count"] == 3 and same["unavailable"] == {}
    other = caption_scores(
        {0: "a man rides a red bike", 1: "two cats sleep on a sofa", 2: "a dog runs on the beach"},
        REFS,
        metrics=WITHOUT_JAVA,
    )
    assert other["CIDEr"] < 0.5 and other["BLEU-4"] < same["BLEU-4"]


def test_punctuation_and_case_do_not_change_scores():
    plain = caption_scores({0: "a dog runs"}, {0: ["a dog runs on sand"]}, metrics=WITHOUT_JAVA)
    noisy = caption_scores({0: "A dog runs !"}, {0: ["A dog runs on sand ."]}, metrics=WITHOUT_JAVA)
    assert noisy == plain


@needs_java
def test_meteor_runs_on_java_and_leaves_no_java_process():
    scores = caption_scores({k: v[0] for k, v in REFS.items()}, REFS, metrics=("METEOR",))
    assert scores["METEOR"] == pytest.approx(1.0, abs=1e-3) and scores["unavailable"] == {}
    assert java_children() == []


@needs_java
def test_meteor_process_stops_when_scoring_fails(monkeypatch):
    from pycocoevalcap.meteor.meteor import Meteor

    def fail_holding_the_lock(self, gts, res):
        self.lock.acquire()  # as pycocoevalcap's compute_score does when a line fails to parse
        raise ValueError("broken METEOR output")

    monkeypatch.setattr(Meteor, "compute_score", fail_holding_the_lock)
    with pytest.raises(ValueError, match="broken"):
        caption_scores({0: "a dog"}, {0: ["a dog"]}, metrics=("METEOR",))
    assert java_children() == []


def test_without_java_meteor_and_spice_are_unavailable_not_faked(monkeypatch):
    monkeypatch.setattr(metrics, "find_java", lambda: None)
    scores = caption_scores({0: "a dog"}, {0: ["a dog"]})
    assert scores["METEOR"] is None and scores["SPICE"] is None
    assert "Java" in scores["unavailable"]["METEOR"] and "Java" in scores["unavailable"]["SPICE"]
    assert scores["CIDEr"] >= 0 and scores["count"] == 1


def test_spice_without_its_corenlp_jars_is_unavailable_and_never_downloads(monkeypatch):
    monkeypatch.setattr(metrics, "find_java", lambda: "/usr/bin/java")
    monkeypatch.setattr(metrics, "spice_missing_jars", lambda: [Path("/x/lib/corenlp.jar")])
    monkeypatch.setattr(metrics, "_spice_score", pytest.fail)
    scores = caption_scores({0: "a dog"}, {0: ["a dog"]}, metrics=("SPICE",))
    assert scores["SPICE"] is None
    assert "corenlp.jar" in scores["unavailable"]["SPICE"]


def test_empty_hypothesis_scores_zero_not_an_error():
    scores = caption_scores({0: ""}, {0: ["a dog"]}, metrics=("BLEU-1", "CIDEr"))
    assert scores == {
        "BLEU-1": pytest.approx(0.0, abs=1e-6),
        "CIDEr": 0.0,
        "count": 1,
        "unavailable": {},
    }


def test_mismatched_ids_unknown_metrics_and_empty_sets_are_errors():
    with pytest.raises(ValueError, match="same ids"):
        caption_scores({0: "a"}, {1: ["a"]})
    with pytest.raises(ValueError, match="unknown"):
        caption_scores({0: "a"}, {0: ["a"]}, metrics=("WMD",))
    with pytest.raises(ValueError, match="no captions"):
        caption_scores({}, {})
