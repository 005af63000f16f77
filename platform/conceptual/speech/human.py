"""Recorded spoken captions that come with a dataset folder, as clip records.

A folder imported by `conceptual.jobs.import_captions` may hold `speech_gtts/IMAGE_STEM.mp3`
beside `images/`: one clip per image, speaking the image's first caption (Flickr8k-mini's
layout). Each is decoded, resampled to 16 kHz, FLAC-encoded and attached to the image's
first imported record (the CSV's first caption, unless that one was skipped):

    OUTPUT/clips/part-*.parquet   records.CLIP, source "speech_gtts"

This is the "voice never heard" evaluation set: the model trains on espeak-ng's voices.
A recording is checked before it is decoded (conceptual.speech.audio.decode_checked: MP3,
8-48 kHz, at most 2 channels, at most `max_seconds`, as synthesized clips have): one that
is longer is counted as `too_long_clip`, any other refusal as `unreadable_clip`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote, urlparse

import numpy as np
import pyarrow.parquet as pq

from conceptual import storage
from conceptual.importers import PartWriter, image_in
from conceptual.records import CLIP
from conceptual.speech.audio import AudioRefused, decode_checked
from conceptual.speech.clips import imported_clip

SPEECH_FOLDER = "speech_gtts"
MAX_SECONDS = 30.0  # as synthesized clips (pipelines/features/speech.py's max_seconds)


def imported_records(output_uri: str) -> Iterator[dict[str, Any]]:
    """The records an import wrote (curated, else candidates), in order, each with a
    `caption` (a candidate's is its alt text)."""
    kind = "curated" if storage.exists(storage.join(output_uri, "curated")) else "candidates"
    fs, _ = storage.resolve(output_uri)
    for path in storage.list_files(storage.join(output_uri, kind)):
        with fs.open_input_file(path) as f:
            table = pq.read_table(f)
        for record in table.to_pylist():
            record.setdefault("caption", record.get("alt_text"))
            yield record


def first_records(output_uri: str) -> list[dict[str, Any]]:
    """The first imported record of each image (curated or candidate records), in order."""
    firsts: dict[str, dict[str, Any]] = {}
    for record in imported_records(output_uri):
        firsts.setdefault(record["image_url"], record)
    return list(firsts.values())


def image_stem(image_url: str) -> str:
    """The file name, without its suffix, of an imported image: `image_url` is its path in
    the dataset (importers.dataset_path), or a URL (a file:// URI of older imports)."""
    path = unquote(urlparse(image_url).path) if "://" in image_url else image_url
    return PurePosixPath(path).stem


def attach_speech(
    speech_dir: Path, output_uri: str, max_seconds: float = MAX_SECONDS, rows_per_part: int = 512
) -> dict[str, Any]:
    """Write a clip for each imported image that has one in `speech_dir`; count the rest."""
    clips = PartWriter(storage.join(output_uri, "clips"), CLIP, rows_per_part)
    counts = {"clips": 0, "missing_clip": 0, "unreadable_clip": 0, "too_long_clip": 0}
    counts["outside_dataset"] = 0
    for record in first_records(output_uri):
        image_name = image_stem(record["image_url"])
        mp3, outside = image_in(speech_dir, f"{image_name}.mp3")  # a link may lead elsewhere
        if outside:
            counts["outside_dataset"] += 1
            continue
        samples = read_recording(mp3, max_seconds, "audio/mpeg")
        if isinstance(samples, str):
            counts[samples] += 1
            continue
        clips.add(imported_clip(record, samples, speech_dir.name))
        counts["clips"] += 1
    clips.flush()
    return {"folder": str(speech_dir), **counts}


def read_recording(path: Path, max_seconds: float, media_type: str) -> np.ndarray | str:
    """A recording's 16 kHz samples after decode_checked, or why not, as the import counts
    it: missing_clip, too_long_clip, or unreadable_clip for any other refusal (printed)."""
    if not path.is_file():
        return "missing_clip"
    try:
        return decode_checked(path.read_bytes(), max_seconds, media_type)
    except (OSError, AudioRefused) as exc:
        print(f"speech: not imported: {path}: {getattr(exc, 'message', exc)}")
        too_long = isinstance(exc, AudioRefused) and exc.reason == "too_long"
        return "too_long_clip" if too_long else "unreadable_clip"


def speech_step(
    folder: str | Path, max_seconds: float = MAX_SECONDS
) -> Callable[[str], dict[str, Any]] | None:
    """What an import of `folder` does after writing its records, when the folder has
    recorded speech (clips of at most `max_seconds`); None when it has none."""
    speech_dir = Path(folder).expanduser() / SPEECH_FOLDER
    if not speech_dir.is_dir():
        return None
    return lambda output_uri: attach_speech(speech_dir, output_uri, max_seconds)
