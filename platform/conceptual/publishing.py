"""Curated records as a Hugging Face dataset: the layout `datasets.load_dataset(FOLDER)` and
the Hub read, with the features of the released Conceptual Captions.

    OUTPUT/data/{split}-NNNNN-of-NNNNN.parquet   image_url, caption (+ image with --images
                                                 embed): the `default` config
    OUTPUT/README.md                             the dataset card (conceptual.dataset_card)

Records with labels are published as the released card has them, in two configs:

    OUTPUT/data/unlabeled/{split}-*.parquet      image_url, caption: `unlabeled`, the default
    OUTPUT/data/labeled/{split}-*.parquet        + labels, MIDs, confidence_scores, of the
                                                 records that have labels: `labeled`

With format=tsv, also each split as the released TSV, byte for byte its layout (`caption<TAB>
image_url`, no header, UTF-8, "\n" line ends), under the released names:

    OUTPUT/tsv/Train_GCC-training.tsv, Validation_GCC-1.1.0-Validation.tsv, Test_GCC-test.tsv

import_conceptual reads them back as they are. A record whose caption or URL holds a tab or a
line break cannot be written in that layout: it is left out of the TSV and counted.

The curated splits are named as the Hub names them (val -> validation). The records are
streamed file by file, batch by batch, into one open writer per split: nothing holds more
than a batch. Each Parquet file carries its `datasets` features in its schema metadata
(`huggingface`), so the `image` column decodes as the Image feature wherever it is read.
"""

from __future__ import annotations

import json
import math
import os
import posixpath
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import Field

from conceptual import dataset_card, storage
from conceptual.config import Config
from conceptual.dataset_card import ConfigFiles, Published

HF_SPLITS = {"train": "train", "val": "validation", "validation": "validation", "test": "test"}
DATA = "data"
CARD = "README.md"


class PublishConfig(Config):
    name: str | None = None  # the card's pretty name; None: the curated output's folder name
    images: Literal["urls", "embed"] = "urls"  # embed: an `image` column with the JPEG bytes
    # Never invented: without one the card says it must be set, and the job warns.
    license: str | None = None
    rows_per_file: int = Field(100_000, ge=1)  # Parquet files of image URLs and captions
    # Files with embedded images are sized by their images' bytes, as the Hub splits them.
    max_file_bytes: int = Field(500_000_000, ge=1)
    batch_rows: int = Field(1024, ge=1)  # rows read and written at a time (images: 1/16)
    allow_incomplete: bool = False  # publish a curation output without its _SUCCESS marker
    # hub: the Hub layout; tsv: that and each split as the released TSV (module docstring)
    format: Literal["hub", "tsv"] = "hub"
    experiment: str = "publish"


# The columns of the released dataset's `labeled` config, as `datasets` features (JSON).
STRING = {"dtype": "string", "_type": "Value"}
FEATURES = {
    "image_url": STRING,
    "caption": STRING,
    "labels": {"feature": STRING, "_type": "Sequence"},
    "MIDs": {"feature": STRING, "_type": "Sequence"},
    "confidence_scores": {"feature": {"dtype": "float64", "_type": "Value"}, "_type": "Sequence"},
    "image": {"_type": "Image"},
}
ARROW = {
    "image_url": pa.string(),
    "caption": pa.string(),
    "labels": pa.list_(pa.string()),
    "MIDs": pa.list_(pa.string()),
    "confidence_scores": pa.list_(pa.float64()),
    "image": pa.struct([("bytes", pa.binary()), ("path", pa.string())]),
}
LABELS = ("labels", "MIDs", "confidence_scores")
TSV = "tsv"
# The released files' names; the test split was never released, its name follows theirs.
TSV_FILES = {
    "train": "Train_GCC-training.tsv",
    "validation": "Validation_GCC-1.1.0-Validation.tsv",
    "test": "Test_GCC-test.tsv",
}


@dataclass
class Survey:
    """What a first pass over the curated files finds, from their split and labels columns
    and their footers: enough to name every output file before writing one."""

    files: list[str]
    rows: dict[str, int]  # per Hub split
    labelled_rows: dict[str, int]  # per Hub split, the records with at least one label
    images: bool  # the records carry image bytes
    image_bytes_per_row: float
    languages: list[str]


