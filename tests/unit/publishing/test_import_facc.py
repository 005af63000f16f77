"""The Flickr Audio Caption Corpus with its Flickr8k photos, in the releases' layout, made
here from Flickr8k-mini (photos, captions, gTTS clips decoded to WAV): five human clips per
photo on curated records in the official splits, and every hostile line counted, none fatal."""

from __future__ import annotations

import csv
import json
import shutil
from collections import Counter

import pyarrow.parquet as pq
import pytest
import soundfile

from conceptual.importers import ImportConfig, released_style
from conceptual.jobs import import_facc as job
from conceptual.records import CLIP_RECORDED, image_id
from conceptual.speech.audio import decode
from conceptual.speech.facc import flickr8k_captions, import_facc

SPLIT_OF = ["train", "train", "train", "dev", "test"]  # the photos' official splits, in order


@pytest.fixture(scope="module")
def releases(real_data, tmp_path_factory):
    """(FACC folder, Flickr8k folder, photo names): five photos, five captions and five WAVs
    of each, the first photo's clips spoken by speaker 7; a sixth photo in no split file."""
    source = real_data / "flickr8k_mini"
    rows = list(csv.DictReader(open(source / "captions.csv")))
    names = sorted({row["image"] for row in rows})[:6]
    root = tmp_path_factory.mktemp("releases")
    flickr, facc = root / "Flickr8k", root / "FACC"
    (flickr / "Flicker8k_Dataset").mkdir(parents=True)
    (facc / "wavs").mkdir(parents=True)
    tokens, wav2capt, wav2spk = [], [], []
    for name in names:
        shutil.copy(source / "images" / name, flickr / "Flicker8k_Dataset" / name)
        stem = name.rsplit(".", 1)[0]
        samples, rate = soundfile.read(source / "speech_gtts" / f"{stem}.mp3", dtype="float32")
        captions = [row["caption"] for row in rows if row["image"] == name][:5]
        for n, caption in enumerate(captions):
            tokens.append(f"{name}#{n}\t{caption}")
            wav = f"{stem}_{n}.wav"
            # Each reading a little different: as many people reading the same caption.
            soundfile.write(facc / "wavs" / wav, samples[: len(samples) - n * 800], rate)
            wav2capt.append(f"{wav} {name} #{n}")
            wav2spk.append(f"{wav} {7 if name == names[0] else 100 + n}")
    for split, kind in (("train", "train"), ("dev", "dev"), ("test", "test")):
        listed = [name for name, s in zip(names, SPLIT_OF) if s == split]
        (flickr / f"Flickr_8k.{kind}Images.txt").write_text("\n".join(listed) + "\n")
    (flickr / "Flickr8k.token.txt").write_text("\n".join(tokens) + "\n")
    (facc / "wav2capt.txt").write_text("\n".join(wav2capt) + "\n")
    (facc / "wav2spk.txt").write_text("\n".join(wav2spk) + "\n")
    return facc, flickr, names


def test_five_clips_per_photo_on_curated_records_in_the_official_splits(releases, tmp_path):
    facc, flickr, names = releases
    out = tmp_path / "out"
    report = import_facc(facc, flickr, str(out), ImportConfig(curated=True))
    assert report["images"] == 5 and report["captions"] == 25
    assert report["skipped_by_reason"]["outside_split"] == 5  # the sixth photo's captions
    assert report["splits"] == {
        "train": {"images": 3, "captions": 15},
        "val": {"images": 1, "captions": 5},
        "test": {"images": 1, "captions": 5},
    }
    speech = report["speech"]
    assert speech["clips"] == 25 and speech["images_by_clips"] == {"5": 5}
    assert speech["unknown_caption"] == 5  # the sixth photo's recordings have no record
    assert speech["speakers"] == 6
    assert json.loads((out / "import.json").read_text()) == report

    records = {r["id"]: r for r in pq.read_table(out / "curated").to_pylist()}
    clips = pq.read_table(out / "clips")
    assert clips.schema == CLIP_RECORDED
    tokens = dict(
        line.split("\t") for line in (flickr / "Flickr8k.token.txt").read_text().splitlines()
    )
    for clip in clips.to_pylist():
        record = records[clip["caption_id"]]
        name = record["image_url"].rsplit("/", 1)[1]
        assert record["image_url"] == f"Flicker8k_Dataset/{name}"
        # The clip speaks caption N of its photo, and sits in the photo's split.
        assert record["caption"] == clip["caption"]
        assert released_style(tokens[f"{name}#{clip['caption_index']}"]) == clip["caption"]
        assert clip["image_id"] == image_id(record["image"])
        official = SPLIT_OF[names.index(name)]
        assert clip["split"] == record["split"] == {"dev": "val"}.get(official, official)
        assert clip["source"] == clip["voice"] == "facc"
        assert clip["speaker"] == ("7" if name == names[0] else f"{100 + clip['caption_index']}")
        samples, rate = decode(clip["audio"])
        assert rate == 16_000 and abs(len(samples) / rate - clip["duration"]) < 1e-3


