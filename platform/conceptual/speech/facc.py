"""The Flickr Audio Caption Corpus (FACC) with its Flickr8k photos, as the platform's records.

FACC (Harwath & Glass 2015) is 40,000 people's readings of Flickr8k's captions, five per
photo: the human-speech set of the spoken-captions paper. Read as released:

    FACC_DIR/wavs/*.wav                  the recordings
    FACC_DIR/wav2capt.txt                `WAV IMAGE #N`: WAV reads caption N of IMAGE
    FACC_DIR/wav2spk.txt                 `WAV SPEAKER` (optional)
    FLICKR8K_DIR/Flicker8k_Dataset/      the photos (or images/)
    FLICKR8K_DIR/Flickr8k.token.txt      `IMAGE#N<TAB>caption`
    FLICKR8K_DIR/Flickr_8k.{train,dev,test}Images.txt   the official splits (dev is val)

The captions become curated records as `import_captions` writes them (importers.write_import:
a photo's five captions, its official split, skipped captions counted by reason; a photo in
no split file is `outside_split`), then each recording a clip of its caption's record
(records.CLIP_RECORDED: the clip record, its caption index and speaker), checked as every
recording is (speech.human.read_recording). A line that cannot become a clip is counted by
reason, never fatal: malformed_line, bad_caption_index, unknown_caption (no imported caption
IMAGE #N), duplicate_clip (a recording or caption already imported), outside_dataset and
invalid_file_name (a WAV name leading out of wavs/), missing_clip, unreadable_clip,
too_long_clip.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conceptual import storage
from conceptual.candidates import storable, unstorable
from conceptual.importers import (
    LISTED_SKIPS,
    ImportConfig,
    ImportSourceError,
    Pair,
    PartWriter,
    existing_dir,
    existing_file,
    grouped_pairs,
    image_in,
    summary,
    write_import,
)
from conceptual.records import CLIP_RECORDED, Rejection, candidate_id
from conceptual.speech.clips import caption_fields, imported_clip
from conceptual.speech.human import MAX_SECONDS, imported_records, read_recording

SOURCE = "facc"  # each clip's source and voice
TOKEN_FILE = "Flickr8k.token.txt"
IMAGE_FOLDERS = ("Flicker8k_Dataset", "images")  # the release's spelling, or the usual one
SPLIT_FILES = {
    "train": "Flickr_8k.trainImages.txt",
    "val": "Flickr_8k.devImages.txt",
    "test": "Flickr_8k.testImages.txt",
}
WAVS, WAV2CAPT, WAV2SPK = "wavs", "wav2capt.txt", "wav2spk.txt"
CLIP_SKIPS = (
    "malformed_line",
    "bad_caption_index",
    "unknown_caption",
    "duplicate_clip",
    "outside_dataset",
    "invalid_file_name",
    "missing_clip",
    "unreadable_clip",
    "too_long_clip",
)
TOKEN = re.compile(r"(?P<image>[^\t]+)#(?P<n>\d+)\t(?P<caption>.*)")
CAPTION_INDEX = re.compile(r"#(\d+)")


@dataclass
class Flickr8k:
    """Flickr8k's captions as pairs, and which record each `IMAGE #N` becomes."""

    pairs: list[Pair]
    # (image name, N) -> the id of its record (importers.candidate_row's, from the raw caption)
    record_ids: dict[tuple[str, int], str] = field(default_factory=dict)


def read_text(path: Path) -> list[str]:
    """The lines of a release's text file; bytes that are not UTF-8 fail their own line
    (importers.unstorable), not the file."""
    raw = path.read_bytes().removeprefix(b"\xef\xbb\xbf")
    return raw.decode("utf-8", "surrogateescape").split("\n")


def images_folder(flickr8k_dir: Path) -> Path:
    for name in IMAGE_FOLDERS:
        if (flickr8k_dir / name).is_dir():
            return flickr8k_dir / name
    raise ImportSourceError(f"no photos in {flickr8k_dir}: it needs {' or '.join(IMAGE_FOLDERS)}/")


