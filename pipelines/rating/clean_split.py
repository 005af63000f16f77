"""A split of a curated dataset cleaned by people (conceptual.rating.cleaning): the records
of `split` whose caption `min_good` or more raters judged GOOD, the other splits as they were.

    curated data + caption_quality task set + ratings (the page's database, or a CSV)
        -> OUTPUT/curated/*.parquet   the records kept, each file as in the input (its
                                      schema, its name), the other splits' rows unchanged
           OUTPUT/rejected/*.parquet  records.REJECTED: the split's records dropped, with
                                      stage `clean_split`, the reason and a detail
           OUTPUT/stats.json          the funnel of the split (input = its records), what was
                                      dropped by reason, Table 3 for each split written
           OUTPUT/_SUCCESS            written last
        -> an MLflow run (experiment `curation`): the same, as a curation run logs it

Files are read a batch at a time, so memory holds one batch of records (with their photos),
never a file. No Ray: this is a filter over files, bound by reading and writing them.
"""

from __future__ import annotations

import posixpath
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from conceptual import funnel, storage, tracking
from conceptual.pipelines.dataflow.rows import caption_tally
from conceptual.pipelines.rating.rating_results import ratings
from conceptual.pipelines.rating.rating_tasks import curated_table
from conceptual.rating.cleaning import STAGE, Judged, judgements, verdict
from conceptual.rating.tasks import read_task_set
from conceptual.records import REJECTED

CURATED, REJECTED_PART, STATS = "curated", "rejected", "stats.json"
SCORE = "alignment_score"
BATCH_ROWS = 256  # records read at once: with their photos, a few tens of MB
SAMPLES = 50  # kept and dropped records logged to MLflow, as a curation logs them


class Writers:
    """One Parquet writer per output file, opened at its first row (no empty files)."""

    def __init__(self, stack: ExitStack, root: str) -> None:
        self.stack, self.root, self.open = stack, root, {}
        self.fs, self.path = storage.resolve(root)

    def write(self, name: str, rows: pa.Table) -> None:
        if not rows.num_rows:
            return
        if name not in self.open:
            path = posixpath.join(self.path, name)
            self.fs.create_dir(posixpath.dirname(path), recursive=True)
            stream = self.stack.enter_context(self.fs.open_output_stream(path))
            self.open[name] = self.stack.enter_context(pq.ParquetWriter(stream, rows.schema))
        self.open[name].write_table(rows)


def batches(folder: str) -> Iterator[tuple[str, pa.Table]]:
    """(the file's path under `folder`, a batch of its records) for every Parquet file."""
    fs, root = storage.resolve(folder)
    for path in storage.list_files(folder):
        if path.endswith(".parquet"):
            with fs.open_input_file(path) as f:
                for batch in pq.ParquetFile(f).iter_batches(BATCH_ROWS):
                    yield posixpath.relpath(path, root), pa.Table.from_batches([batch])


def judge(
    batch: pa.Table, split: str, judged: dict[str, Judged], min_good: int
) -> tuple[pa.Table, pa.Table, pa.Table]:
    """(the batch's rows to keep, the split's rows kept, REJECTED rows of those dropped)."""
    in_split = pc.fill_null(pc.equal(batch["split"], split), False).to_pylist()
    # What a caption_quality item of the record showed (pipelines/rating/rating_tasks.caption_item).
    texts = batch["text"] if "text" in batch.column_names else batch["caption"]
    shown = pc.coalesce(texts, batch["caption"]).to_pylist()
    ids = batch["id"].to_pylist()
    keep, dropped = [], []
    for i, chosen in enumerate(in_split):
        outcome = verdict(ids[i], shown[i], judged, min_good) if chosen else None
        keep.append(outcome is None)
        if outcome is not None:
            dropped.append((i, *outcome))
    kept = batch.filter(pa.array(keep))
    taken = batch.take([i for i, *_ in dropped]) if dropped else batch.slice(0, 0)
    rejected = pa.table(
        {
            "id": taken["id"],
            "stage": pa.array([STAGE] * len(dropped), pa.string()),
            "reason": pa.array([reason for _, reason, _ in dropped], pa.string()),
            "detail": pa.array([detail for *_, detail in dropped], pa.string()),
            **{name: taken[name] for name in ("image_url", "page_url", "alt_text")},
            # Curated data from before the alignment score has no such column.
            SCORE: taken[SCORE] if SCORE in taken.column_names else pa.nulls(len(dropped)),
        },
        schema=REJECTED,
    )
    return kept, kept.filter(pc.fill_null(pc.equal(kept["split"], split), False)), rejected


def refuse_unrelated(folder: str, split: str, judged: dict[str, Judged], what: str) -> None:
    """ValueError, before anything is written, when the data has no record of the split or
    none of them has an item in the task set: every record would be dropped."""
    ids = curated_table(folder, ["id"], pc.field("split") == split)["id"].to_pylist()
    if not ids:
        raise ValueError(f"{what}: the data has no records of the split {split!r}")
    if not judged.keys() & set(ids):
        raise ValueError(
            f"{what}: no record of the {split} split has an item in the task set; make the "
            "tasks from this data (rating_tasks --kind caption_quality --data CURATED)"
        )