def survey(curated: str) -> Survey:
    fs, _ = storage.resolve(curated)
    files = [path for path in storage.list_files(curated) if path.endswith(".parquet")]
    if not files:
        raise storage.StorageError(f"no curated Parquet files under {curated}")
    rows: Counter = Counter()
    labelled: Counter = Counter()
    images, image_bytes, languages = False, 0, set()
    for path in files:
        with fs.open_input_file(path) as f:
            parquet = pq.ParquetFile(f)
            names = parquet.schema_arrow.names
            if "split" not in names or "caption" not in names:
                raise ValueError(f"{path} holds no curated records (no split or caption column)")
            wanted = ["split", *(c for c in ("labels", "language") if c in names)]
            table = parquet.read(columns=wanted)
            splits = [hub_split(s) for s in table["split"].to_pylist()]
            rows.update(splits)
            if "labels" in names:
                has = has_labels(table["labels"]).to_pylist()
                labelled.update(split for split, kept in zip(splits, has) if kept)
            if "language" in names:
                languages |= {x or "en" for x in pc.unique(table["language"]).to_pylist()}
            else:
                languages.add("en")
            if "image" in names:  # from the footers: the image bytes are not read here
                meta = parquet.metadata
                at = [parquet.schema.column(i).path for i in range(meta.num_columns)].index("image")
                for chunk in (meta.row_group(g).column(at) for g in range(meta.num_row_groups)):
                    image_bytes += chunk.total_uncompressed_size
                    stats = chunk.statistics
                    nulls = stats.null_count if stats is not None and stats.has_null_count else 0
                    images |= chunk.num_values > nulls
    total = sum(rows.values())
    order = list(dict.fromkeys(HF_SPLITS.values()))  # as the Hub lists them
    return Survey(
        files,
        {split: rows[split] for split in order if rows[split]},
        {split: labelled[split] for split in order if labelled[split]},
        images,
        image_bytes / max(total, 1),
        sorted(languages),
    )


def hub_split(split: str | None) -> str:
    if split not in HF_SPLITS:
        raise ValueError(f"a curated record has split {split!r}: train, val or test expected")
    return HF_SPLITS[split]


def has_labels(labels: pa.ChunkedArray | pa.Array) -> pa.Array:
    """Per record: whether its `labels` list holds any."""
    return pc.fill_null(pc.greater(pc.list_value_length(labels), 0), False)


def configs_of(found: Survey, config: PublishConfig) -> list[ConfigFiles]:
    """The configs to write: one `default` of the records; with labels, the released card's
    `unlabeled` (every record) and `labeled` (those with labels, with the label columns)."""
    image = ["image"] if config.images == "embed" else []
    plain = ["image_url", "caption", *image]
    if not found.labelled_rows:
        return [ConfigFiles("default", DATA, plain, dict(found.rows))]
    return [
        ConfigFiles("unlabeled", f"{DATA}/unlabeled", plain, dict(found.rows)),
        ConfigFiles(
            "labeled",
            f"{DATA}/labeled",
            ["image_url", "caption", *LABELS, *image],
            dict(found.labelled_rows),
        ),
    ]


def schema_of(columns: list[str]) -> pa.Schema:
    features = {name: FEATURES[name] for name in columns}
    return pa.schema(
        [(name, ARROW[name]) for name in columns],
        metadata={"huggingface": json.dumps({"info": {"features": features}})},
    )


def file_name(split: str, index: int, count: int) -> str:
    return f"{split}-{index:05d}-of-{count:05d}.parquet"


HUB_FILE = re.compile(r".+-\d{5}-of-\d{5}\.parquet")  # any name file_name gives


def label_field(labels: pa.ListArray, name: str, kind: pa.DataType) -> pa.ListArray:
    """One field of the curated `labels` (a list of LABEL structs) as a list per record."""
    values = pc.struct_field(labels.values, name).cast(kind)
    return pa.ListArray.from_arrays(labels.offsets, values, mask=labels.is_null())


def to_hub(batch: pa.Table, columns: list[str], schema: pa.Schema) -> pa.Table:
    """Curated records as the published rows."""
    arrays: dict[str, pa.Array] = {
        "image_url": batch["image_url"].combine_chunks(),
        "caption": batch["caption"].combine_chunks(),
    }
    if "labels" in columns:
        labels = batch["labels"].combine_chunks()
        arrays["labels"] = label_field(labels, "name", pa.string())
        arrays["MIDs"] = label_field(labels, "mid", pa.string())
        arrays["confidence_scores"] = label_field(labels, "score", pa.float64())
    if "image" in columns:
        paths = pc.binary_join_element_wise(batch["id"], ".jpg", "").combine_chunks()
        arrays["image"] = pa.StructArray.from_arrays(
            [batch["image"].combine_chunks(), paths], names=["bytes", "path"]
        )
    return pa.Table.from_arrays([arrays[c] for c in columns], schema=schema)


