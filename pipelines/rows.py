"""The rows in flight through curation, and the per-batch functions of the passes after the
per-candidate stages (the entity-frequency rule, the split, the outputs, the tallies).

A candidate is one row of records.PROCESSED from the first stage to the last; a stage that rejects
it fills stage/reason/detail and drops its image, and the row travels on.

Nothing heavy is imported here, on purpose: Ray runs these functions in worker processes
that import this module first, and importing the whole pipeline (MLflow, torch, NLTK) cost
a fresh worker about 10 seconds, more than all these passes together.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from conceptual.records import CURATED, PROCESSED, REJECTED, Rejection
from conceptual.splits import SplitConfig, assign_split

ENTITY_FREQUENCY_STAGE, RARE_TYPE = "entity_frequency", "rare_type"
# The list columns of a row, [] until a stage fills them (the others are null until then).
_LISTS = tuple(field.name for field in PROCESSED if pa.types.is_list(field.type))


def pending(rows: list[dict[str, Any]]) -> list[int]:
    """Indices of the rows no stage has rejected yet."""
    return [i for i, row in enumerate(rows) if row["reason"] is None]


def reject(row: dict[str, Any], stage: str, rejection: Rejection) -> None:
    # A rejected row's image is dropped here: the URL refetches it, and carrying the bytes
    # of every rejected image through the remaining stages would only cost memory.
    row.update(stage=stage, reason=rejection.reason, detail=rejection.detail, image=None)
    row["caption"] = None


def table(rows: list[dict[str, Any]]) -> pa.Table:
    """The rows as records.PROCESSED: a column no stage has filled yet is [] for a list,
    null otherwise, so each stage fills only the columns it adds."""
    for row in rows:
        for name in _LISTS:
            if row.get(name) is None:
                row[name] = []
    return pa.Table.from_pylist(rows, schema=PROCESSED)


def is_kept(batch: pa.Table) -> pa.ChunkedArray:
    return pc.is_null(batch["reason"])


def counted(kind: str, values: pa.Array | pa.ChunkedArray) -> pa.Table:
    """(kind, key, n) rows: how often each value occurs, as partial counts of one batch."""
    counts = (
        pa.table({"key": pc.cast(values, pa.string())})
        .group_by("key")
        .aggregate([([], "count_all")])
    )
    return pa.table(
        {
            "kind": pa.array([kind] * counts.num_rows, pa.string()),
            "key": counts["key"],
            "n": counts["count_all"],
        }
    )


def concept_tally(batch: pa.Table) -> pa.Table:
    """The concepts of the captions still in the running, for the entity-frequency rule."""
    return counted("type", pc.list_flatten(batch.filter(is_kept(batch))["types"]))


def outcome_tally(batch: pa.Table) -> pa.Table:
    """Everything stats.json reports, in one pass: outcomes, splits, caption lengths, tokens."""
    kept = batch.filter(is_kept(batch))
    tokens = pc.utf8_split_whitespace(kept["caption"])
    stage, reason = pc.fill_null(batch["stage"], ""), pc.fill_null(batch["reason"], "")
    return pa.concat_tables(
        [
            counted("outcome", pc.binary_join_element_wise(stage, reason, "\t")),
            counted("split", kept["split"]),
            counted("length", pc.list_value_length(tokens)),
            counted("token", pc.list_flatten(tokens)),
        ]
    )


def finalize(batch: pa.Table, rare: frozenset[str], more_than: int, split: SplitConfig) -> pa.Table:
    """The entity-frequency rule, then the split of each caption kept. Column by column:
    only the columns it reads or changes become Python values (converting whole rows, with
    their entities, cost more than everything else in this pass)."""
    stage, reason, detail, splits = (
        batch[c].to_pylist() for c in ("stage", "reason", "detail", "split")
    )
    rejected_here = [False] * batch.num_rows
    for i, types in enumerate(batch["types"].to_pylist()):
        if reason[i] is None and (below := sorted(set(types) & rare)):
            stage[i], reason[i] = ENTITY_FREQUENCY_STAGE, RARE_TYPE
            detail[i] = f"occur {more_than} times or fewer: {', '.join(below[:10])}"
            rejected_here[i] = True
    kept = [i for i, r in enumerate(reason) if r is None]
    indices = pa.array(kept, pa.int64())  # typed: an empty list would have no take kernel
    images = batch["image"].take(indices).to_pylist()
    urls = batch["image_url"].take(indices).to_pylist()
    for i, image, url in zip(kept, images, urls):
        splits[i] = assign_split(image if image is not None else url.encode(), split)
    # As reject() does for one row: a rejected candidate loses its caption and image.
    dropped = pa.array(rejected_here)
    columns = {
        "stage": pa.array(stage, pa.string()),
        "reason": pa.array(reason, pa.string()),
        "detail": pa.array(detail, pa.string()),
        "split": pa.array(splits, pa.string()),
        "caption": pc.if_else(dropped, pa.scalar(None, pa.string()), batch["caption"]),
        "image": pc.if_else(dropped, pa.scalar(None, pa.binary()), batch["image"]),
    }
    for name, column in columns.items():
        batch = batch.set_column(batch.schema.get_field_index(name), name, column)
    return batch


def to_curated(batch: pa.Table) -> pa.Table:
    return batch.filter(is_kept(batch)).select(CURATED.names).cast(CURATED)


def to_rejected(batch: pa.Table) -> pa.Table:
    return batch.filter(pc.invert(is_kept(batch))).select(REJECTED.names).cast(REJECTED)
