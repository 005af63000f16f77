"""Curated records as WebDataset shards: plain tar files in which the files of one sample
share a key (`<id>.jpg`, `<id>.txt`, `<id>.json`), the format `webdataset` and most
large-scale training loaders stream from object storage.

One shard per split per batch of `samples_per_shard` records, written by the Ray task that
holds the batch (no data comes back to the driver) under a name of its own (the split and
its first record id: unique whatever the order tasks finish in). Once all are written they
are named as img2dataset names its shards, numbered in that name's order per split
(`shards/train/00000.tar`, `00001.tar`, ...): stable across reruns of the same input.

A sample is one id: records that share one (the same image URL and alt-text given twice)
are written once, by a second, small pass over just those records, so that no two tar
members and no two samples have the same name.
"""

from __future__ import annotations

import io
import json
import posixpath
import tarfile

import pyarrow as pa
import pyarrow.compute as pc
import ray.data

from conceptual import storage
from conceptual.config import Config

METADATA = ("id", "image_url", "page_url", "alt_text", "labels", "matched", "width", "height")


class WebDatasetConfig(Config):
    enabled: bool = False
    samples_per_shard: int = 1000


def add_member(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o444, 0  # mtime 0: reruns give equal bytes
    tar.addfile(info, io.BytesIO(data))


def _write_batch(batch: pa.Table, uri: str) -> pa.Table:
    written = []
    for split in pc.unique(batch["split"]).to_pylist():
        rows = batch.filter(pc.equal(batch["split"], split)).to_pylist()
        name = f"{split}-{rows[0]['id']}.tar"
        fs, path = storage.resolve(storage.join(uri, name))
        fs.create_dir(posixpath.dirname(path), recursive=True)
        with fs.open_output_stream(path) as stream, tarfile.open(fileobj=stream, mode="w|") as tar:
            for row in rows:
                add_member(tar, f"{row['id']}.jpg", row["image"])
                add_member(tar, f"{row['id']}.txt", row["caption"].encode())
                meta = {key: row[key] for key in METADATA} | {"split": split}
                add_member(tar, f"{row['id']}.json", json.dumps(meta).encode())
        written.append({"shard": name, "split": split, "samples": len(rows)})
    schema = pa.schema([("shard", pa.string()), ("split", pa.string()), ("samples", pa.int64())])
    return pa.Table.from_pylist(written, schema=schema)


def number_shards(uri: str, written: list[dict]) -> None:
    """Each split's shards renamed `SPLIT/00000.tar`, `SPLIT/00001.tar`... in the order of
    the names their tasks gave them."""
    counts: dict[str, int] = {}
    for row in sorted(written, key=lambda row: row["shard"]):
        index = counts[row["split"]] = counts.get(row["split"], -1) + 1
        fs, source = storage.resolve(storage.join(uri, row["shard"]))
        _, target = storage.resolve(storage.join(uri, row["split"], f"{index:05d}.tar"))
        fs.create_dir(posixpath.dirname(target), recursive=True)
        fs.move(source, target)


def repeated_ids(records: ray.data.Dataset) -> dict[str, int]:
    """How many records have each id that more than one has (a shuffle of the ids alone)."""
    counts = records.select_columns(["id"]).groupby("id").count()
    repeated = counts.map_batches(_repeated, batch_format="pyarrow").take_all()
    return {row["id"]: row["count()"] for row in repeated}


def _repeated(counts: pa.Table) -> pa.Table:
    return counts.filter(pc.greater(counts["count()"], 1))


def _with_ids(batch: pa.Table, ids: frozenset[str], inside: bool) -> pa.Table:
    """The records of a batch whose ids are among `ids` (inside=True) or not among them."""
    found = pc.is_in(batch["id"], pa.array(sorted(ids), pa.string()))
    return batch.filter(found if inside else pc.invert(found))


def _first(group: pa.Table) -> pa.Table:
    return group.slice(0, 1)


def write_shards(
    curated: ray.data.Dataset | None, uri: str, config: WebDatasetConfig
) -> dict[str, int]:
    """Write the curated records (with images) as shards under `uri` (`SPLIT/NNNNN.tar`); count
    the shards, the samples written and the `duplicates`: records not written because their
    id already was (samples + duplicates = records). None (a curation that kept nothing):
    no shards."""
    if curated is None:
        return {"shards": 0, "samples": 0, "duplicates": 0}
    repeated = repeated_ids(curated)
    ids = frozenset(repeated)
    parts = [curated]
    if ids:
        unique, copies = (
            curated.map_batches(
                _with_ids, fn_kwargs={"ids": ids, "inside": inside}, batch_format="pyarrow"
            )
            for inside in (False, True)
        )
        parts = [unique, copies.groupby("id").map_groups(_first, batch_format="pyarrow")]
    written = []
    for records in parts:
        written += records.map_batches(
            _write_batch,
            fn_kwargs={"uri": uri},
            batch_size=config.samples_per_shard,
            batch_format="pyarrow",
        ).take_all()
    number_shards(uri, written)
    return {
        "shards": len(written),
        "samples": sum(row["samples"] for row in written),
        "duplicates": sum(repeated.values()) - len(repeated),
    }