class SplitWriter:
    """The files of one split, `per_file` rows each, opened as rows arrive."""

    def __init__(self, uri: str, split: str, rows: int, per_file: int, schema: pa.Schema):
        self.uri, self.split, self.per_file, self.schema = uri, split, per_file, schema
        self.count = max(1, math.ceil(rows / per_file))
        self.names: list[str] = []
        self.writer: pq.ParquetWriter | None = None
        self.in_file = 0

    def write(self, table: pa.Table) -> None:
        while table.num_rows:
            if self.writer is None:
                self.names.append(file_name(self.split, len(self.names), self.count))
                fs, path = storage.resolve(storage.join(self.uri, self.names[-1]))
                fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
                self.writer = pq.ParquetWriter(path, self.schema, filesystem=fs)
                self.in_file = 0
            room = self.per_file - self.in_file
            self.writer.write_table(table.slice(0, room))
            self.in_file += min(room, table.num_rows)
            table = table.slice(room)
            if self.in_file >= self.per_file:
                self.close()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


def write(curated: str, output: str, config: PublishConfig) -> Published:
    """The curated records under `curated` as the Hub layout under `output`/data, in one
    config or, for records with labels, the released card's two (module docstring)."""
    found = survey(curated)
    embed = config.images == "embed"
    if embed and not found.images:
        raise ValueError(
            f"the records under {curated} carry no images (a text-only curation): publish "
            "them with --images urls"
        )
    per_file = config.rows_per_file
    if embed:
        per_file = max(1, int(config.max_file_bytes // max(found.image_bytes_per_row, 1)))
    # The files an earlier publish wrote, by their names: anyone else's files in data/ stay.
    storage.delete_written(storage.join(output, DATA), HUB_FILE.fullmatch)
    published = Published(configs=configs_of(found, config), languages=found.languages)
    tsv = TsvWriter(storage.join(output, TSV)) if config.format == "tsv" else None
    schemas = {c.name: schema_of(c.columns) for c in published.configs}
    writers = {
        (c.name, split): SplitWriter(
            storage.join(output, c.directory), split, rows, per_file, schemas[c.name]
        )
        for c in published.configs
        for split, rows in c.splits.items()
    }
    fs, _ = storage.resolve(curated)
    batch_rows = max(1, config.batch_rows // 16) if embed else config.batch_rows
    for path in found.files:
        with fs.open_input_file(path) as f:
            parquet = pq.ParquetFile(f)
            names = parquet.schema_arrow.names
            read = ["id", "split", "image_url", "caption"]
            read += [c for c in ("labels", "entities") if c in names]
            read += ["image"] if embed else []
            for batch in parquet.iter_batches(batch_size=batch_rows, columns=read):
                batch = pa.Table.from_batches([batch])
                count_entities(batch, published)
                # Each record's Hub split, once for every config and the TSV.
                splits = pa.array([hub_split(s) for s in batch["split"].to_pylist()], pa.string())
                for target in published.configs:
                    write_config(batch, splits, target, schemas[target.name], writers)
                if tsv is not None:
                    tsv.write(batch, splits.to_pylist())
    for (name, split), writer in writers.items():
        writer.close()
        target = next(c for c in published.configs if c.name == name)
        target.files[split] = writer.names
        folder = storage.join(output, target.directory)
        out_fs, _ = storage.resolve(folder)
        target.bytes[split] = sum(
            out_fs.get_file_info(storage.resolve(storage.join(folder, file))[1]).size
            for file in writer.names
        )
    if tsv is not None:
        published.tsv = tsv.close()
    return published


class TsvWriter:
    """Each split's records as the released TSV, one open stream per split."""

    def __init__(self, uri: str):
        self.uri = uri
        storage.delete_written(uri, set(TSV_FILES.values()).__contains__)
        self.streams: dict[str, Any] = {}
        self.rows: Counter = Counter()
        self.left_out: Counter = Counter()

    def write(self, batch: pa.Table, splits: list[str]) -> None:
        captions, urls = batch["caption"].to_pylist(), batch["image_url"].to_pylist()
        lines: dict[str, list[str]] = {}
        for split, caption, url in zip(splits, captions, urls):
            if any(c in field for field in (caption, url) for c in "\t\n\r"):
                self.left_out[split] += 1  # the layout has no way to hold it
                continue
            lines.setdefault(split, []).append(f"{caption}\t{url}\n")
        for split, written in lines.items():
            if split not in self.streams:
                fs, path = storage.resolve(storage.join(self.uri, TSV_FILES[split]))
                fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
                self.streams[split] = fs.open_output_stream(path)
            self.streams[split].write("".join(written).encode())
            self.rows[split] += len(written)

    def close(self) -> dict[str, Any]:
        for stream in self.streams.values():
            stream.close()
        return {
            "files": {split: f"{TSV}/{TSV_FILES[split]}" for split in self.streams},
            "rows": dict(self.rows),
            "left_out": dict(self.left_out),
        }


def write_config(
    batch: pa.Table,
    splits: pa.Array,
    target: ConfigFiles,
    schema: pa.Schema,
    writers: dict[tuple[str, str], SplitWriter],
) -> None:
    """A batch of curated records (`splits`: each one's Hub split) into one config's split
    files."""
    if "labels" in target.columns:  # `labeled` holds the records that have labels
        kept = has_labels(batch["labels"])
        batch, splits = batch.filter(kept), splits.filter(kept)
    rows = to_hub(batch, target.columns, schema)
    for split in target.splits:
        writers[target.name, split].write(rows.filter(pc.equal(splits, split)))
    if target.example is None and rows.num_rows:
        target.example = rows.slice(0, 1).to_pylist()[0]


def count_entities(batch: pa.Table, published: Published) -> None:
    """The card's hypernymization figures: captions that had something replaced or removed,
    and each entity label's count (PERSON, DATE, GPE...)."""
    if "entities" not in batch.column_names:
        return
    for entities in batch["entities"].to_pylist():
        changed = [e for e in entities or () if e.get("action") in ("replaced", "removed")]
        if changed:
            published.hypernymized += 1
            published.entity_labels.update(e.get("label") or "other" for e in changed)


def shown(source: str, output: str) -> str:
    """`source` as the card published in `output` names it: relative to the published folder
    where both are in one place (`../cur`: a local disk, one bucket), else by its last two
    parts; never a machine's absolute path, which would be published with the card."""

    def place(uri: str) -> tuple[str, str]:  # (scheme and bucket, or ""; the path in it)
        scheme, _, path = uri.rpartition("://")
        if not scheme:
            return "", os.path.abspath(uri)
        bucket, _, key = path.partition("/")
        return f"{scheme}://{bucket}", "/" + key.strip("/")

    (where, path), (published_where, published) = place(source), place(output)
    if where == published_where:
        return posixpath.relpath(path, published)
    return "/".join(path.strip("/").split("/")[-2:])


def shown_tracking(uri: str) -> str:
    """A tracking server's URI as it is (its credentials already out); a store on this
    machine's disk (sqlite:////home/.../mlflow.db) by its file's name alone."""
    if uri.startswith(("http://", "https://")):
        return uri
    scheme, _, path = uri.rpartition(":")
    return f"{scheme}:///…/{posixpath.basename(path)}" if scheme else posixpath.basename(uri)


def publish(data_uri: str, output: str, config: PublishConfig) -> dict[str, Any]:
    """The publish job in one MLflow run: the curated records under `data_uri` (a curation
    or import output, or its curated/ folder) written in the Hub layout under `output` with
    their card; the run logs what it read and wrote (conceptual.lineage)."""
    import mlflow

    from conceptual import lineage, tracking
    from conceptual.config import to_yaml
    from conceptual.uris import redact_text

    curated = storage.output_part(data_uri, "curated", config.allow_incomplete)
    source, _ = lineage.locate(curated)
    origin = lineage.origin(source)
    # A previous run's marker goes first: from here on, the output is visibly incomplete.
    storage.delete(storage.join(output, storage.SUCCESS))
    storage.delete(storage.join(output, CARD))
    with tracking.start_run(config.experiment, job="publish_dataset") as active:
        tracking.log_config(config)
        lineage.log_read(curated)
        published = write(curated, output, config)
        facts = dataset_card.CardFacts(
            name=config.name or source.rstrip("/").rsplit("/", 1)[-1],
            source=shown(source, output),
            published=published,
            license=config.license,
            origin=origin,
            curation_config=run_config(origin["run_id"]),
            publish_config=redact_text(to_yaml(config)),  # a card is for strangers
            runs={"curation": origin["run_id"], "publish": active.info.run_id},
            tracking_uri=shown_tracking(tracking.printable_tracking_uri()),
            harvest=lineage.harvest_behind(origin),
        )
        card = dataset_card.render(facts)
        storage.write_bytes(storage.join(output, CARD), card.encode())
        written = lineage.log_written(output)
        mlflow.log_text(card, CARD)
        mlflow.log_metrics({f"rows.{split}": n for split, n in published.splits.items()})
    storage.write_json(storage.join(output, storage.SUCCESS), published.splits)
    return {
        "source": source,
        "splits": published.splits,
        "files": published.configs[0].files,
        "columns": published.columns,
        "configs": {c.name: c.columns for c in published.configs},
        "tsv": published.tsv,
        "digest": written.digest,
        "run_id": active.info.run_id,
        "license": config.license,
    }


def run_config(run_id: str | None) -> str | None:
    """The config.yaml a run logged (the curation's), or None where the tracking store does
    not have it (a dataset published on another platform's store)."""
    if not run_id:
        return None
    import mlflow

    try:
        return mlflow.artifacts.load_text(f"runs:/{run_id}/config.yaml")
    except Exception:  # no such run or artifact here: the card says so
        return None
