"""Recorded speech imported with its folder (Flickr8k-mini's speech_gtts/): one 16 kHz FLAC
clip per image, on the image's first caption, in the same record shape as synthesized clips."""

from __future__ import annotations

import csv
import resource
import shutil

import pyarrow.parquet as pq
from audio_bombs import id3_chain, opus  # tests/audio_bombs.py

from conceptual.importers import ImportConfig, csv_pairs, write_import
from conceptual.records import CLIP, image_id
from conceptual.speech.audio import decode
from conceptual.speech.clips import caption_fields
from conceptual.speech.human import speech_step


def small_folder(real_data, tmp_path, images: int = 3):
    source = real_data / "flickr8k_mini"
    rows = list(csv.DictReader(open(source / "captions.csv")))
    names = sorted({row["image"] for row in rows})[:images]
    folder = tmp_path / "src"
    (folder / "images").mkdir(parents=True)
    (folder / "speech_gtts").mkdir()
    with open(folder / "captions.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["image", "caption"])
        writer.writerows([r["image"], r["caption"]] for r in rows if r["image"] in names)
    for name in names:
        shutil.copy(source / "images" / name, folder / "images" / name)
    for name in names[1:]:  # the first image has no recording
        stem = name.rsplit(".", 1)[0]
        shutil.copy(source / "speech_gtts" / f"{stem}.mp3", folder / "speech_gtts")
    return folder, names


def test_recorded_clips_attach_to_each_image_first_caption(real_data, tmp_path):
    folder, names = small_folder(real_data, tmp_path)
    output = tmp_path / "out"
    report = write_import(
        csv_pairs(folder), str(output), ImportConfig(curated=True), speech_step(folder)
    )
    assert report["speech"]["clips"] == 2 and report["speech"]["missing_clip"] == 1
    clips = pq.read_table(output / "clips")
    assert clips.schema == CLIP
    curated = pq.read_table(output / "curated").to_pylist()
    first = {}
    for record in curated:
        first.setdefault(record["image_url"], record)
    for clip in clips.to_pylist():
        record = first[clip["image_url"]]
        assert (clip["caption_id"], clip["caption"]) == (record["id"], record["caption"])
        assert clip["image_id"] == image_id(record["image"])
        assert clip["source"] == clip["voice"] == "speech_gtts"
        samples, rate = decode(clip["audio"])
        assert rate == clip["sample_rate"] == 16_000 and 1 < clip["duration"] < 20


def test_a_folder_without_recordings_has_no_speech_step(tmp_path):
    assert speech_step(tmp_path) is None


def test_a_clip_that_links_outside_the_dataset_is_not_read(real_data, tmp_path):
    """The images' confinement holds for recordings too: a link in speech_gtts/ to a file
    elsewhere is counted, not read."""
    folder, names = small_folder(real_data, tmp_path)
    outside = tmp_path / "elsewhere.mp3"
    shutil.copy(folder / "speech_gtts" / f"{names[1].rsplit('.', 1)[0]}.mp3", outside)
    (folder / "speech_gtts" / f"{names[0].rsplit('.', 1)[0]}.mp3").symlink_to(outside)
    report = write_import(
        csv_pairs(folder), str(tmp_path / "out"), ImportConfig(curated=True), speech_step(folder)
    )
    assert report["speech"]["outside_dataset"] == 1 and report["speech"]["clips"] == 2


def test_recordings_are_checked_before_decoding(real_data, tmp_path):
    """A recording longer than max_seconds, or not the MP3 its name says, is counted, not
    imported (an 88 KB file decoding to a 59-minute clip was imported before)."""
    folder, names = small_folder(real_data, tmp_path)
    (folder / "speech_gtts" / f"{names[0].rsplit('.', 1)[0]}.mp3").write_bytes(opus(1))
    report = write_import(
        csv_pairs(folder),
        str(tmp_path / "out"),
        ImportConfig(curated=True),
        speech_step(folder, max_seconds=0.5),
    )
    speech = report["speech"]
    assert (speech["clips"], speech["too_long_clip"], speech["unreadable_clip"]) == (0, 2, 1)


def test_a_chain_of_id3_tags_is_an_unreadable_clip_not_a_crash(real_data, tmp_path):
    """2 MiB of chained ID3 tags named .mp3 (2.18 GB and a crash when followed by
    recursion): counted as unreadable, the other clips imported, memory barely moved."""
    folder, names = small_folder(real_data, tmp_path)
    (folder / "speech_gtts" / f"{names[0].rsplit('.', 1)[0]}.mp3").write_bytes(
        id3_chain(990, 2 << 20)
    )
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB
    report = write_import(
        csv_pairs(folder), str(tmp_path / "out"), ImportConfig(curated=True), speech_step(folder)
    )
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert (report["speech"]["clips"], report["speech"]["unreadable_clip"]) == (2, 1)
    assert grown_mb < 100, f"the process's peak grew by {grown_mb:.0f} MB"


def test_a_clip_keeps_its_records_image_id_and_hashes_the_image_only_without_one():
    record = {"id": "c", "caption": "a cup", "image": b"jpeg", "image_id": "written"}
    assert caption_fields(record)["image_id"] == "written"
    assert caption_fields({**record, "image_id": None})["image_id"] == image_id(b"jpeg")
    assert caption_fields({"id": "c", "caption": "a cup"})["image_id"] is None
