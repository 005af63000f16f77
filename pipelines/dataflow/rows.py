"""The rows in flight through curation, and the per-batch functions of the passes after the
per-candidate stages: the global steps' (exact duplicates and the entity-frequency rule, each
a tally, a decision and the rejections; pipelines/dataflow/steps.py, GlobalStep), the split, the
outputs, the tallies.

A candidate is one row of records.PROCESSED from the first stage to the last; a stage that rejects
it fills stage/reason/detail and drops its image, and the row travels on.

Nothing heavy is imported here, on purpose: Ray runs these functions in worker processes
that import this module first, and importing the whole pipeline (MLflow, torch, NLTK) cost
a fresh worker about 10 seconds, more than all these passes together.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import ray

from conceptual.errors import INTERNAL_ERROR
from conceptual.pipelines.dataflow.journal import batch_name, write_batch
from conceptual.records import CURATED, PROCESSED, REJECTED, Rejection, record_image_id
from conceptual.splits import SplitConfig, assign_split, split_of_key
from conceptual.weburl import web_url

ENTITY_FREQUENCY_STAGE, RARE_TYPE = "entity_frequency", "rare_type"
DEDUPLICATE_STAGE, DUPLICATE = "deduplicate", "duplicate"
# The list columns of a row, [] until a stage fills them (the others are null until then).
EMBEDDINGS, VECTOR = ("embedding", "mirrored_embedding"), pa.list_(pa.float32())
_LISTS = tuple(field.name for field in PROCESSED if pa.types.is_list(field.type))


def pending(rows: list[dict[str, Any]]) -> list[int]:
    """Indices of the rows no stage has rejected yet."""
    return [i for i, row in enumerate(rows) if row["reason"] is None]


def reject(row: dict[str, Any], stage: str, rejection: Rejection) -> None:
    # A rejected row's image is dropped here: the URL refetches it, and carrying the bytes
    # of every rejected image (or its embeddings) through the remaining stages would only
    # cost memory.
    row.update(stage=stage, reason=rejection.reason, detail=rejection.detail, image=None)
    row.update(dict.fromkeys(EMBEDDINGS))
    row["caption"] = None


def quarantine(row: pa.Table, stage: str, detail: str) -> pa.Table:
    """One row whose processing raised, rejected as `internal_error` with what it raised,
    kept whole otherwise so that it can be replayed after a fix."""
    (record,) = row.to_pylist()
    reject(record, stage, Rejection(INTERNAL_ERROR, detail))
    return table([record])


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


def rare_concepts(
    counts: pa.Table, enabled: bool, more_than: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """`mark_rare`'s arguments from the concept tallies of every batch, and what stats.json
    reports of the rule: every concept is counted, whether the rule is on or not."""
    totals = counts.group_by("key").aggregate([("n", "sum")])
    count = dict(zip(totals["key"].to_pylist(), totals["n_sum"].to_pylist()))
    rare = frozenset(t for t, n in count.items() if n <= more_than) if enabled else frozenset()
    report = {
        "enabled": enabled,
        "more_than": more_than,
        "types": len(count),
        "types_kept": len(count) - len(rare),
    }
    return {"rare": rare, "more_than": more_than}, report


def mark_rare(batch: pa.Table, rare: frozenset[str], more_than: int) -> pa.Table:
    """Spec §5: a caption mentioning a `rare` concept is rejected. The rows are found by
    column (few have one), then only theirs are read."""
    types = batch["types"].combine_chunks()
    mentions = pc.is_in(pc.list_flatten(types), value_set=pa.array(list(rare), pa.string()))
    rows = np.unique(pc.list_parent_indices(types).filter(mentions).to_numpy())
    details = {}
    for i, listed in zip(rows.tolist(), types.take(rows).to_pylist()):
        below = sorted(set(listed) & rare)
        details[i] = f"occur {more_than} times or fewer: {', '.join(below[:10])}"
    return rejecting(batch, ENTITY_FREQUENCY_STAGE, RARE_TYPE, details)


def duplicate_keys(batch: pa.Table) -> pa.Table:
    """(position, url, image) of the rows still in the running, the URL and image id as
    64-bit hashes (0: no image id), for `find_duplicates`. The URL compared is the one the
    fetcher fetches, as conceptual/weburl.py writes it (`http://a.example` and
    `HTTP://A.example:80/#top` are one URL); a value that is no web URL (an imported
    image's dataset path) as it is."""
    kept = batch.filter(is_kept(batch))

    def hashed(column: str, canonical=None) -> np.ndarray:
        values = kept[column]
        hashes = np.zeros(len(values), np.uint64)
        present = pc.is_valid(values).to_numpy(zero_copy_only=False)
        if present.any():
            strings = values.filter(present).to_numpy(zero_copy_only=False)
            if canonical is not None:
                strings = np.array([canonical(s) or s for s in strings], dtype=object)
            hashes[present] = pd.util.hash_array(strings) | np.uint64(1)
        return hashes

    return pa.table(
        {
            "position": kept["position"],
            "url": pa.array(hashed("image_url", web_url)),
            "image": pa.array(hashed("image_id")),
        }
    )


# What `find_duplicates` finds: the position of each repeat, and whether it repeats an
# earlier row's image bytes (true) or its image URL (false).
DUPLICATES = pa.schema([("position", pa.int64()), ("same_image", pa.bool_())])


def find_duplicates(
    keys: ray.data.Dataset, by_url: bool, by_image: bool, keys_per_partition: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """`mark_duplicates`'s arguments from the `duplicate_keys` of every batch: the rows that
    repeat an earlier row's image URL, and those (of the rest) that repeat its image bytes;
    stats.json reports nothing of them. Up to `keys_per_partition` keys are compared here,
    in one table (a shuffle costs seconds of fixed overhead); more are hash-partitioned
    across the cluster, by URL and then by image, so that no process holds them all."""
    keys = keys.materialize()
    partitions = -(-keys.count() // keys_per_partition)
    if partitions <= 1:
        here = duplicates(gathered(keys, duplicate_keys), by_url, by_image)
        return {"found": Positions.of([ray.put(here)], [span(here)])}, {}
    partitions = max(partitions, int(ray.cluster_resources().get("CPU", 1)))

    def flagged(rows: ray.data.Dataset, column: str) -> ray.data.Dataset:
        return rows.repartition(partitions, keys=[column]).map_batches(
            flag_repeats, fn_kwargs={"column": column}, batch_format="pyarrow", batch_size=None
        )

    def repeats(rows: ray.data.Dataset, same_image: bool) -> ray.data.Dataset:
        return rows.map_batches(
            repeats_of, fn_kwargs={"same_image": same_image}, batch_format="pyarrow"
        )

    found = []
    if by_url:
        keys = flagged(keys, "url").materialize()  # read twice: its repeats, then the rest
        found.append(repeats(keys, same_image=False))
    if by_image:
        keys = flagged(keys.map_batches(with_image, batch_format="pyarrow"), "image")
        found.append(repeats(keys, same_image=True))
    if not found:
        return {"found": Positions.of([], [])}, {}
    everything = found[0].union(*found[1:]) if len(found) > 1 else found[0]
    blocks = everything.sort("position").materialize().to_arrow_refs()
    spans = ray.get([ray.remote(num_cpus=0)(span).remote(block) for block in blocks])
    return {"found": Positions.of(blocks, spans)}, {}


def duplicates(keys: pa.Table, by_url: bool, by_image: bool) -> pa.Table:
    """What `find_duplicates` finds, over keys held in one table: the DUPLICATES rows of the
    repeats, in position order."""
    found = [DUPLICATES.empty_table()]
    if by_url:
        keys = flag_repeats(keys, "url")
        found.append(repeats_of(keys, same_image=False))
    if by_image:
        keys = flag_repeats(with_image(keys), "image")
        found.append(repeats_of(keys, same_image=True))
    return pa.concat_tables(found).sort_by("position")


def flag_repeats(keys: pa.Table, column: str) -> pa.Table:
    """`keys` with `repeat`: whether each row repeats the `column` of an earlier row (by
    position, so the choice does not depend on how the rows were batched; 0 is no key).
    `keys` holds every row with each of its values: all rows, or one hash partition."""
    positions = keys["position"].to_numpy()
    order = np.argsort(positions, kind="stable")
    repeat = np.zeros(len(positions), bool)
    repeat[order] = ~first_of_each(keys[column].to_numpy()[order])
    return keys.select(["position", "url", "image"]).append_column("repeat", pa.array(repeat))


def repeats_of(flagged: pa.Table, same_image: bool) -> pa.Table:
    """The DUPLICATES rows of the repeats `flag_repeats` flagged."""
    positions = flagged.filter(flagged["repeat"])["position"]
    return pa.table([positions, pa.array(np.full(len(positions), same_image))], DUPLICATES)


def with_image(keys: pa.Table) -> pa.Table:
    """The rows with an image id that repeat no earlier image URL (if that was checked):
    those that may repeat an earlier row's image bytes."""
    keep = pc.not_equal(keys["image"], pa.scalar(0, pa.uint64()))
    if "repeat" in keys.column_names:
        keep = pc.and_(keep, pc.invert(keys["repeat"]))
    return keys.filter(keep).select(["position", "url", "image"])


@dataclass(frozen=True)
class Positions:
    """DUPLICATES rows in the object store, in blocks of ascending, disjoint position ranges
    (block k holds lows[k] to highs[k]): a batch reads only the blocks its rows fall in."""

    blocks: tuple[ray.ObjectRef, ...]
    lows: np.ndarray
    highs: np.ndarray

    @classmethod
    def of(cls, blocks: list[ray.ObjectRef], spans: list[tuple[int, int] | None]) -> Positions:
        """The blocks, each with its `span`; empty ones are left out."""
        listed = [(block, bounds) for block, bounds in zip(blocks, spans) if bounds is not None]
        lows = np.array([low for _, (low, _) in listed], np.int64)
        highs = np.array([high for _, (_, high) in listed], np.int64)
        if np.any(lows[1:] <= highs[:-1]):
            raise ValueError("duplicate positions must come in ascending, disjoint blocks")
        return cls(tuple(block for block, _ in listed), lows, highs)

    def lookup(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Whether each position is listed, and whether as the same image bytes."""
        listed, same_image = np.zeros(len(positions), bool), np.zeros(len(positions), bool)
        block = np.searchsorted(self.lows, positions, side="right") - 1
        inside = block >= 0
        inside[inside] = positions[inside] <= self.highs[block[inside]]
        for k in np.unique(block[inside]).tolist():
            rows = np.flatnonzero(inside & (block == k))
            found = ray.get(self.blocks[k])
            known = found["position"].to_numpy()
            at = np.searchsorted(known, positions[rows])  # in range: highs[k] is its last
            hit = known[at] == positions[rows]
            listed[rows[hit]] = True
            same_image[rows[hit]] = found["same_image"].to_numpy(zero_copy_only=False)[at[hit]]
        return listed, same_image


def span(found: pa.Table) -> tuple[int, int] | None:
    """The first and last position of a block of DUPLICATES rows (None: it is empty)."""
    if not found.num_rows:
        return None
    positions = found["position"]
    return positions[0].as_py(), positions[-1].as_py()


def mark_duplicates(batch: pa.Table, found: Positions) -> pa.Table:
    """The rows `find_duplicates` found rejected as duplicates."""
    listed, same_image = found.lookup(batch["position"].to_numpy().astype(np.int64))
    rows = np.flatnonzero(listed)
    image_ids = batch["image_id"].take(pa.array(rows, pa.int64())).to_pylist()
    details = {
        i: f"the same image bytes as an earlier candidate (image_id {image_ids[n]})"
        if same_image[i]
        else "the same image URL as an earlier candidate"
        for n, i in enumerate(rows.tolist())
    }
    return rejecting(batch, DEDUPLICATE_STAGE, DUPLICATE, details)


def gathered(tallies: ray.data.Dataset, tally) -> pa.Table:
    """Every batch of a dataset of tallies as one table, here (`tally` of no rows if none).
    Counts per batch are small: combined here, not shuffled (a shuffle's fixed cost, seconds,
    is more than the counting's)."""
    batches = tallies.iter_batches(batch_size=None, batch_format="pyarrow")
    tables = [t for t in batches if t.num_rows]
    return pa.concat_tables(tables) if tables else tally(PROCESSED.empty_table())


def first_of_each(keys: np.ndarray) -> np.ndarray:
    """Whether each entry is the first with its key (0 is no key: always first)."""
    first = np.zeros(len(keys), bool)
    _, index = np.unique(keys, return_index=True)
    first[index] = True
    return first | (keys == 0)


def outcome_tally(batch: pa.Table) -> pa.Table:
    """Everything stats.json reports, in one pass: outcomes, splits, caption lengths, tokens."""
    stage, reason = pc.fill_null(batch["stage"], ""), pc.fill_null(batch["reason"], "")
    outcomes = counted("outcome", pc.binary_join_element_wise(stage, reason, "\t"))
    return pa.concat_tables([outcomes, caption_tally(batch.filter(is_kept(batch)))])


def caption_tally(records: pa.Table) -> pa.Table:
    """What stats.json says of curated records' captions (funnel.caption_statistics): the
    splits, caption lengths and tokens, overall and in each split (`SPLIT\tKEY`)."""
    tokens = pc.utf8_split_whitespace(records["caption"])
    lengths = pc.list_value_length(tokens)
    split = pc.fill_null(records["split"], "")
    # Each token beside the split of its caption, for the vocabulary of each split.
    token_split = pc.take(split, pc.list_parent_indices(tokens))
    flat = pc.list_flatten(tokens)
    return pa.concat_tables(
        [
            counted("split", records["split"]),
            counted("length", lengths),
            counted("token", flat),
            counted("split_length", by_split(split, lengths)),
            counted("split_token", by_split(token_split, flat)),
        ]
    )


def by_split(split: pa.Array, values: pa.Array) -> pa.Array:
    """`SPLIT\tVALUE` keys: a value counted within its split."""
    return pc.binary_join_element_wise(split, pc.cast(values, pa.string()), "\t")


def rejecting(batch: pa.Table, stage: str, reason: str, details: dict[int, str]) -> pa.Table:
    """The batch with the rows `details` names by index (those still in the running) rejected
    at `stage` for `reason`, each with its detail, losing caption, image and embeddings as
    reject() does for one row. Column by column: converting whole rows, with their entities,
    to Python values cost more than everything else in these passes."""
    kept = is_kept(batch).to_pylist()
    details = {i: detail for i, detail in details.items() if kept[i]}
    if not details:
        return batch
    rejected = np.zeros(batch.num_rows, bool)
    rejected[list(details)] = True
    dropped = pa.array(rejected)
    detail = batch["detail"].to_pylist()
    for i, text in details.items():
        detail[i] = text
    return replaced(
        batch,
        {
            "stage": pc.if_else(dropped, pa.scalar(stage), batch["stage"]),
            "reason": pc.if_else(dropped, pa.scalar(reason), batch["reason"]),
            "detail": pa.array(detail, pa.string()),
            "caption": pc.if_else(dropped, pa.scalar(None, pa.string()), batch["caption"]),
            "image": pc.if_else(dropped, pa.scalar(None, pa.binary()), batch["image"]),
            **{
                name: pc.if_else(dropped, pa.scalar([], VECTOR), batch[name]) for name in EMBEDDINGS
            },
        },
    )


def assign_splits(batch: pa.Table, split: SplitConfig) -> pa.Table:
    """After the global rules: each caption kept gets its image's id and the split of its
    image (its URL without one). A row that came with its split (the released dataset)
    keeps it."""
    splits, image_ids = batch["split"].to_pylist(), batch["image_id"].to_pylist()
    kept = np.flatnonzero(is_kept(batch).to_numpy(zero_copy_only=False))
    indices = pa.array(kept, pa.int64())  # typed: an empty one would have no take kernel
    images = batch["image"].take(indices).to_pylist()
    urls = batch["image_url"].take(indices).to_pylist()
    for i, image, url in zip(kept.tolist(), images, urls):
        image_ids[i] = record_image_id(image_ids[i], image)
        if splits[i] is None:
            splits[i] = (
                assign_split(image, split)
                if image is not None
                else split_of_key(url.encode(), split)
            )
    columns = {"split": pa.array(splits, pa.string()), "image_id": pa.array(image_ids, pa.string())}
    return replaced(batch, columns)


def write_outcomes(
    batch: pa.Table, split: SplitConfig, filesystem, directory: str, samples: int = 0
) -> pa.Table:
    """A batch's last pass, after the global rules: its captions' splits (`assign_splits`),
    its rows written to DIRECTORY/curated/ and DIRECTORY/rejected/ (files named by the
    batch's positions: a retried batch overwrites its own), and its `outcome_tally`, with
    its `sample_tally` of `samples` records when that is more than 0."""
    if not batch.num_rows:
        return outcome_tally(batch)
    batch, name = assign_splits(batch, split), batch_name(batch)
    curated, rejected = to_curated(batch), to_rejected(batch)
    write_batch(curated, filesystem, posixpath.join(directory, "curated"), name)
    write_batch(rejected, filesystem, posixpath.join(directory, "rejected"), name)
    tallies = outcome_tally(batch)
    if samples > 0:
        tallies = pa.concat_tables([tallies, sample_tally(curated, rejected, samples, name)])
    return tallies


# The kinds of `sample_tally`'s rows, beside the counts of `outcome_tally`.
SAMPLE_KEPT, SAMPLE_REJECTED = "sample.kept", "sample.rejected"
REJECTED_SAMPLES = 3  # examples of each stage and reason


def sample_tally(curated: pa.Table, rejected: pa.Table, n: int, name: str) -> pa.Table:
    """The examples stats.json's `samples` are chosen from, taken from the batch as it is
    written, so that no pass reads the output again: its first `n` curated records and first
    REJECTED_SAMPLES rejected ones of each stage and reason, as (kind, key, n) rows with the
    record as JSON in `key` (a curated one without its image bytes, which stay in its file:
    `image` is the file's name then) and its row in the file in `n`. The files are named so
    that their names sort as the output is read (`batch_name`)."""
    kinds, keys, rows = [], [], []
    for i, record in enumerate(curated.slice(0, n).to_pylist()):
        record["image"] = name if record.get("image") is not None else None
        kinds.append(SAMPLE_KEPT)
        keys.append(json.dumps({"file": name, "record": record}))
        rows.append(i)
    seen: dict[tuple[str, str], int] = {}
    stages, reasons = rejected["stage"].to_pylist(), rejected["reason"].to_pylist()
    for i, reason in enumerate(zip(stages, reasons)):
        if seen.get(reason, 0) < REJECTED_SAMPLES:
            seen[reason] = seen.get(reason, 0) + 1
            record = rejected.slice(i, 1).to_pylist()[0]
            kinds.append(SAMPLE_REJECTED)
            keys.append(json.dumps({"file": name, "record": record}))
            rows.append(i)
    return pa.table(
        {
            "kind": pa.array(kinds, pa.string()),
            "key": pa.array(keys, pa.string()),
            "n": pa.array(rows, pa.int64()),
        }
    )


def chosen_samples(
    tallies: pa.Table, n: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[tuple[str, int]]]:
    """From every batch's `sample_tally`: the first `n` curated records of the output in
    the order it is read (its files by name, each file's rows in order), and the first
    REJECTED_SAMPLES of each stage and reason among its rejected ones, grouped by stage and
    reason in the order each is first met; and the (file, row)
    of each curated sample whose image stayed in its file."""
    chosen = tallies.filter(pc.starts_with(tallies["kind"], "sample."))
    found: dict[str, list[tuple[str, int, dict]]] = {SAMPLE_KEPT: [], SAMPLE_REJECTED: []}
    for kind, key, row in zip(*(chosen[c].to_pylist() for c in ("kind", "key", "n"))):
        entry = json.loads(key)
        found[kind].append((entry["file"], row, entry["record"]))
    kept = sorted(found[SAMPLE_KEPT], key=lambda e: (e[0], e[1]))[:n]
    by_reason: dict[tuple[str, str], list[dict]] = {}  # in the order each is first met
    for _, _, record in sorted(found[SAMPLE_REJECTED], key=lambda e: (e[0], e[1])):
        examples = by_reason.setdefault((record["stage"], record["reason"]), [])
        if len(examples) < REJECTED_SAMPLES:
            examples.append(record)
    rejected = [record for examples in by_reason.values() for record in examples]
    images = [(file, row) for file, row, record in kept if record.get("image") is not None]
    return [record for _, _, record in kept], rejected, images


def without_samples(tallies: pa.Table) -> pa.Table:
    """The counts of `outcome_tally` among tallies that hold `sample_tally`'s rows too."""
    return tallies.filter(pc.invert(pc.starts_with(tallies["kind"], "sample.")))


def replaced(batch: pa.Table, columns: dict[str, Any]) -> pa.Table:
    for name, column in columns.items():
        batch = batch.set_column(batch.schema.get_field_index(name), name, column)
    return batch


def to_curated(batch: pa.Table) -> pa.Table:
    return batch.filter(is_kept(batch)).select(CURATED.names).cast(CURATED)


def to_rejected(batch: pa.Table) -> pa.Table:
    return batch.filter(pc.invert(is_kept(batch))).select(REJECTED.names).cast(REJECTED)
