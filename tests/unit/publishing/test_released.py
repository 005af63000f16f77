"""The released Conceptual Captions as data, without Ray: the released-captions step, the
split a file says it holds, the `labeled` config's labels and the overlap rule on them,
resizing, the import's settings and input checks (pipelines/curation/released.py, candidates.py,
readers.py, vision/labels.py, vision/resize.py, jobs/import_conceptual.py)."""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from PIL import Image

from conceptual.candidates import candidate, dataset_labels, split_of_name
from conceptual.pipelines.curation.curation import per_candidate_steps, stages, steps
from conceptual.pipelines.curation.curation_config import CurationConfig, ImportConceptualConfig
from conceptual.pipelines.curation.released import (
    CAPTION_REASONS,
    ReleasedInputError,
    check_input,
    released_captions,
    resize_images,
    summary,
)
from conceptual.pipelines.dataflow.readers import _parquet_candidates, _read_ranges, plan_ranges
from conceptual.records import IN_FLIGHT, PROCESSED
from conceptual.splits import split_names
from conceptual.text.bounds import TEXT_STAGE
from conceptual.vision.fetch import Fetcher
from conceptual.vision.resize import ResizeConfig, resize_image, target_size

CAPTIONS = [
    "author : a life in photography -- in pictures",
    "actor attends the premiere of the film .",
    "  spaces kept , as released  ",
    'café — naïve résumé \'s "quoted" & <b>tagged</b>',
]


def in_flight(captions: list[str | None], **fields) -> pa.Table:
    rows = [
        {**candidate(caption, f"http://img.test/{i}.jpg"), "position": i, **fields}
        for i, caption in enumerate(captions)
    ]
    return pa.Table.from_pylist(rows, schema=IN_FLIGHT)


def jpeg(width: int, height: int, quality: int = 90) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (120, 160, 200)).save(out, "JPEG", quality=quality)
    return out.getvalue()


# --- the released-captions step -----------------------------------------------------------


def test_released_captions_are_kept_byte_for_byte():
    out = released_captions(in_flight(CAPTIONS), max_chars=500, split="validation").to_pylist()
    assert [row["caption"] for row in out] == CAPTIONS
    assert [row["caption"].encode() for row in out] == [c.encode() for c in CAPTIONS]
    for row in out:
        assert row["alt_text"] == row["caption"] and row["reason"] is None
        assert row["entities"] == [] and row["types"] == [] and row["split"] == "validation"


def test_the_configured_split_wins_else_the_file_s_is_kept():
    batch = in_flight(CAPTIONS[:2], split="train")
    assert {r["split"] for r in released_captions(batch, 500, None).to_pylist()} == {"train"}
    assert {r["split"] for r in released_captions(batch, 500, "validation").to_pylist()} == {
        "validation"
    }
    assert {r["split"] for r in released_captions(in_flight(CAPTIONS), 500, None).to_pylist()} == {
        None  # no split anywhere: the curation's hash decides (the job refuses such input)
    }


def test_only_empty_and_too_long_captions_are_rejected():
    batch = in_flight([None, "", "   ", "x" * 21, "a short one ."])
    out = released_captions(batch, max_chars=20, split="train").to_pylist()
    assert [(r["stage"], r["reason"]) for r in out] == [
        (TEXT_STAGE, "empty"),
        (TEXT_STAGE, "empty"),
        (TEXT_STAGE, "empty"),
        (TEXT_STAGE, "too_long"),
        (None, None),
    ]
    assert out[-1]["caption"] == "a short one ." and out[3]["caption"] is None


def test_a_caption_with_a_control_character_is_rejected_never_kept():
    """NUL, and the ESC and OSC sequences a terminal obeys, reached curated/ and the shards'
    .txt as released."""
    captions = ["nul \x00 here", "red \x1b[31m text", "osc \x1b]0;title\x07", "c1 \x9b1m"]
    out = released_captions(in_flight([*captions, "fine ."]), 500, "train").to_pylist()
    assert [r["reason"] for r in out] == ["control_characters"] * 4 + [None]
    assert [r["detail"] for r in out[:4]] == [
        "character U+0000", "character U+001B", "character U+001B", "character U+009B"
    ]  # fmt: skip
    assert all(r["caption"] is None for r in out[:4])


def test_a_row_the_reader_rejected_stays_rejected():
    row = {**candidate("a caption", "http://img.test/a.jpg"), "position": 0}
    row.update(stage="read", reason="malformed_row", detail="x")
    out = released_captions(pa.Table.from_pylist([row], schema=IN_FLIGHT), 500, "train")
    assert out.to_pylist()[0]["stage"] == "read" and out.to_pylist()[0]["caption"] is None
    assert out.schema == PROCESSED