def test_hostile_lines_are_counted_by_reason_and_end_nothing(releases, tmp_path):
    facc_src, flickr_src, names = releases
    facc, flickr = tmp_path / "FACC", tmp_path / "Flickr8k"
    shutil.copytree(facc_src, facc)
    shutil.copytree(flickr_src, flickr)
    (tmp_path / "secret.wav").write_bytes((facc / "wavs" / next(iter(wavs(facc)))).read_bytes())
    (facc / "wavs" / "link.wav").symlink_to(tmp_path / "secret.wav")  # leads out of wavs/
    stem, other = (name.rsplit(".", 1)[0] for name in names[:2])
    (facc / "wavs" / f"{other}_0.wav").write_bytes(b"RIFF\x00\x00\x00\x00WAVEnot audio at all")
    with open(facc / "wav2capt.txt", "a") as f:
        f.write(
            f"gone.wav {names[0]} #0\n"  # a recording the folder lacks (and a repeat caption)
            f"{stem}_0.wav {names[0]} #0\n"  # the same line twice
            f"../secret.wav {names[0]} #1\n"
            f"link.wav {names[0]} #2\n"
            f"/etc/passwd {names[0]} #3\n"
            f"x.wav {names[0]} #one\n"
            f"x.wav {names[0]} #9\n"  # no caption 9
            "just-one-field\n"
            "\n"
        )
    with open(flickr / "Flickr8k.token.txt", "a") as f:
        f.write(
            "no tab here\n"
            "../../etc/passwd#0\ta caption of a file outside\n"
            f"{names[0]}#0\ta repeat of a line\n"
        )
    (flickr / "Flickr_8k.trainImages.txt").write_text(
        "\n".join([*names[:3], "../../etc/passwd"]) + "\n"
    )
    # Through the job, as a user runs it: every line accounted for, exit 0.
    out = tmp_path / "out"
    code = job.main(["--folder", str(facc), "--flickr8k", str(flickr), "--output", str(out)])
    assert code == 0
    report = json.loads((out / "import.json").read_text())
    assert report["skipped_by_reason"]["malformed_row"] == 2
    assert report["skipped_by_reason"]["outside_dataset"] == 1
    speech = report["speech"]
    skipped = {k: speech[k] for k in Counter(r["reason"] for r in speech["skipped_clips_listed"])}
    assert skipped == {
        "unknown_caption": 6,  # the sixth photo's five, and #9
        "duplicate_clip": 2,  # gone.wav and the repeated line read captions that have clips
        "outside_dataset": 3,  # ../secret.wav, the link, /etc/passwd
        "bad_caption_index": 1,
        "unreadable_clip": 1,
        "malformed_line": 1,
    }
    assert speech["clips"] == 24  # all but the unreadable one
    assert speech["missing_clip"] == 0


def test_a_recording_the_folder_lacks_is_a_missing_clip(releases, tmp_path):
    facc_src, flickr, names = releases
    facc = tmp_path / "FACC"
    shutil.copytree(facc_src, facc)
    stem = names[2].rsplit(".", 1)[0]
    (facc / "wavs" / f"{stem}_4.wav").unlink()
    (facc / "wav2spk.txt").unlink()  # optional: clips then name no speaker
    report = import_facc(facc, flickr, str(tmp_path / "out"), ImportConfig(curated=True))
    assert report["speech"]["missing_clip"] == 1 and report["speech"]["clips"] == 24
    assert report["speech"]["images_by_clips"] == {"4": 1, "5": 4}
    clips = pq.read_table(tmp_path / "out" / "clips").to_pylist()
    assert {clip["speaker"] for clip in clips} == {None}


def test_too_long_recordings_are_not_imported(releases, tmp_path):
    facc, flickr, _ = releases
    report = import_facc(facc, flickr, str(tmp_path / "out"), ImportConfig(curated=True), 0.5)
    assert report["speech"]["clips"] == 0 and report["speech"]["too_long_clip"] == 25


def test_the_official_split_files_and_photo_folder_are_required(releases, tmp_path, capsys):
    facc, flickr_src, _ = releases
    flickr = tmp_path / "Flickr8k"
    shutil.copytree(flickr_src, flickr)
    (flickr / "Flicker8k_Dataset").rename(flickr / "images")  # the other accepted name
    assert len(flickr8k_captions(flickr).pairs) == 30
    (flickr / "Flickr_8k.devImages.txt").unlink()
    out = tmp_path / "out"
    code = job.main(["--folder", str(facc), "--flickr8k", str(flickr), "--output", str(out)])
    assert code == 2
    assert "error: no such file" in capsys.readouterr().err
    assert not (out / "_SUCCESS").exists()


def wavs(facc):
    return sorted(p.name for p in (facc / "wavs").iterdir())
