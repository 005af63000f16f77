"""The released Conceptual Captions as data (conceptual.jobs.import_conceptual): what the
import changes in the curation pipeline, and what it checks and says around it.

The import runs the curation pipeline (pipelines/curation/curation.py, `captions=released`) with its
text stages replaced by `released_captions`: a released caption is a caption already, so it
is kept exactly as released (no text filters, no hypernymization, no re-tokenization), and
only an empty one, one over `text.filters.max_chars` or one holding a control character is
rejected, at stage `text` with that stage's reasons. Its split is `released.split` (the
job's `--split`), else the one its file holds (pipelines/dataflow/readers.py: a Parquet `split`
column, else the file's name), and nothing re-splits it. Fetching, the image filters and the overlap rule then run as in `curate`.

`resize_images` is the step after the image stages when `image.resize` asks for one (in
`curate` too): accepted images resized or re-encoded (vision/resize.py), their size and
image_id those of the new bytes.

Nothing heavy is imported here: Ray runs these functions in worker processes that import
this module first (pipelines/dataflow/rows.py says why that matters).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq

from conceptual import storage
from conceptual.candidates import RELEASED_SPLITS, SPLIT_COLUMNS, detect_format, split_of_name
from conceptual.config import Config
from conceptual.pipelines.dataflow.readers import candidate_files, is_labeled
from conceptual.pipelines.dataflow.rows import pending, reject, table
from conceptual.records import image_id
from conceptual.text.bounds import (
    BOUND_REASONS,
    CONTROL_REASON,
    TEXT_STAGE,
    control_character,
    out_of_bounds,
)
from conceptual.vision.resize import ResizeConfig, resize_image

# A released caption is judged at the text stage it replaces (TEXT_STAGE), with these.
CAPTION_REASONS = (*BOUND_REASONS, CONTROL_REASON)
RESIZE_STAGE = "resize"
Split = Literal[RELEASED_SPLITS]  # type: ignore[valid-type]


class ReleasedConfig(Config):
    """The released captions' own settings (`captions=released`)."""

    # Every row's split; None: the one its file holds (a Parquet `split` column, else the
    # file's name: Train_GCC-training.tsv, validation-00000-of-00001.parquet).
    split: Split | None = None


class ReleasedInputError(ValueError):
    """An input the import cannot take as it is; the message says what to pass instead."""


def released_captions(batch: pa.Table, max_chars: int, split: str | None) -> pa.Table:
    """Each released caption as the curated caption, byte for byte, with its split; an empty
    caption, one over `max_chars` characters or one holding a control character (NUL, a
    terminal's ESC) is rejected."""
    rows = batch.to_pylist()
    for i in pending(rows):
        row, text = rows[i], rows[i]["alt_text"]
        if rejection := out_of_bounds(text, max_chars, "no caption") or control_character(text):
            reject(row, TEXT_STAGE, rejection)
        else:
            row.update(caption=text, entities=[], types=[], split=split or row["split"])
    return table(rows)


def resize_images(batch: pa.Table, resize: ResizeConfig, max_pixels: int) -> pa.Table:
    """The images still in the running resized or re-encoded as `resize` says, with their
    new width, height and image_id; an image with nothing to do keeps its bytes."""
    rows = batch.to_pylist()
    for i in pending(rows):
        row = rows[i]
        if row["image"] is None:
            continue
        resized = resize_image(row["image"], resize, max_pixels)
        if resized is not None and resized.changed:
            row.update(
                image=resized.data,
                width=resized.width,
                height=resized.height,
                image_id=image_id(resized.data),
            )
    return table(rows)


def check_input(uri: str, input_format: str, split: str | None, dataset_labels: bool) -> str | None:
    """Fail before any work is scheduled on an input the import would misread: a file whose
    split is unknown when no `split` is given, or no labeled Parquet file when the overlap
    rule is to use the dataset's labels. Returns the input's split when no `split` is given
    and every file's name says the same one (and none has a split column), else None (each
    row's own file says it: pipelines/dataflow/readers.py, `splits`)."""
    files = candidate_files(uri)
    fs, _ = storage.resolve(uri)
    schemas = {}  # of the Parquet files
    for path in files:
        if input_format == "parquet" or (
            input_format == "auto" and detect_format(path, b"") == "parquet"
        ):
            with fs.open_input_file(path) as f:
                schemas[path] = pq.read_schema(f)
    with_column = {
        path
        for path, schema in schemas.items()
        if {n.lower() for n in schema.names} & set(SPLIT_COLUMNS)
    }
    named = {path: split_of_name(path) for path in files}
    unknown = [path for path in files if named[path] is None and path not in with_column]
    if split is None and unknown:
        raise ReleasedInputError(
            f"{unknown[0]}: its name says no split ({' or '.join(RELEASED_SPLITS)}) and it "
            "has no split column: pass --split, or name the file as released "
            "(Train_GCC-training.tsv, validation-00000-of-00001.parquet)"
        )
    if dataset_labels and not any(map(is_labeled, schemas.values())):
        raise ReleasedInputError(
            f"labels.source=dataset needs the labeled config's columns (labels, MIDs, "
            f"confidence_scores), and no Parquet file under {uri} has them: use "
            "labels.source=classifier, or overlap.enabled=false"
        )
    said = set(named.values())
    return said.pop() if split is None and len(said) == 1 and not with_column else None


def summary(stats: Mapping[str, Any]) -> str:
    """One line for people: how many rows were fetched, gone (the fetch stage's rejections:
    404s, timeouts, HTML pages...), filtered (the image stages') and kept."""

    def rejected(*stages: str) -> tuple[int, str]:
        counts: dict[str, int] = {}
        for stage in stages:
            for reason, n in stats["rejected"].get(stage, {}).items():
                counts[reason] = counts.get(reason, 0) + n
        ranked = sorted(((r, n) for r, n in counts.items() if n), key=lambda item: -item[1])
        listed = ", ".join(f"{reason} {n}" for reason, n in ranked)
        return sum(counts.values()), f" ({listed})" if listed else ""

    unread, unread_why = rejected("read", TEXT_STAGE)
    gone, gone_why = rejected("fetch")
    filtered, filtered_why = rejected("image", "overlap", RESIZE_STAGE)
    later = stats["input"] - stats["kept"] - unread - gone - filtered
    line = (
        f"released: {stats['input']} rows: fetched {stats['input'] - unread - gone}, "
        f"gone {gone}{gone_why}, filtered {filtered}{filtered_why}, kept {stats['kept']}"
    )
    if unread:
        line += f"; not fetched {unread}{unread_why}"
    if later:
        line += f"; {later} more dropped after the image stages (see the funnel)"
    return line