@dataclass
class Written:
    """What write_judged wrote: the rejections' reasons, the records counted (the split's,
    those kept, the other splits' rows copied), the kept captions' tallies, and samples."""

    reasons: Counter[str] = field(default_factory=Counter)
    counts: Counter[str] = field(default_factory=Counter)
    tallies: list[pa.Table] = field(default_factory=list)
    samples: dict[str, list[dict[str, Any]]] = field(
        default_factory=lambda: {"kept": [], "rejected": []}
    )


def write_judged(
    folder: str, output_uri: str, split: str, judged: dict[str, Judged], min_good: int
) -> Written:
    """Each batch of the curated `folder` judged and written: what is kept to curated/
    (the other splits' rows as they are), the split's records dropped to rejected/."""
    written = Written()
    with ExitStack() as stack:
        curated = Writers(stack, storage.join(output_uri, CURATED))
        rejected = Writers(stack, storage.join(output_uri, REJECTED_PART))
        for name, batch in batches(folder):
            kept, kept_in_split, dropped = judge(batch, split, judged, min_good)
            curated.write(name, kept)
            rejected.write(name, dropped)
            written.reasons.update(dropped["reason"].to_pylist())
            written.counts.update(
                input=kept_in_split.num_rows + dropped.num_rows,
                kept=kept_in_split.num_rows,
                copied=kept.num_rows - kept_in_split.num_rows,
            )
            # Per batch, then summed: a tally of every token of a large dataset stays small.
            written.tallies.append(caption_tally(kept.select(["caption", "split"])))
            if len(written.tallies) > 64:
                written.tallies = [summed(written.tallies)]
            for part, table in (("kept", kept_in_split), ("rejected", dropped)):
                room = SAMPLES - len(written.samples[part])
                written.samples[part] += table.slice(0, max(room, 0)).to_pylist()
    return written


def funnel_of(written: Written, output_uri: str) -> dict[str, Any]:
    """The split's funnel and the kept captions' statistics, once the rows on disk are the
    rows counted (funnel.AccountingError if not)."""
    reasons, counts = written.reasons, written.counts
    on_disk = {
        "curated": storage.written_rows(storage.join(output_uri, CURATED)),
        "rejected": storage.written_rows(storage.join(output_uri, REJECTED_PART)),
    }
    expected = {"curated": counts["kept"] + counts["copied"], "rejected": sum(reasons.values())}
    if on_disk != expected:
        raise funnel.AccountingError(f"written {on_disk}, expected {expected}")
    dropped_by_reason = {STAGE: dict(reasons)} if reasons else {}
    stats = funnel.build(counts["input"], counts["kept"], dropped_by_reason, (STAGE,))
    counted = funnel.tally(summed(written.tallies))
    stats |= funnel.caption_statistics(counted)
    stats["splits"] = dict(sorted(counted.get("split", {}).items()))
    return stats


def summed(tallies: list[pa.Table]) -> pa.Table:
    """Partial (kind, key, n) counts summed into one table of that shape."""
    total = pa.concat_tables(tallies).group_by(["kind", "key"]).aggregate([("n", "sum")])
    return pa.table({"kind": total["kind"], "key": total["key"], "n": total["n_sum"]})


def run(
    data_uri: str,
    tasks_uri: str,
    output_uri: str,
    split: str,
    min_good: int,
    *,  # two optional sources of the ratings, both paths: named, never mixed up
    ratings_csv: str | None = None,
    db: str | None = None,
    experiment: str = "curation",
) -> tuple[dict[str, Any], str]:
    """The clean_split job, in one MLflow run: the cleaned dataset written to `output_uri`.
    Returns (stats.json's content and the samples, `samples`; the run's id). ValueError when
    the task set cannot clean the data (its kind, no record of the split among its items)."""
    with tracking.start_run(experiment, job=STAGE, tags={"split": split}) as active:
        started = time.monotonic()
        storage.refuse_overlap(
            {"the output": output_uri}, {"the data": data_uri, "tasks": tasks_uri}
        )
        folder = storage.output_part(data_uri, CURATED)
        tasks = read_task_set(tasks_uri)
        rows = ratings(tasks, ratings_csv, db)
        judged = judgements(tasks, rows)
        refuse_unrelated(folder, split, judged, f"{data_uri} and the task set {tasks.name}")
        for part in (storage.SUCCESS, CURATED, REJECTED_PART, STATS):
            storage.delete(storage.join(output_uri, part))
        written = write_judged(folder, output_uri, split, judged, min_good)
        stats = funnel_of(written, output_uri)
        stats[STAGE] = {
            "split": split,
            "min_good": min_good,
            "copied": written.counts["copied"],  # the other splits' records, unchanged
            "data": data_uri,
            "tasks": tasks_uri,
            "task_set": tasks.name,
            "raters_per_item": tasks.raters,
            "ratings": ratings_csv or db or "the rating page's database",
            "ratings_read": len(rows),
        }
        stats["seconds_by_phase"] = {"clean": round(time.monotonic() - started, 2)}
        stats["samples"] = written.samples
        stats["mlflow_run_id"] = active.info.run_id
        storage.write_json(storage.join(output_uri, STATS), funnel.without_samples(stats))
        storage.write_json(
            storage.join(output_uri, storage.SUCCESS),
            {"input": stats["input"], "kept": stats["kept"], "copied": stats[STAGE]["copied"]},
        )
        tracking.log_params(
            {k: v for k, v in stats[STAGE].items() if k not in ("copied", "ratings_read")}
        )
        funnel.log_to_mlflow(stats, data_uri, output_uri)
        return stats, active.info.run_id