# --- splits and labels as the files say ---------------------------------------------------


@pytest.mark.parametrize(
    ("path", "split"),
    [
        ("cc/Train_GCC-training.tsv", "train"),
        ("cc/Validation_GCC-1.1.0-Validation.tsv", "validation"),
        ("cc/Validation_GCC-1.1.0-Validation.tsv.gz", "validation"),
        ("hf/labeled/train-00000-of-00004.parquet", "train"),
        ("hf/unlabeled/validation-00000-of-00001.parquet", "validation"),
        ("bucket/cc/validation/part-0.parquet", "validation"),
        ("tmp/train0/in.tsv", None),
        ("cc/training.tsv", None),
        ("cc/in.tsv", None),
    ],
)
def test_the_split_a_file_name_says(path, split):
    assert split_of_name(path) == split


def test_dataset_labels_are_the_three_lists_zipped():
    labels, problem = dataset_labels(["dog", "sky"], ["/m/0bt9lr", "/m/01bqvp"], [0.97, 0.8])
    assert problem is None
    assert labels == [
        {"wnid": None, "name": "dog", "score": 0.97, "mid": "/m/0bt9lr"},
        {"wnid": None, "name": "sky", "score": 0.8, "mid": "/m/01bqvp"},
    ]
    assert dataset_labels(None, None, None) == ([], None)
    labels, problem = dataset_labels(["dog", "sky"], ["/m/0bt9lr"], [0.9, 0.8])
    assert labels == [] and problem.reason == "malformed_row" and "2, 1, 2" in problem.detail


def test_parquet_rows_carry_their_labels_and_split():
    table = pa.table(
        {
            "image_url": ["http://img.test/a.jpg", "http://img.test/b.jpg"],
            "caption": ["a dog on the beach .", "a car ."],
            "labels": [["dog", "beach"], ["car"]],
            "MIDs": [["/m/0bt9lr", "/m/0b3yr"], []],
            "confidence_scores": [[0.9, 0.7], [0.8]],
            "__position": pa.array([5 << 32, (5 << 32) + 1], pa.int64()),
        }
    )
    rows = _parquet_candidates(table, {5: "validation"}).to_pylist()
    assert [label["name"] for label in rows[0]["labels"]] == ["dog", "beach"]
    assert rows[0]["labels"][0]["mid"] == "/m/0bt9lr" and rows[0]["labels"][0]["wnid"] is None
    assert rows[0]["reason"] is None and rows[0]["split"] == "validation"
    assert rows[1]["reason"] == "malformed_row"  # one label, no MID: whose score is whose?
    # Without `splits` (curate), no split; a `split` column says it per row.
    assert {r["split"] for r in _parquet_candidates(table).to_pylist()} == {None}
    with_column = table.append_column("split", pa.array(["train", None]))
    assert [
        r["split"] for r in _parquet_candidates(with_column, {5: "validation"}).to_pylist()
    ] == [
        "train",
        "validation",
    ]


def test_a_labels_column_of_another_dataset_is_not_read_as_labels():
    table = pa.table(
        {
            "image_url": ["http://img.test/a.jpg"],
            "caption": ["a dog ."],
            "labels": [3],  # a class index, say
            "__position": pa.array([0], pa.int64()),
        }
    )
    (row,) = _parquet_candidates(table).to_pylist()
    assert row["labels"] is None and row["reason"] is None


def test_tsv_rows_carry_the_split_their_file_name_says(tmp_path):
    path = tmp_path / "Train_GCC-training.tsv"
    path.write_text("a dog on the beach .\thttp://img.test/a.jpg\n", encoding="utf-8")
    fs = pafs.LocalFileSystem()
    ranges = pa.Table.from_pylist(plan_ranges(fs, [str(path)], "auto", 1 << 20))
    assert next(_read_ranges(ranges, fs, splits=True)).to_pylist()[0]["split"] == "train"
    assert next(_read_ranges(ranges, fs)).to_pylist()[0]["split"] is None


# --- the overlap rule on the dataset's labels ---------------------------------------------