def official_splits(flickr8k_dir: Path) -> dict[str, str]:
    """Photo file name -> "train", "val" or "test", from the release's split files."""
    splits: dict[str, str] = {}
    for split, name in SPLIT_FILES.items():
        for image in read_text(existing_file(flickr8k_dir / name)):
            if image.strip():
                splits.setdefault(image.strip(), split)
    return splits


def flickr8k_captions(flickr8k_dir: Path | str) -> Flickr8k:
    """The pairs of Flickr8k.token.txt, a photo's captions together and in its official
    split. A line that is not `IMAGE#N<TAB>caption`, or repeats an IMAGE#N, is malformed_row."""
    flickr8k_dir = existing_dir(flickr8k_dir)
    images_dir, splits = images_folder(flickr8k_dir), official_splits(flickr8k_dir)
    rows: list[tuple[int, str, str, str | None, Rejection | None]] = []
    index_of_line: dict[int, tuple[str, int]] = {}  # line number -> (image, N)
    taken: set[tuple[str, int]] = set()
    for number, line in enumerate(read_text(existing_file(flickr8k_dir / TOKEN_FILE)), 1):
        line = line.strip("\r\n ")
        if not line:
            continue
        match, problem = TOKEN.fullmatch(line), unstorable({"line": line})
        key = (match["image"].strip(), int(match["n"])) if match else None
        if problem is None and key is None:
            problem = Rejection("malformed_row", "not IMAGE#N<TAB>caption")
        elif problem is None and key in taken:
            problem = Rejection("malformed_row", f"repeats {key[0]}#{key[1]}")
        if problem:
            rows.append((number, "", storable(line), None, problem))
            continue
        taken.add(key)
        index_of_line[number] = key
        split = splits.get(key[0])
        if split is None:
            problem = Rejection("outside_split", f"{key[0]} is in no Flickr_8k.*Images.txt")
        rows.append((number, key[0], match["caption"].strip(), split, problem))
    pairs = list(grouped_pairs(rows, images_dir, TOKEN_FILE))
    record_ids = {
        index_of_line[line_number(pair)]: candidate_id(pair.image_url, pair.caption)
        for pair in pairs
        if pair.problem is None and pair.image_url
    }
    return Flickr8k(pairs, record_ids)


def line_number(pair: Pair) -> int:
    """The line of the token file a pair came from (its source_id, `FILE:LINE`)."""
    return int(pair.source_id.rpartition(":")[2])


def speakers(facc_dir: Path) -> dict[str, str]:
    """WAV -> its speaker, from wav2spk.txt when the folder has it; a line that is not
    `WAV SPEAKER` names no one."""
    path = facc_dir / WAV2SPK
    if not path.is_file():
        return {}
    named: dict[str, str] = {}
    for line in read_text(path):
        fields = line.split()
        if len(fields) == 2 and unstorable(dict(enumerate(fields))) is None:
            named.setdefault(fields[0], fields[1])
    return named


@dataclass
class ClipReport:
    """What became of wav2capt.txt's lines: the "speech" section of import.json."""

    folder: str
    counts: Counter = field(default_factory=lambda: Counter(dict.fromkeys(CLIP_SKIPS, 0)))
    listed: list[dict[str, str]] = field(default_factory=list)
    per_image: Counter = field(default_factory=Counter)  # image id -> its clips
    speakers: set[str] = field(default_factory=set)

    def skip(self, where: str, wav: str, rejection: Rejection) -> None:
        self.counts[rejection.reason] += 1
        if len(self.listed) < LISTED_SKIPS:
            self.listed.append(
                {"source_id": where, "wav": wav, "reason": rejection.reason,
                 "detail": rejection.detail}
            )  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        return {
            "folder": self.folder,
            "clips": sum(self.per_image.values()),
            "skipped_clips": sum(self.counts.values()),
            **self.counts,
            "speakers": len(self.speakers),
            # {"5": 7990, ...}: the corpus has five clips of every photo
            "images_by_clips": {
                str(n): k for n, k in sorted(Counter(self.per_image.values()).items())
            },
            "skipped_clips_listed": self.listed,
        }


