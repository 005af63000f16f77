"""The Flickr30k-CN import (the fluency paper's second dataset) on a small tree written here in
the release's layout: a folder per split with ImageSets/ and TextData/seg.*.caption.txt,
BOSON-segmented sentences, the photos Flickr30k's own. The data itself is not in
../shared/data. No Ray."""

from __future__ import annotations

import io
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from PIL import Image

from conceptual.jobs import import_flickr30k_cn
from conceptual.records import CURATED_LANGUAGE

SENTENCES = {
    "flickr30kzhbbosontrain": (
        "zhb",
        ["1000092795"],
        [
            "1000092795#zhb#0 两 个 年轻 的 男子 在 户外 散步 。",
            "1000092795#zhb#1 两 个 男人 在 院子 里 ， 看 着 手机",
            "2000000001#zhb#0 这张 照片 不在 文件夹 里 。",  # a photo not in --images
            "1000092795 没有 标签",  # malformed_row
        ],
    ),
    "flickr30kzhbbosonval": (
        "zhb",
        ["10002456"],
        ["10002456#zhb#0 几 名 工人 在 一 座 建筑 上 工作 。", "1000092795#zhb#4 不在 此 划分 。"],
    ),
    "flickr30kzhmbosontest": (
        "zhm",
        ["1000268201"],
        ["1000268201#zhm#0 一个 穿着 粉色 衣服 的 小女孩 。"],
    ),
}


def jpeg(colour: str) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (40, 30), colour).save(out, format="JPEG")
    return out.getvalue()


@pytest.fixture
def release(tmp_path) -> tuple[Path, Path]:
    images, cn = tmp_path / "flickr30k-images", tmp_path / "flickr30k-cn"
    images.mkdir()
    for image_id, colour in [("1000092795", "red"), ("10002456", "blue"), ("1000268201", "pink")]:
        (images / f"{image_id}.jpg").write_bytes(jpeg(colour))
    for folder, (_, ids, lines) in SENTENCES.items():
        (cn / folder / "ImageSets").mkdir(parents=True)
        (cn / folder / "TextData").mkdir()
        (cn / folder / "ImageSets" / f"{folder}.txt").write_text("\n".join(ids) + "\n")
        text = cn / folder / "TextData" / f"seg.{folder}.caption.txt"
        text.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return images, cn


def test_the_released_layout_imports_with_its_splits_and_words(release, tmp_path, capsys):
    images, cn = release
    out = tmp_path / "out"
    argv = ["--images", str(images), "--cn", str(cn), "--output", str(out)]
    assert import_flickr30k_cn.main(argv) == 0
    printed = capsys.readouterr().out
    assert "flickr30kzhmbosontest (human)" in printed

    table = pq.read_table(out / "curated")
    assert table.schema == CURATED_LANGUAGE
    rows = {row["alt_text"]: row for row in table.drop(["image"]).to_pylist()}
    walk = rows["两 个 年轻 的 男子 在 户外 散步 。"]
    # BOSON's words kept, punctuation dropped; the sentence unsegmented in `text`
    assert walk["caption"] == "两 个 年轻 的 男子 在 户外 散步"
    assert (walk["text"], walk["language"], walk["source"]) == (
        "两个年轻的男子在户外散步。",
        "zh",
        "baidu",
    )
    assert walk["split"] == "train" and walk["image_url"] == "flickr30k-images/1000092795.jpg"
    assert (
        rows["两 个 男人 在 院子 里 ， 看 着 手机"]["caption"] == "两 个 男人 在 院子 里 看 着 手机"
    )
    girl = rows["一个 穿着 粉色 衣服 的 小女孩 。"]
    assert (girl["split"], girl["source"]) == ("test", "human")
    assert rows["几 名 工人 在 一 座 建筑 上 工作 。"]["split"] == "val"

    report = import_flickr30k_cn.import_flickr30k_cn(images, cn, str(tmp_path / "again"))
    assert report["captions"] == 4
    skipped = {reason: n for reason, n in report["skipped_by_reason"].items() if n}
    # the val line of a train photo: the release's splits decide
    assert skipped == {"malformed_row": 1, "outside_split": 1}
    assert report["flickr30k_cn"]["splits"]["train"]["lines_of_other_images"] == 1
    assert report["flickr30k_cn"]["absent_folders"] == []


def test_a_release_of_the_test_folder_alone_imports_and_says_what_is_absent(release, tmp_path):
    images, cn = release
    for folder in ("flickr30kzhbbosontrain", "flickr30kzhbbosonval"):
        for path in sorted((cn / folder).rglob("*"), reverse=True):
            path.unlink() if path.is_file() else path.rmdir()
        (cn / folder).rmdir()
    report = import_flickr30k_cn.import_flickr30k_cn(images, cn, str(tmp_path / "out"))
    assert report["splits"] == {"test": {"images": 1, "captions": 1}}
    assert report["flickr30k_cn"]["absent_folders"] == [
        "flickr30kzhbbosontrain",
        "flickr30kzhbbosonval",
    ]


def test_a_folder_that_is_not_the_release_is_refused(tmp_path, capsys):
    (tmp_path / "images").mkdir()
    (tmp_path / "cn").mkdir()
    argv = ["--images", str(tmp_path / "images"), "--cn", str(tmp_path / "cn")]
    assert import_flickr30k_cn.main([*argv, "--output", str(tmp_path / "out")]) == 2
    assert "holds none of Flickr30k-CN's folders" in capsys.readouterr().err