def test_dataset_labels_match_by_name_and_wordnet_terms():
    from conceptual.vision.labels import LabelMatcher, caption_nouns

    matcher = LabelMatcher()
    dog = {"wnid": None, "name": "dog", "score": 0.9, "mid": "/m/0bt9lr"}
    car = {"wnid": None, "name": "sports car", "score": 0.8, "mid": "/m/0j6n"}
    assert {"dog", "domestic dog", "canine"} <= matcher.name_terms("dog")
    assert matcher.name_terms("dog breed") == {"dog breed"}  # no synset: the name alone
    assert caption_nouns([], []) is None  # a released caption: no parse, every word may match
    assert matcher.match("a dog runs on the grass .", [dog, car], None).words == ["dog"]
    assert matcher.match("an animal on the grass", [dog], None).words == ["animal"]
    assert matcher.match("a sports car at a show", [car], None).words == ["sports car"]
    miss = matcher.match("a bowl of soup", [dog, car], None)
    assert miss.rejection.reason == "no_label_overlap" and "dog" in miss.rejection.detail
    assert matcher.match("a dog", [], None).rejection.reason == "no_labels"


def test_vision_stage_with_dataset_labels_loads_no_classifier():
    from conceptual.pipelines.curation.image_operators import VisionOperator
    from conceptual.vision.cnn import CnnConfig
    from conceptual.vision.images import ImageFilterConfig
    from conceptual.vision.labels import LabelSourceConfig, OverlapConfig

    vision = VisionOperator(
        ImageFilterConfig(),
        CnnConfig(weights="/nonexistent/weights.pth"),  # loading it would fail
        OverlapConfig(),
        LabelSourceConfig(source="dataset"),
    )
    assert not hasattr(vision, "classifier")
    labels = [{"wnid": None, "name": "dog", "score": 0.9, "mid": "/m/0bt9lr"}]
    batch = released_captions(
        in_flight(["a dog on the grass .", "a bowl of soup ."], labels=labels), 500, "train"
    )
    image = jpeg(640, 480)
    batch = batch.set_column(
        batch.schema.get_field_index("image"), "image", pa.array([image, image], pa.binary())
    )
    kept, rejected = vision(batch).to_pylist()
    assert kept["reason"] is None and kept["matched"] == ["dog"]
    assert rejected["reason"] == "no_label_overlap"
    for row in (kept, rejected):  # the row's own labels, kept (scores as float32)
        assert [(label["name"], label["mid"]) for label in row["labels"]] == [("dog", "/m/0bt9lr")]
        assert row["labels"][0]["score"] == pytest.approx(0.9)
    assert (kept["width"], kept["height"]) == (640, 480)


# --- resizing -----------------------------------------------------------------------------


def test_keep_ratio_brings_the_short_side_down_and_never_up_by_default():
    assert target_size(640, 480, ResizeConfig(short_side=256)) == (341, 256)
    assert target_size(480, 640, ResizeConfig(short_side=256)) == (256, 341)
    assert target_size(300, 200, ResizeConfig(short_side=256)) is None
    assert target_size(300, 200, ResizeConfig(short_side=256, upscale=True)) == (384, 256)
    assert target_size(640, 480, ResizeConfig()) is None


def test_resize_image_modes():
    original = jpeg(1280, 960)
    resized = resize_image(original, ResizeConfig(short_side=256), 50_000_000)
    assert resized.changed and (resized.width, resized.height) == (341, 256)
    assert Image.open(io.BytesIO(resized.data)).size == (341, 256)
    cropped = resize_image(original, ResizeConfig(short_side=256, mode="center_crop"), 10**8)
    assert (cropped.width, cropped.height) == (256, 256)
    small = jpeg(500, 420)
    kept = resize_image(small, ResizeConfig(short_side=512), 10**8)
    assert not kept.changed and kept.data == small
    reencoded = resize_image(small, ResizeConfig(reencode=True, quality=50), 10**8)
    assert (
        reencoded.changed
        and reencoded.data != small
        and (reencoded.width, reencoded.height)
        == (
            500,
            420,
        )
    )


def test_resize_step_records_the_new_size_and_image_id():
    batch = released_captions(in_flight(["a dog .", "a cat ."]), 500, "train")
    images = pa.array([jpeg(1280, 960), jpeg(1280, 960)], pa.binary())
    batch = batch.set_column(batch.schema.get_field_index("image"), "image", images)
    reasons = pa.array([None, "not_jpeg"], pa.string())
    batch = batch.set_column(batch.schema.get_field_index("reason"), "reason", reasons)
    resized, untouched = resize_images(batch, ResizeConfig(short_side=300), 10**8).to_pylist()
    assert (resized["width"], resized["height"]) == (400, 300)
    assert resized["image_id"] == hashlib.sha1(resized["image"]).hexdigest()
    assert untouched["width"] is None and untouched["image_id"] is None


