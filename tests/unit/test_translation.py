"""The offline translator: exact lookup of Flickr8k-CN's provided translations (normalized
English), the most frequent translation of a repeated sentence, and the nearest sentence's
translation by TF-IDF cosine."""

from __future__ import annotations

from pathlib import Path

import pytest

from conceptual.fluency.translation import ProvidedTranslations, Translator, english_key

ENGLISH = """\
a.jpg#enc#0 A dog runs on the grass .
a.jpg#enc#1 A black dog is swimming in a lake .
b.jpg#enc#0 A dog runs on the grass .
b.jpg#enc#1 Two children play soccer in a park .
c.jpg#enc#0 A dog runs on the grass .
c.jpg#enc#1 A girl 's red kite flies over the beach .
"""
BAIDU = """\
a.jpg#zhb#0 一只狗在草地上跑。
a.jpg#zhb#1 一只黑狗在湖里游泳。
b.jpg#zhb#0 一条狗在草地上奔跑。
b.jpg#zhb#1 两个孩子在公园里踢足球。
c.jpg#zhb#0 一条狗在草地上奔跑。
c.jpg#zhb#1 一个女孩的红色风筝飞过海滩。
this line has no key
"""
GOOGLE = "a.jpg#zhg#1 一只黑色的狗在湖中游泳。\n"


@pytest.fixture
def cn_dir(tmp_path) -> Path:
    for name, text in [
        ("flickr8kenc.caption.txt", ENGLISH),
        ("flickr8kzhb.caption.txt", BAIDU),
        ("flickr8kzhg.caption.txt", GOOGLE),
    ]:
        (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path


def test_english_key_normalizes_case_spacing_and_the_final_full_stop():
    assert english_key("  A dog runs on the   grass .") == "a dog runs on the grass"
    assert english_key("A girl's red kite.") == english_key("a girl 's red kite")
    assert english_key('A "big" dog') == "a big dog"


def test_exact_lookup(cn_dir):
    translator = ProvidedTranslations(cn_dir)
    assert isinstance(translator, Translator)
    assert translator.translate(
        [
            "a dog runs on the grass",  # translated twice one way, once another: the majority
            "A BLACK dog is swimming in a lake.",
            "a girl's red kite flies over the beach",
            "two children play soccer",  # no exact match
        ]
    ) == ["一条狗在草地上奔跑。", "一只黑狗在湖里游泳。", "一个女孩的红色风筝飞过海滩。", None]
    assert translator.translate([]) == []


def test_google_source(cn_dir):
    translator = ProvidedTranslations(cn_dir, source="google")
    assert translator.translate(
        ["a black dog is swimming in a lake", "a dog runs on the grass"]
    ) == [
        "一只黑色的狗在湖中游泳。",
        None,
    ]
    with pytest.raises(ValueError, match="baidu or google"):
        ProvidedTranslations(cn_dir, source="native")


def test_nearest_returns_the_most_similar_sentences_translation(cn_dir):
    translator = ProvidedTranslations(cn_dir, nearest=True)
    assert translator.translate(
        [
            "two kids play soccer in the park",
            "a black dog swimming",
            "a dog runs on the grass",  # exact matches still win
            "zebras",  # shares no word with any sentence
        ]
    ) == ["两个孩子在公园里踢足球。", "一只黑狗在湖里游泳。", "一条狗在草地上奔跑。", None]
    key, similarity = translator.most_similar("two kids play soccer in the park")
    assert key == "two children play soccer in a park" and 0 < similarity < 1
    assert translator.most_similar("a dog runs on the grass") == pytest.approx(
        ("a dog runs on the grass", 1.0)
    )


def test_nearest_below_min_similarity_is_none(cn_dir):
    translator = ProvidedTranslations(cn_dir, nearest=True, min_similarity=0.9)
    assert translator.translate(["two kids play soccer in the park"]) == [None]
