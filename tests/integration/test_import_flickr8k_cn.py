"""The Flickr8k-CN import: a tiny Flickr8k-CN folder made here, where every line and every
photo is accounted for (a line that does not parse, a photo of no file, a photo without a
sentence of the source), and a real run on a few photos of ../shared/data. No Ray."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from PIL import Image

from conceptual.fluency.flickr8k_cn import Flickr8kCnConfig, import_flickr8k_cn
from conceptual.importers import ImportSourceError
from conceptual.models.vocab import tokenize
from conceptual.records import CURATED_LANGUAGE
from conceptual.splits import SplitConfig, assign_split

REPO = Path(__file__).resolve().parents[2]


def jpeg(color: str) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (40, 30), color).save(out, format="JPEG")
    return out.getvalue()


BAIDU = [
    "a.jpg#zhb#0 一只狗在草地上跑。",
    "a.jpg#zhb#1 一只狗在草地上跑!",  # the same words: duplicate_caption
    "a.jpg#zhb#2 。",  # no words: empty_caption
    "b.jpg#zhb#0 两个孩子在公园里踢足球。",
    "b.jpg#zhb#1 一辆ＳＵＶ停在路边 。",  # no English original
    "broken.jpg#zhb#0 一张坏图片。",  # unreadable_image
    "z.jpg#zhb#0 不在文件夹里的图片。",  # a photo not in the folder
    "this line has no key",  # malformed_row
    "a.jpg#zhg#3 另一个文件的标签。",  # malformed_row: the tag of another file
    "b.jpg#zhb#0 重复的编号。",  # malformed_row: b.jpg#0 again
    "",  # blank lines hold no sentence
]
ENGLISH = [
    "a.jpg#enc#0 A dog runs on the grass .",
    "a.jpg#enc#1 A dog is running on grass .",
    "a.jpg#enc#2 .",
    "b.jpg#enc#0 Two children play soccer in a park .",
    "broken.jpg#enc#0 A broken picture .",
    "c.jpg#enc#0 A cat sleeps .",
    "z.jpg#enc#0 Elsewhere .",
]
NATIVE = ["c.jpg#zhc#0 一只猫在睡觉。", "a.jpg#zhc#0 小狗在草地上奔跑。"]


@pytest.fixture
def dataset(tmp_path) -> tuple[Path, Path]:
    """Photos a, b, c (which only the English and native files know), broken (not an
    image), stranger (in no Flickr8k-CN file) and a hidden file; the CN folder with its
    split files: a train, b val, c test."""
    images, cn = tmp_path / "images", tmp_path / "cn"
    images.mkdir()
    cn.mkdir()
    for name, color in [("a", "red"), ("b", "blue"), ("c", "green"), ("stranger", "white")]:
        (images / f"{name}.jpg").write_bytes(jpeg(color))
    (images / "broken.jpg").write_bytes(b"not a picture")
    (images / ".DS_Store").write_bytes(b"")
    (cn / "flickr8kzhb.caption.txt").write_bytes(
        "\n".join(BAIDU).encode() + b"\nb.jpg#zhb#2 \xff\xfe\n"  # invalid_utf8
    )
    (cn / "flickr8kenc.caption.txt").write_text("\n".join(ENGLISH) + "\n", encoding="utf-8")
    (cn / "flickr8kzhc.caption.txt").write_text("\n".join(NATIVE) + "\n", encoding="utf-8")
    for split, image_id in [("train", "a"), ("val", "b"), ("test", "c")]:
        (cn / f"flickr8k{split}.txt").write_text(f"{image_id}\n")
    return images, cn


def records(output: Path) -> dict[str, dict]:
    table = pq.read_table(output / "curated")
    assert table.schema == CURATED_LANGUAGE
    return {row["alt_text"]: row for row in table.drop(["image"]).to_pylist()}


def test_every_line_and_photo_is_counted(dataset, tmp_path):
    images, cn = dataset
    report = import_flickr8k_cn(images, cn, str(tmp_path / "out"))

    assert (report["images"], report["captions"], report["input_captions"]) == (2, 3, 10)
    skipped = {reason: n for reason, n in report["skipped_by_reason"].items() if n}
    assert skipped == {
        "duplicate_caption": 1,
        "empty_caption": 1,
        "unreadable_image": 1,
        "malformed_row": 3,
        "invalid_utf8": 1,
    }
    cn_report = report["flickr8k_cn"]
    assert cn_report["lines"] == report["input_captions"] + cn_report["lines_of_other_images"]
    assert cn_report["lines_of_other_images"] == 1
    assert (cn_report["images_in_folder"], cn_report["images_with_sentences"]) == (5, 3)
    assert cn_report["images_without_sentence"] == {"no_sentence": 1, "unknown_image": 1}
    assert cn_report["images_without_sentence_listed"] == [
        {"image": "c.jpg", "reason": "no_sentence"},
        {"image": "stranger.jpg", "reason": "unknown_image"},
    ]
    assert cn_report["translations_without_original"] == 1
    assert json.loads((tmp_path / "out" / "import.json").read_text()) == report
    assert (tmp_path / "out" / "_SUCCESS").is_file()

    rows = records(tmp_path / "out")
    assert set(rows) == {"一只狗在草地上跑。", "两个孩子在公园里踢足球。", "一辆ＳＵＶ停在路边 。"}
    dog, suv = rows["一只狗在草地上跑。"], rows["一辆ＳＵＶ停在路边 。"]
    assert dog["caption"] == "一只 狗 在 草地 上 跑"
    assert (dog["language"], dog["source"], dog["text"]) == ("zh", "baidu", "一只狗在草地上跑。")
    assert dog["original"] == "A dog runs on the grass ."
    assert (suv["caption"], suv["text"], suv["original"]) == (
        "一辆 suv 停 在 路边",
        "一辆SUV停在路边。",
        None,
    )
    # The hash split of import_captions: a photo's split is the same in every language.
    a_split = assign_split((images / "a.jpg").read_bytes(), SplitConfig())
    assert dog["split"] == a_split and dog["image_url"] == "images/a.jpg"


def test_official_split_and_native_sentences(dataset, tmp_path):
    images, cn = dataset
    config = Flickr8kCnConfig(source="native", split="official")
    report = import_flickr8k_cn(images, cn, str(tmp_path / "out"), config)

    assert report["splits"] == {
        "train": {"images": 1, "captions": 1},
        "test": {"images": 1, "captions": 1},
    }
    assert report["flickr8k_cn"]["images_without_sentence"] == {
        "no_sentence": 2,  # b and broken: the English file knows them
        "unknown_image": 1,
    }
    rows = records(tmp_path / "out")
    assert rows["一只猫在睡觉。"]["split"] == "test" and rows["一只猫在睡觉。"]["original"] is None
    assert rows["小狗在草地上奔跑。"]["source"] == "native"

    # A photo in none of the split files is skipped, counted, under split=official.
    report = import_flickr8k_cn(
        images, cn, str(tmp_path / "out"), Flickr8kCnConfig(split="official")
    )
    assert report["skipped_by_reason"]["outside_split"] == 1  # broken.jpg
    assert {name: n["images"] for name, n in report["splits"].items()} == {"train": 1, "val": 1}


def test_english_captions_under_the_same_split(dataset, tmp_path):
    """source=english: the English captions, in the released style of the English imports,
    for an English captioner trained on the same photos as the Chinese ones."""
    images, cn = dataset
    config = Flickr8kCnConfig(source="english", split="official")
    import_flickr8k_cn(images, cn, str(tmp_path / "out"), config)
    rows = records(tmp_path / "out")
    runs = rows["A dog runs on the grass ."]
    assert (runs["caption"], runs["language"], runs["source"]) == (
        "a dog runs on the grass",
        "en",
        "english",
    )
    assert runs["original"] is None and runs["split"] == "train"
    assert rows["A cat sleeps ."]["split"] == "test"


def test_missing_files_are_errors(dataset, tmp_path):
    images, cn = dataset
    with pytest.raises(ImportSourceError, match="flickr8kzhmtest.captions.txt"):
        import_flickr8k_cn(images, cn, str(tmp_path / "out"), Flickr8kCnConfig(source="human"))
    (cn / "flickr8kenc.caption.txt").unlink()
    with pytest.raises(ImportSourceError, match="flickr8kenc.caption.txt"):
        import_flickr8k_cn(images, cn, str(tmp_path / "out"))  # baidu translates the English
    import_flickr8k_cn(images, cn, str(tmp_path / "out"), Flickr8kCnConfig(source="native"))
    (cn / "flickr8ktest.txt").unlink()
    with pytest.raises(ImportSourceError, match="flickr8ktest.txt"):
        config = Flickr8kCnConfig(source="native", split="official")
        import_flickr8k_cn(images, cn, str(tmp_path / "out"), config)


def test_config_refuses_two_ways_to_split():
    from conceptual.config import ConfigError, load

    with pytest.raises(ConfigError, match="split=official"):
        load(
            Flickr8kCnConfig,
            None,
            ["split=official", "splits.train=0.8", "splits.val=0.2", "splits.test=0"],
        )
    with pytest.raises(ConfigError, match="split_by"):
        load(Flickr8kCnConfig, None, ["split_by=hash"])
    with pytest.raises(ConfigError):
        load(Flickr8kCnConfig, None, ["curated=false"])


def official_splits(cn: Path) -> dict[str, str]:
    return {
        image_id: split
        for split in ("train", "val", "test")
        for image_id in (cn / f"flickr8k{split}.txt").read_text().split()
    }


def sentences(path: Path) -> dict[tuple[str, int], str]:
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        key, _, text = line.partition(" ")
        image, _, n = key.split("#")
        out[image, int(n)] = text
    return out


@pytest.mark.realdata
def test_job_on_real_photos(real_data, tmp_path):
    """Two photos of each official split and one of none, from flickr8k_mini: the job with
    the human translations (test photos only) and the official split, then Baidu's."""
    cn, mini = real_data / "flickr8k_cn", real_data / "flickr8k_mini" / "images"
    splits = official_splits(cn)
    photos = sorted(p.name for p in mini.glob("*.jpg"))
    chosen = [
        *[name for name in photos if splits.get(name[:-4]) == "train"][:2],
        *[name for name in photos if splits.get(name[:-4]) == "val"][:2],
        *[name for name in photos if splits.get(name[:-4]) == "test"][:2],
        next(name for name in photos if name[:-4] not in splits),
    ]
    images = tmp_path / "images"
    images.mkdir()
    for name in chosen:
        shutil.copy(mini / name, images / name)

    def run(*overrides: str) -> dict:
        output = tmp_path / "out"
        args = ["--images", str(images), "--cn", str(cn), "--output", str(output)]
        result = subprocess.run(
            [sys.executable, "-m", "conceptual.jobs.import_flickr8k_cn", *args, *overrides],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=300,
        )
        assert result.returncode == 0, result.stderr[-2000:]
        assert f"report:   {output / 'import.json'}" in result.stdout
        assert "prefix dict" not in result.stdout + result.stderr  # jieba stays quiet
        return json.loads((output / "import.json").read_text())

    report = run("source=human", "split=official")
    assert report["flickr8k_cn"]["images_without_sentence"] == {
        "no_sentence": 5,  # the human translations cover the test photos only
        "unknown_image": 0,
    }
    assert report["images"] == 2 and set(report["splits"]) == {"test"}

    report = run("source=baidu", "split=official")
    assert report["skipped_by_reason"]["outside_split"] == 5  # the photo in no split file
    assert {name: n["images"] for name, n in report["splits"].items()} == {
        "train": 2,
        "val": 2,
        "test": 2,
    }
    cn_report = report["flickr8k_cn"]
    assert cn_report["lines"] == 40460
    assert cn_report["lines"] == report["input_captions"] + cn_report["lines_of_other_images"]
    english = sentences(cn / "flickr8kenc.caption.txt")
    baidu = sentences(cn / "flickr8kzhb.caption.txt")
    for row in records(tmp_path / "out").values():
        name = row["image_url"].rsplit("/", 1)[1]
        [n] = [n for n in range(5) if baidu[name, n] == row["alt_text"]]
        assert row["original"] == english[name, n]
        assert row["split"] == splits[name[:-4]]
        words = tokenize(row["caption"])
        assert words and row["caption"] == " ".join(words)  # single spaces, lowercase
        assert "。" not in words and "，" not in words