def clip_line(fields: list[str], wavs_dir: Path) -> tuple[Path, str, int] | Rejection:
    """(the WAV's path, IMAGE, N) of a wav2capt.txt line's fields, or why it has none."""
    if unstorable(dict(enumerate(fields))) or len(fields) != 3:
        return Rejection("malformed_line", "not `WAV IMAGE #N`")
    wav, image, index = fields
    match = CAPTION_INDEX.fullmatch(index)
    if match is None:
        return Rejection("bad_caption_index", f"{index!r} is not #N")
    path, outside = image_in(wavs_dir, wav)  # a recording of the corpus's own, nothing else
    return outside or (path, image, int(match[1]))


def without_image(record: dict[str, Any]) -> dict[str, Any]:
    """What a clip keeps of its caption record (clips.caption_fields), its image's bytes
    dropped once its image_id is had: the records of 8,000 photos are not held at once."""
    return {"id": record["id"], **caption_fields(record)} | {"image": None}


def attach_facc(
    facc_dir: Path,
    record_ids: dict[tuple[str, int], str],
    output_uri: str,
    max_seconds: float,
    rows_per_part: int,
) -> dict[str, Any]:
    """Write each recording of wav2capt.txt as a clip of its caption's imported record."""
    wavs_dir = facc_dir / WAVS
    wanted = set(record_ids.values())
    records = {r["id"]: without_image(r) for r in imported_records(output_uri) if r["id"] in wanted}
    speaker_of = speakers(facc_dir)
    clips = PartWriter(storage.join(output_uri, "clips"), CLIP_RECORDED, rows_per_part)
    report, done = ClipReport(str(facc_dir)), set()
    for number, line in enumerate(read_text(facc_dir / WAV2CAPT), 1):
        fields, where = line.split(), f"{WAV2CAPT}:{number}"
        if not fields:
            continue
        parsed = clip_line(fields, wavs_dir)
        if isinstance(parsed, Rejection):
            report.skip(where, storable(fields[0]), parsed)
            continue
        path, image, n = parsed
        record = records.get(record_ids.get((image, n), ""))
        if record is None:
            detail = f"no imported caption {image} #{n}"
            report.skip(where, path.name, Rejection("unknown_caption", detail))
            continue
        if path.name in done or record["id"] in done:
            detail = f"{image} #{n} or {path.name} has a clip already"
            report.skip(where, path.name, Rejection("duplicate_clip", detail))
            continue
        samples = read_recording(path, max_seconds, "audio/wav")
        if isinstance(samples, str):
            report.skip(where, path.name, Rejection(samples, str(path)))
            continue
        done.update((path.name, record["id"]))
        speaker = speaker_of.get(path.name)
        clips.add(imported_clip(record, samples, SOURCE) | {"caption_index": n, "speaker": speaker})
        report.per_image[record["image_id"]] += 1
        report.speakers.update([speaker] if speaker else [])
    clips.flush()
    return report.to_json()


def import_facc(
    facc_dir: Path | str,
    flickr8k_dir: Path | str,
    output_uri: str,
    config: ImportConfig,
    max_seconds: float = MAX_SECONDS,
) -> dict[str, Any]:
    """Write Flickr8k's captions and FACC's recordings of them under `output_uri`; return
    import.json's content. Both folders are checked before anything is written."""
    facc_dir = existing_dir(facc_dir)
    existing_dir(facc_dir / WAVS), existing_file(facc_dir / WAV2CAPT)
    captions = flickr8k_captions(flickr8k_dir)

    def then(uri: str) -> dict[str, Any]:
        return attach_facc(facc_dir, captions.record_ids, uri, max_seconds, config.rows_per_part)

    return write_import(captions.pairs, output_uri, config, then)


def describe(report: dict[str, Any]) -> str:
    """importers.summary, and the recordings that did not become clips."""
    speech = report["speech"]
    skipped = ", ".join(f"{r} {speech[r]}" for r in CLIP_SKIPS if speech[r])
    return "\n".join(
        [
            summary(report),
            f"clips:    {speech['clips']} of {speech['speakers']} speakers, "
            f"skipped {speech['skipped_clips']}{f' ({skipped})' if skipped else ''}",
        ]
    )
