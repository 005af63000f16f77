"""Import Flickr8k-CN: Chinese sentences about Flickr8k photos, machine-translated or written by
people, as curated records whose captions are segmented into words (conceptual.text.chinese).

    report = import_flickr8k_cn(images_dir, cn_dir, output_uri, Flickr8kCnConfig(source="native"))

The Flickr8k-CN folder has a file per source, one sentence a line, `IMAGE.jpg#TAG#N sentence`
(UTF-8, N = 0..4 for each image):

| source | file | tag | sentences |
|---|---|---|---|
| baidu | flickr8kzhb.caption.txt | zhb | Baidu's machine translation of each English caption |
| google | flickr8kzhg.caption.txt | zhg | Google's machine translation of each English caption |
| native | flickr8kzhc.caption.txt | zhc | written in Chinese by native speakers, for the image |
| human | flickr8kzhmtest.captions.txt | zhm | people's translations, test images only |
| english | flickr8kenc.caption.txt | enc | the English captions themselves |

`flickr8kenc.caption.txt` (tag `enc`) holds the English captions: a translation translates the
English sentence of the same IMAGE and N, which becomes its record's `original`; a native
sentence translates nothing. `flickr8k{train,val,test}.txt` list the standard split's image
ids (the file name without `.jpg`). source=english imports the English captions (language
"en", in the released style of the English imports) under the same split, for an English
captioner beside the Chinese ones (the late-translation baselines of compare_fluency).

What is imported: the source's sentences of the photos in the images folder (all of Flickr8k
or any part of it), written by importers.write_import as records.CURATED_LANGUAGE, with
`caption` the sentence's words joined by spaces, `alt_text` the sentence as the file has it
and `text` normalized. Splits: a stable hash of each photo, as import_captions does (so a
photo has the same split in the English and the Chinese import), or with split=official the
split files, where a photo in none of them is skipped as `outside_split`. import.json counts
skipped sentences by reason (a line that does not parse: `malformed_row`, `invalid_utf8`,
`too_long`; the sentences of a photo that is a link leading out of the images folder:
`outside_dataset`, import_captions' own check), and, under "flickr8k_cn", what concerns
images rather than sentences: photos of the folder without a sentence of the source
(`no_sentence` where Flickr8k-CN knows the photo, `unknown_image` where it does not), and the
lines of photos not in the folder; so `lines = input_captions + lines_of_other_images`.
A record's `image_url` is the photo's path under the folder holding the images folder
(`Flicker8k_Dataset/1000268201_693b08cb0e.jpg`), so ids do not depend on where it lies.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import model_validator

from conceptual.candidates import storable, unstorable
from conceptual.importers import (
    LISTED_SKIPS,
    ImportConfig,
    ImportSourceError,
    Pair,
    existing_dir,
    existing_file,
    local_image,
    released_style,
    summary,
    write_import,
)
from conceptual.records import CURATED_LANGUAGE, Rejection
from conceptual.splits import SPLITS
from conceptual.text.chinese import normalize, tokens_for_captioning

Source = Literal["baidu", "google", "native", "human", "english"]
SOURCES: dict[str, tuple[str, str]] = {  # source -> (file, tag)
    "baidu": ("flickr8kzhb.caption.txt", "zhb"),
    "google": ("flickr8kzhg.caption.txt", "zhg"),
    "native": ("flickr8kzhc.caption.txt", "zhc"),
    "human": ("flickr8kzhmtest.captions.txt", "zhm"),
    "english": ("flickr8kenc.caption.txt", "enc"),
}
TRANSLATED = ("baidu", "google", "human")  # their sentence N translates English sentence N
ENGLISH = SOURCES["english"]
SPLIT_FILE = "flickr8k{}.txt"


def language(source: str) -> str:
    return "en" if source == "english" else "zh"


def record_columns(source: str, text: str, original: str | None) -> dict[str, Any]:
    """The columns a sentence's record carries beside the curated ones (CURATED_LANGUAGE):
    its language and source, the English it translates, and its unsegmented text."""
    return {
        "language": language(source),
        "source": source,
        "original": original,
        "text": normalize(text),
        "fluency": None,  # jobs.score_fluency's
    }


LINE = re.compile(r"(?P<image>[^#\s]+)#(?P<tag>[^#\s]*)#(?P<n>\d+)(?:\s+(?P<text>.*))?")


class Flickr8kCnConfig(ImportConfig):
    # Always curated: the curation pipeline's filters and hypernymizer are English.
    curated: Literal[True] = True
    source: Source = "baidu"
    # "hash": a stable hash of each photo, by `splits`; "official": the split files.
    split: Literal["hash", "official"] = "hash"

    @model_validator(mode="after")
    def _one_way_to_split(self) -> Flickr8kCnConfig:
        if "split_by" in self.model_fields_set:
            raise ValueError("Flickr8k-CN splits by split=hash or split=official, not split_by")
        if self.split == "official" and "splits" in self.model_fields_set:
            raise ValueError("splits.* are fractions of split=hash; split=official reads files")
        return self


@dataclass(frozen=True)
class Line:
    number: int  # in the file, from 1
    image: str  # the photo's file name, "1000268201_693b08cb0e.jpg"; "" if the line has none
    n: int  # the sentence's number among the photo's: N of a translation is N of its English
    text: str
    problem: Rejection | None = None


def read_lines(path: Path, tag: str) -> list[Line]:
    """The non-blank lines of a Flickr8k-CN file. A line that cannot be imported keeps its
    problem, to be counted: not `IMAGE#TAG#N sentence`, another file's tag, or a repeat of an
    earlier line's IMAGE and N (which one would pair with the English?) are `malformed_row`;
    bytes that are not UTF-8 `invalid_utf8`; a line over MAX_STORED_CHARS `too_long`."""
    # surrogateescape: undecodable bytes fail their own line, not the file.
    raw = path.read_bytes().removeprefix(b"\xef\xbb\xbf").decode("utf-8", "surrogateescape")
    lines, first = [], {}
    for number, line in enumerate(raw.split("\n"), 1):
        line = line.strip()  # a Windows line end, trailing spaces
        if not line:
            continue
        match = LINE.fullmatch(line)
        if problem := unstorable({"line": line}):
            lines.append(Line(number, "", -1, storable(line), problem))
        elif match is None:
            detail = "not IMAGE#TAG#N sentence"
            lines.append(Line(number, "", -1, line, Rejection("malformed_row", detail)))
        else:
            image, n, text = match["image"], int(match["n"]), match["text"] or ""
            if match["tag"] != tag:
                problem = Rejection("malformed_row", f"tag {match['tag']!r} in a file of {tag!r}")
            elif (image, n) in first:
                problem = Rejection(
                    "malformed_row", f"repeats {image}#{n} of line {first[image, n]}"
                )
            first.setdefault((image, n), number)
            lines.append(Line(number, image if problem is None else "", n, text, problem))
    return lines


def official_splits(cn_dir: Path) -> dict[str, str]:
    """Image id (file name without `.jpg`) -> "train", "val" or "test", from the split files."""
    splits = {}
    for split in SPLITS:
        path = cn_dir / SPLIT_FILE.format(split)
        if not path.is_file():
            raise ImportSourceError(f"split=official needs {path}")
        for image_id in path.read_text(encoding="utf-8").split():
            splits.setdefault(image_id, split)
    return splits


def flickr8k_cn_pairs(
    images_dir: Path | str, cn_dir: Path | str, source: Source, official: bool = False
) -> tuple[list[Pair], dict[str, Any]]:
    """The pairs of the source's sentences, those of each photo of `images_dir` together and
    the lines that cannot be imported last; and what the import counts about images (the
    "flickr8k_cn" section of import.json)."""
    images_dir, cn_dir = existing_dir(images_dir), existing_dir(cn_dir)
    file_name, tag = SOURCES[source]
    lines = read_lines(existing_file(cn_dir / file_name), tag)
    english_path = cn_dir / ENGLISH[0]
    if source in TRANSLATED:
        existing_file(english_path)  # a translation without its original is half a pair
    english_lines = read_lines(english_path, ENGLISH[1]) if english_path.is_file() else []
    english = {(line.image, line.n): line.text for line in english_lines if not line.problem}
    splits = official_splits(cn_dir) if official else {}
    # The folder's photos by name: only names it holds are opened, whatever a file says.
    folder = sorted(p.name for p in images_dir.iterdir() if p.is_file() and p.name[0] != ".")

    of_image: dict[str, list[Line]] = {name: [] for name in folder}
    problems, other_images = [], 0
    for line in lines:
        if line.problem:
            problems.append(
                Pair(None, "", line.text, None, f"{file_name}:{line.number}", line.problem)
            )
        elif line.image in of_image:
            of_image[line.image].append(line)
        else:
            other_images += 1
    known = {line.image for line in lines} | {image for image, _ in english}
    without: Counter = Counter(no_sentence=0, unknown_image=0)
    listed, no_original, pairs = [], 0, []
    for name, image_lines in of_image.items():
        stem = Path(name).stem
        if not image_lines:
            reason = "no_sentence" if name in known or stem in splits else "unknown_image"
            without[reason] += 1
            if len(listed) < LISTED_SKIPS:
                listed.append({"image": name, "reason": reason})
            continue
        # The check import_captions makes: a link in the folder may lead anywhere.
        path, url, outside = local_image(images_dir, name)
        split = splits.get(stem) if official else None
        if official and split is None and outside is None:
            outside = Rejection("outside_split", f"{stem} is in no {SPLIT_FILE.format('*')}")
        for line in sorted(image_lines, key=lambda line: line.n):
            original = english.get((name, line.n)) if source in TRANSLATED else None
            if source in TRANSLATED and original is None:
                no_original += 1  # imported all the same: the sentence is still Chinese
            where = f"{file_name}:{line.number}"
            columns = record_columns(source, line.text, original)
            pairs.append(Pair(path, url, line.text, split, where, outside, columns))
    section = {
        "source": source,
        "file": file_name,
        "split": "official" if official else "hash",
        "lines": len(lines),
        "lines_of_other_images": other_images,
        "images_in_folder": len(folder),
        "images_with_sentences": len(folder) - sum(without.values()),
        "images_without_sentence": dict(without),
        "images_without_sentence_listed": listed,
        "translations_without_original": no_original,
        "english_lines_skipped": dict(
            Counter(line.problem.reason for line in english_lines if line.problem)
        ),
    }
    return pairs + problems, section


def import_flickr8k_cn(
    images_dir: Path | str,
    cn_dir: Path | str,
    output_uri: str,
    config: Flickr8kCnConfig | None = None,
) -> dict[str, Any]:
    """Write the curated records of the config's source (module docstring); return the
    content of import.json."""
    config = config or Flickr8kCnConfig()
    official = config.split == "official"
    pairs, section = flickr8k_cn_pairs(images_dir, cn_dir, config.source, official)
    return write_import(
        pairs,
        output_uri,
        config,
        caption_style=released_style if config.source == "english" else tokens_for_captioning,
        curated_schema=CURATED_LANGUAGE,
        sections={"flickr8k_cn": section},
    )


def describe(report: dict[str, Any]) -> str:
    """importers.summary, and what Flickr8k-CN's section counted."""
    cn = report["flickr8k_cn"]
    without = ", ".join(f"{r} {n}" for r, n in cn["images_without_sentence"].items() if n)
    return "\n".join(
        [
            summary(report),
            f"source:   {cn['source']} ({cn['file']}, {cn['lines']} lines; "
            f"{cn['lines_of_other_images']} of images not in the folder), split {cn['split']}",
            f"images:   {cn['images_with_sentences']} of {cn['images_in_folder']} in the folder "
            f"have sentences{f' ({without})' if without else ''}",
        ]
    )
