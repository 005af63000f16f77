"""Import Flickr30k-CN, the fluency paper's second dataset (Lan, Li, Dong 2017, Table 4): Chinese
sentences about Flickr30k photos, machine-translated for training and validation, translated
by people for the test, as curated records.

    report = import_flickr30k_cn(images_dir, cn_dir, output_uri)

The released folder (flickr30k-cn.tar.gz, in the VisualSearch layout of its authors' code)
has a folder per split, each holding the split's image ids and its sentences, already
segmented into words by BOSON:

| split | folder | tag | sentences |
|---|---|---|---|
| train | flickr30kzhbbosontrain | zhb | Baidu's machine translation of each English caption |
| val | flickr30kzhbbosonval | zhb | the same |
| test | flickr30kzhmbosontest | zhm | people's translations of the English captions |

    FOLDER/ImageSets/FOLDER.txt              the split's image ids, one a line (1000092795)
    FOLDER/TextData/seg.FOLDER.caption.txt   `ID#TAG#N word word ...`, UTF-8, N = 0..4

The photos are Flickr30k's own (`flickr30k-images/ID.jpg`), not part of the release: --images
names their folder (all of Flickr30k or any part of it); only its photos are imported. The
splits are the release's: a sentence whose photo its folder's ImageSets does not list is
skipped as `outside_split`. Captions keep BOSON's words (lowercased, punctuation dropped,
joined by spaces), so the vocabulary is the paper's; `alt_text` is the line as the file has
it and `text` the sentence normalized (conceptual.text.chinese). A line that does not parse
is counted as Flickr8k-CN's are (conceptual.fluency.flickr8k_cn.read_lines). Split folders
that are absent are said in import.json ("flickr30k_cn"): a user may have only the test.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import model_validator

from conceptual.fluency.flickr8k_cn import read_lines, record_columns
from conceptual.importers import (
    ImportConfig,
    ImportSourceError,
    Pair,
    existing_dir,
    local_image,
    summary,
    write_import,
)
from conceptual.records import CURATED_LANGUAGE, Rejection
from conceptual.text.chinese import is_punctuation

# split -> (folder, tag, source as flickr8k_cn names it)
FOLDERS: dict[str, tuple[str, str, str]] = {
    "train": ("flickr30kzhbbosontrain", "zhb", "baidu"),
    "val": ("flickr30kzhbbosonval", "zhb", "baidu"),
    "test": ("flickr30kzhmbosontest", "zhm", "human"),
}


class Flickr30kCnConfig(ImportConfig):
    # Always curated: the curation pipeline's filters and hypernymizer are English.
    curated: Literal[True] = True

    @model_validator(mode="after")
    def _released_splits(self) -> Flickr30kCnConfig:
        if {"split_by", "splits"} & self.model_fields_set:
            raise ValueError("Flickr30k-CN's splits are its folders': no split_by or splits")
        return self


def segmented_words(text: str) -> str:
    """A BOSON-segmented sentence as the captioner reads it: its words, lowercase, without
    punctuation, joined by single spaces."""
    return " ".join(word.lower() for word in text.split() if not is_punctuation(word))


def split_pairs(images_dir: Path, folder: Path, split: str) -> tuple[list[Pair], dict[str, Any]]:
    """One split folder's sentences as pairs (the lines that cannot be imported last), and
    what it counted."""
    name, tag, source = FOLDERS[split]
    ids_file = folder / "ImageSets" / f"{name}.txt"
    text_file = folder / "TextData" / f"seg.{name}.caption.txt"
    for path in (ids_file, text_file):
        if not path.is_file():
            raise ImportSourceError(f"{path} is missing: {folder} is not a Flickr30k-CN folder")
    listed = set(ids_file.read_text(encoding="utf-8").split())
    in_folder = {p.name for p in images_dir.iterdir() if p.is_file() and p.name[0] != "."}
    pairs, problems, other_images = [], [], 0
    by_image: dict[str, list] = {}
    for line in read_lines(text_file, tag):
        where = f"{name}/{text_file.name}:{line.number}"
        if line.problem:
            problems.append(Pair(None, "", line.text, None, where, line.problem))
        elif f"{line.image}.jpg" in in_folder:
            by_image.setdefault(line.image, []).append((line, where))
        else:
            other_images += 1
    for image_id, lines in sorted(by_image.items()):
        path, url, outside = local_image(images_dir, f"{image_id}.jpg")
        if outside is None and image_id not in listed:
            outside = Rejection("outside_split", f"{image_id} is not in {ids_file.name}")
        for line, where in sorted(lines, key=lambda item: item[0].n):
            columns = record_columns(source, line.text, original=None)  # no English here
            pairs.append(Pair(path, url, line.text, split, where, outside, columns))
    section = {
        "folder": name,
        "source": source,
        "images_listed": len(listed),
        "images_with_sentences": len(by_image),
        "lines_of_other_images": other_images,
    }
    return pairs + problems, section


def flickr30k_cn_pairs(
    images_dir: Path | str, cn_dir: Path | str
) -> tuple[list[Pair], dict[str, Any]]:
    """The pairs of every split folder present, and the "flickr30k_cn" section of
    import.json."""
    images_dir, cn_dir = existing_dir(images_dir), existing_dir(cn_dir)
    present = {split: cn_dir / spec[0] for split, spec in FOLDERS.items()}
    present = {split: folder for split, folder in present.items() if folder.is_dir()}
    if not present:
        folders = ", ".join(spec[0] for spec in FOLDERS.values())
        raise ImportSourceError(f"{cn_dir} holds none of Flickr30k-CN's folders ({folders})")
    pairs, splits = [], {}
    for split, folder in present.items():
        found, splits[split] = split_pairs(images_dir, folder, split)
        pairs += found
    absent = [FOLDERS[split][0] for split in FOLDERS if split not in present]
    return pairs, {"splits": splits, "absent_folders": absent}


def import_flickr30k_cn(
    images_dir: Path | str,
    cn_dir: Path | str,
    output_uri: str,
    config: Flickr30kCnConfig | None = None,
) -> dict[str, Any]:
    """Write the curated records (module docstring); return the content of import.json."""
    pairs, section = flickr30k_cn_pairs(images_dir, cn_dir)
    return write_import(
        pairs,
        output_uri,
        config or Flickr30kCnConfig(),
        caption_style=segmented_words,
        curated_schema=CURATED_LANGUAGE,
        sections={"flickr30k_cn": section},
    )


def describe(report: dict[str, Any]) -> str:
    """importers.summary, and what each split folder counted."""
    cn = report["flickr30k_cn"]
    lines = [summary(report)]
    for split, counted in cn["splits"].items():
        lines.append(
            f"{split + ':':<9} {counted['folder']} ({counted['source']}): "
            f"{counted['images_with_sentences']} photos of the folder have sentences, "
            f"{counted['images_listed']} listed; {counted['lines_of_other_images']} lines "
            "of photos not in the folder"
        )
    if cn["absent_folders"]:
        lines.append(f"absent:   {', '.join(cn['absent_folders'])}")
    return "\n".join(lines)
