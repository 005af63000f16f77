"""Chinese text: normalization, jieba's segmentation and POS tags of known sentences, captions
as the captioner's whitespace tokenizer reads them, and one lazily loaded tokenizer."""

from __future__ import annotations

import threading

import pytest

from conceptual.models.vocab import tokenize
from conceptual.text import chinese
from conceptual.text.chinese import (
    characters,
    normalize,
    pos_tags,
    segment,
    tokens_for_captioning,
)


# Full-width letters fold to ASCII, full-width punctuation stays, ASCII marks by Chinese become
# full-width, spaces by Chinese go (they separate no words), Latin words and numbers keep theirs.
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("一个小女孩在玩。", "一个小女孩在玩。"),
        ("一个男人骑着ＳＵＶ，在路上", "一个男人骑着SUV，在路上"),
        ("足球运动员＃２５", "足球运动员＃25"),
        ("一个男人,在路上.", "一个男人，在路上。"),
        ("  穿着运动服的\u3000男人 。 ", "穿着运动服的男人。"),
        ("一个\u200b男人在Hello   Kitty 气球旁", "一个男人在Hello Kitty气球旁"),
        ("一个s.c.u.b.a.潜水员 , 2.5米", "一个s.c.u.b.a.潜水员，2.5米"),
    ],
)
def test_normalize(text, expected):
    assert normalize(text) == expected
    assert normalize(expected) == expected


def test_segment_known_sentences():
    assert segment("一个小女孩在玩。") == ["一个", "小女孩", "在", "玩", "。"]
    assert segment("一只黑狗和一只白狗在草地上玩耍。") == [
        *["一只", "黑狗", "和", "一只", "白狗", "在", "草地", "上", "玩耍", "。"]
    ]
    assert segment("一个男人骑着ＳＵＶ ，在路上") == [
        "一个",
        "男人",
        "骑着",
        "SUV",
        "，",
        "在",
        "路上",
    ]
    assert segment("") == [] and segment("  ") == []


def test_pos_tags_known_sentence():
    assert pos_tags("一个男人骑着自行车。") == [
        ("一个", "m"),
        ("男人", "n"),
        ("骑", "v"),
        ("着", "uz"),
        ("自行车", "n"),
        ("。", "x"),
    ]


def test_tokens_for_captioning_drops_punctuation_and_lowercases():
    assert tokens_for_captioning("一个小女孩在玩。") == "一个 小女孩 在 玩"
    assert tokens_for_captioning("“一个”男人，骑着ＳＵＶ！") == "一个 男人 骑着 suv"
    assert tokens_for_captioning("足球运动员# 25特写。") == "足球 运动员 25 特写"
    assert tokens_for_captioning("。，！") == ""
    caption = tokens_for_captioning("一只黑狗和一只白狗在草地上玩耍。")
    assert tokenize(caption) == [
        w for w in segment("一只黑狗和一只白狗在草地上玩耍。") if w != "。"
    ]


def test_one_tokenizer_per_process_loaded_lazily_and_quietly(monkeypatch, tmp_path, capfd):
    # A fresh process's state: nothing loaded, the state directory elsewhere.
    monkeypatch.setattr(chinese, "_pos_tokenizer", None)
    monkeypatch.setenv("CONCEPTUAL_HOME", str(tmp_path))
    loads = []
    load = chinese._load
    monkeypatch.setattr(chinese, "_load", lambda: loads.append(1) or load())
    results = []
    threads = [
        threading.Thread(target=lambda: results.append(segment("一个小女孩在玩。")))
        for _ in range(6)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(loads) == 1
    assert results == [["一个", "小女孩", "在", "玩", "。"]] * 6
    assert [p.name for p in (tmp_path / "cache").iterdir()] == ["jieba-0.42.1.cache"]
    out, err = capfd.readouterr()
    assert out == "" and "prefix dict" not in err


def test_characters_split_han_words_and_keep_latin_runs_whole():
    assert characters("一个 小女孩 穿着 T恤") == "一 个 小 女 孩 穿 着 T 恤"
    assert characters("两只 狗 和 SUV 2 辆") == "两 只 狗 和 SUV 2 辆"
    assert characters("") == ""