# --- the import's pipeline and settings ---------------------------------------------------


def test_the_import_replaces_the_text_stages_and_keeps_the_image_stages():
    config = ImportConceptualConfig()
    # overlap and entity_frequency are off for an import: no funnel rows for them
    assert stages(config) == ("read", "text", "fetch", "image", "deduplicate")
    on = ImportConceptualConfig.model_validate({"overlap": {"enabled": True}})
    assert "overlap" in stages(on)
    first, _, vision = per_candidate_steps(config)
    assert first.operator is released_captions and first.kwargs["split"] is None
    assert vision.kwargs["labels"].source == "classifier"
    resized = ImportConceptualConfig.model_validate(
        {"released": {"split": "train"}, "image": {"resize": {"short_side": 256}}}
    )
    assert steps(resized)[0].kwargs["split"] == "train"
    assert per_candidate_steps(resized)[-1].operator is resize_images
    assert "resize" in stages(resized)
    assert "syntax" in stages(CurationConfig()) and "resize" not in stages(CurationConfig())


def test_the_import_defaults():
    config, curation = ImportConceptualConfig(), CurationConfig()
    assert config.captions == "released" and curation.captions == "curated"
    assert not config.overlap.enabled and not config.entity_frequency.enabled
    assert config.dedup.by_url and config.dedup.by_image  # kept once, as in a curation
    # The paper's image thresholds (but the aspect ratio: see ImportConceptualConfig).
    assert config.image.jpeg_only and config.image.min_side == 400
    assert config.image.model_copy(update={"max_aspect": 2.0}) == curation.image
    assert config.image.resize.short_side is None
    # No loopback or private address unless the user names it (fetch.allow_hosts=[127.0.0.1]
    # for a local mirror): the import fetches as a curation does.
    assert config.fetch == curation.fetch and not config.fetch.allow_hosts
    assert not config.fetch.allow_private
    for url in ("http://127.0.0.1/a.jpg", "http://[::1]/a.jpg", "http://localhost/a.jpg"):
        assert Fetcher(config.fetch).fetch(url).rejection.reason == "refused_address", url


def test_check_input_wants_a_split_for_every_file(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "in.tsv").write_text("a dog .\thttp://img.test/a.jpg\n")
    with pytest.raises(ReleasedInputError, match="--split"):
        check_input(str(plain), "auto", None, False)
    assert check_input(str(plain), "auto", "train", False) is None  # --split: rows get it

    released = tmp_path / "released"
    released.mkdir()
    (released / "Validation_GCC-1.1.0-Validation.tsv").write_text("a dog .\thttp://x.test/a\n")
    assert check_input(str(released), "auto", None, False) == "validation"
    pq.write_table(
        pa.table({"image_url": ["http://x.test/b"], "caption": ["a cat ."]}),
        released / "train-00000-of-00001.parquet",
    )
    assert check_input(str(released), "auto", None, False) is None  # mixed: per file
    with pytest.raises(ReleasedInputError, match="labels.source=dataset"):
        check_input(str(released), "auto", None, True)


def test_summary_says_fetched_gone_filtered_and_kept():
    stats = {
        "input": 20,
        "kept": 15,
        "rejected": {
            "text": {"empty": 1},
            "fetch": {"http_status": 3, "not_an_image": 1},
            "image": {"too_small": 0},
        },
        "funnel": [],
    }
    assert summary(stats) == (
        "released: 20 rows: fetched 15, gone 4 (http_status 3, not_an_image 1), "
        "filtered 0, kept 15; not fetched 1 (empty 1)"
    )


def test_split_names_take_val_and_validation_as_one():
    assert split_names("val") == ["val", "validation"]
    assert split_names("validation") == ["validation", "val"]
    assert split_names("train") == ["train"]


def test_job_help_and_a_bad_split_answer_at_once():
    job = [sys.executable, "-m", "conceptual.jobs.import_conceptual"]
    shown = subprocess.run([*job, "--help"], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and "--split {train,validation}" in shown.stdout
    bad = subprocess.run(
        [*job, "--input", "x", "--output", "y", "--split", "val"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


def test_names_kept_apart_to_stay_light_agree():
    from conceptual.candidates import RELEASED_SPLITS
    from conceptual.jobs import import_conceptual
    from conceptual.text.curate import TEXT_REASONS

    assert import_conceptual.SPLITS == RELEASED_SPLITS
    assert set(CAPTION_REASONS) <= set(TEXT_REASONS)
