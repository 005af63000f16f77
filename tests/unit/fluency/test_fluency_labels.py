"""The derived fluency labels (conceptual.fluency.labels): chrF on constructed sentences, the
labelled pairs of a tiny Flickr8k-CN folder, the split by photo, and the four views."""

from __future__ import annotations

from pathlib import Path

import pytest

from conceptual.fluency.labels import THRESHOLD, chrf, labelled_pairs
from conceptual.fluency.views import sentence_views
from conceptual.importers import ImportSourceError
from conceptual.splits import SplitConfig

HUMAN = [
    "a.jpg#zhm#0 一只狗在草地上跑。",
    "a.jpg#zhm#1 两个孩子在公园里踢足球。",
    "b.jpg#zhm#0 一个男人在骑自行车。",
    "c.jpg#zhm#0 没有英文原句的句子。",  # no English: no pair
    "not a line",  # malformed: skipped
]
ENGLISH = [
    "a.jpg#enc#0 A dog runs on the grass .",
    "a.jpg#enc#1 Two children play soccer in a park .",
    "b.jpg#enc#0 A man rides a bike .",
]
BAIDU = [
    "a.jpg#zhb#0 一只狗在草地上跑。",  # as the human wrote it
    "a.jpg#zhb#1 两个孩子在公园踢足球",  # one character and the full stop fewer
    "b.jpg#zhb#0 一个男人骑自行车。",
    "c.jpg#zhb#0 没有英文原句的句子。",
]
GOOGLE = [
    "a.jpg#zhg#0 狗草地运行在一只上。",  # scrambled
    "b.jpg#zhg#0 男子自行车乘坐一个。",
    # a.jpg#1 has no Google translation: one pair fewer
]


@pytest.fixture
def cn_dir(tmp_path) -> Path:
    for name, lines in [
        ("flickr8kzhmtest.captions.txt", HUMAN),
        ("flickr8kenc.caption.txt", ENGLISH),
        ("flickr8kzhb.caption.txt", BAIDU),
        ("flickr8kzhg.caption.txt", GOOGLE),
    ]:
        (tmp_path / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tmp_path


def test_chrf_compares_characters_not_spaces_or_punctuation():
    assert chrf("一只狗在草地上跑。", "一只狗在草地上跑") == 1.0
    assert chrf("一只狗 在 草地上跑!", "一只狗在草地上跑。") == 1.0
    assert chrf("猫猫猫", "一只狗在草地上跑。") == 0.0
    assert chrf("。", "一只狗") == 0.0  # nothing to compare
    # The same characters in another order share the unigrams only.
    scrambled = chrf("跑上地草在狗只一", "一只狗在草地上跑")
    assert 0 < scrambled < 0.25
    # Recall weighs more than precision (beta 2): leaving words out costs more than adding.
    shorter = chrf("一只狗在跑", "一只狗在草地上跑")
    longer = chrf("一只黑色的狗在草地上跑", "一只狗在草地上跑")
    assert 0 < shorter < longer < 1


def test_the_examples_of_the_docstring_fall_on_their_side_of_the_threshold():
    assert chrf("两只熊彼此裸牙。", "两只熊彼此展示着牙。") < THRESHOLD
    assert chrf("两个男孩在外就餐popscicles。", "两个男孩在外面吃冰棍。") < THRESHOLD
    assert chrf("相机聚焦于人的双腿。", "相机聚焦于两个人的双腿上。") >= THRESHOLD
    assert chrf("三个女孩在沙滩上玩。", "三个女孩在玩沙子。") >= THRESHOLD


def test_each_machine_translation_of_a_human_translated_sentence_is_labelled(cn_dir):
    pairs = labelled_pairs(cn_dir)
    got = {(p.image, p.n, p.source): p for p in pairs}
    assert set(got) == {
        ("a.jpg", 0, "baidu"),
        ("a.jpg", 0, "google"),
        ("a.jpg", 1, "baidu"),
        ("b.jpg", 0, "baidu"),
        ("b.jpg", 0, "google"),
    }
    same = got["a.jpg", 0, "baidu"]
    assert (same.agreement, same.fluent) == (1.0, True)
    assert same.original == "A dog runs on the grass ." and same.reference == "一只狗在草地上跑。"
    assert got["a.jpg", 1, "baidu"].fluent and not got["a.jpg", 0, "google"].fluent
    assert not got["b.jpg", 0, "google"].fluent
    # The threshold decides: the same agreement, another label.
    strict = {(p.image, p.n, p.source): p.fluent for p in labelled_pairs(cn_dir, threshold=0.99)}
    assert strict["a.jpg", 0, "baidu"] and not strict["a.jpg", 1, "baidu"]


def test_a_missing_file_is_an_import_source_error(cn_dir):
    (cn_dir / "flickr8kzhg.caption.txt").unlink()
    with pytest.raises(ImportSourceError, match="flickr8kzhg"):
        labelled_pairs(cn_dir)
    with pytest.raises(ImportSourceError, match="no such folder"):
        labelled_pairs(cn_dir / "elsewhere")


def test_a_photos_pairs_are_all_in_one_split(cn_dir):
    from conceptual.pipelines.families.fluency.train_fluency import split_pairs

    pairs = labelled_pairs(cn_dir) * 3
    split = split_pairs(pairs, SplitConfig(train=0.5, val=0.25, test=0.25))
    sides = {}
    for name, members in split.items():
        for pair in members:
            sides.setdefault(pair.image, set()).add(name)
    assert all(len(names) == 1 for names in sides.values())
    assert sum(map(len, split.values())) == len(pairs)


def test_views_of_pairs_with_and_without_a_source():
    views = sentence_views(
        ["一只狗在草地上跑。", "一只狗在草地上跑。", None, "  "],
        ["A dog runs on the grass .", None, "A cat sleeps .", None],
    )
    assert views["zh_words"] == ["一只 狗 在 草地 上 跑 。", "一只 狗 在 草地 上 跑 。", None, None]
    assert views["zh_pos"][0].split() == ["m", "n", "p", "n", "f", "v", "x"]
    assert views["en_words"] == ["A dog runs on the grass .", None, "A cat sleeps .", None]
    assert views["en_pos"][0].split()[:3] == ["DT", "NN", "VBZ"]
    assert views["en_pos"][1] is None and views["zh_pos"][2] is None
    # Without sources at all, the English views are all missing.
    assert sentence_views(["一只猫。"])["en_words"] == [None]
    with pytest.raises(ValueError, match="2 Chinese sentences but 1 English"):
        sentence_views(["一", "二"], ["one"])
