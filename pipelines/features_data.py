"""The reader of a features job's output (records.FEATURES), for every model family: its
files, its summary (features.json: the CNN settings a model saves), a split's rows, the train
captions (for a vocabulary). Captioning reads a split grouped by image with all its
references here (to evaluate on, or to search for the nearest-neighbour baseline); the
retrievers' pairs, crops and clips build on these reads (pipelines/retrieval_data.py).
Training itself streams the rows through Ray Data.

Features rows are one per (caption record, crop); the records of one image share its
`image_id` (written once by curation, records.CURATED), and an image's references are the
captions of every record with that id.
"""

from __future__ import annotations

import posixpath
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from conceptual import storage
from conceptual.models.saving import FeatureSettings
from conceptual.registry import set_name
from conceptual.splits import drawn_subset, split_names

TRAIN_SPLIT = "train"
SUMMARY = "features.json"  # written by the features job beside features/


def feature_files(features_uri: str, allow_incomplete: bool = False) -> list[str]:
    """The Parquet files of a features job's output (features/ inside) or of the folder itself;
    the job must have finished (its _SUCCESS marker) unless `allow_incomplete`."""
    folder = storage.output_part(features_uri, "features", allow_incomplete)
    files = [f for f in storage.list_files(folder) if f.endswith(".parquet")]
    if not files:
        raise storage.StorageError(f"no features Parquet files under {features_uri}")
    return files


def features_summary(features_uri: str) -> dict[str, Any]:
    """features.json of a features output (FEATURES, or its features/ folder)."""
    folders = [features_uri]
    if posixpath.basename(features_uri.rstrip("/")) == "features":  # the folder inside
        folders.append(posixpath.dirname(features_uri.rstrip("/")))
    for folder in folders:
        uri = storage.join(folder, SUMMARY)
        if storage.exists(uri):
            return storage.read_json(uri)
    raise ValueError(
        f"no {SUMMARY} at {features_uri}: models and indexes record the CNN settings the "
        "features were made with (the features job writes that file)"
    )


def feature_settings(features_uri: str) -> FeatureSettings:
    """The CNN and image size the features were made with (features.json), saved with a
    model trained on them so that captioning or embedding an image computes the same."""
    summary = features_summary(features_uri)
    return FeatureSettings(model=summary["model"], image_size=summary["image_size"])


def read_table(
    files: list[str], uri: str, columns: list[str], where: pc.Expression | None = None
) -> pa.Table:
    """The `columns` of the rows `where` holds, from every file (features or clips)."""
    fs, _ = storage.resolve(uri)
    tables = []
    for path in files:
        with fs.open_input_file(path) as f:
            tables.append(pq.read_table(f, columns=columns, filters=where))
    return pa.concat_tables(tables)


def has_column(files: list[str], uri: str, name: str) -> bool:
    """Whether the files have the column (the first one's schema says for all)."""
    fs, _ = storage.resolve(uri)
    with fs.open_input_file(files[0]) as f:
        return name in pq.read_schema(f).names


def read_rows(
    files: list[str], uri: str, split: str, columns: list[str], every_crop: bool = False
) -> pa.Table:
    """One split's rows (its centre crops unless `every_crop`), read on the driver
    (vocabularies and eval sets are small); features without image ids are refused when
    `columns` asks for them."""
    wanted = pc.field("split").isin(split_names(split))
    if not every_crop:
        wanted &= pc.field("crop") == 0
    reads_images = "image_id" in columns
    if reads_images and not has_column(files, uri, "image_id"):
        check_image_ids(None, uri)
    table = read_table(files, uri, columns, wanted)
    if reads_images:
        check_image_ids(table["image_id"], uri)
    return table


def check_image_ids(image_ids: pa.Array | pa.ChunkedArray | None, uri: str) -> None:
    """Refuse features without an image id in every row (None: without the column), as
    features jobs made them before it was written."""
    if image_ids is None or image_ids.null_count:
        raise ValueError(
            f"the features at {uri} have rows without an image_id (made by an older features "
            "job): run the features job again"
        )


def train_captions(files: list[str], uri: str) -> list[str]:
    """One caption per record: augmented crops repeat it and must not inflate word counts."""
    return read_rows(files, uri, TRAIN_SPLIT, ["caption"])["caption"].to_pylist()


def drawn_train(
    files: list[str], uri: str, fraction: float, seed: int
) -> tuple[list[str], list[str]]:
    """(the images, their captions) of a seeded draw of `fraction` of the train split's
    images (splits.drawn_subset): a run on part of its data, the paper's Figure 3."""
    table = read_rows(files, uri, TRAIN_SPLIT, ["image_id", "caption"])
    ids = table["image_id"].to_pylist()
    drawn = set(drawn_subset(sorted(set(ids)), fraction, seed))
    return sorted(drawn), [c for i, c in zip(ids, table["caption"].to_pylist()) if i in drawn]


def caption_languages(files: list[str], uri: str) -> set[str]:
    """The languages of the captions (features without a `language` column, or a null one,
    are English: the features of curated records)."""
    fs, _ = storage.resolve(uri)
    found: set[str] = set()
    for path in files:
        with fs.open_input_file(path) as f:
            parquet = pq.ParquetFile(f)
            if "language" not in parquet.schema_arrow.names:
                found.add("en")
                continue
            column = parquet.read(columns=["language"])["language"]
        found.update(language or "en" for language in pc.unique(column).to_pylist())
    return found


def train_fluency(files: list[str], uri: str) -> np.ndarray:
    """The fluency scores of the train captions (NaN where a caption has none)."""
    if not has_column(files, uri, "fluency"):
        return np.full(len(train_captions(files, uri)), np.nan)
    scores = read_rows(files, uri, TRAIN_SPLIT, ["fluency"])["fluency"].cast(pa.float64())
    return pc.fill_null(scores, np.nan).to_numpy()


def split_images(
    files: list[str], uri: str, split: str, max_images: int | None = None, grids: bool = True
) -> dict[str, Any]:
    """A split grouped by image, in a stable order (the same subset for the same
    `max_images`): `keys` (the image ids), `ids` (one record id per image, to find its
    photo), `pooled`, `grid` (unless `grids` is off: the grid is 64 times the pooled
    vector's size), `references` (key -> every caption of the image) and `feature_dim`."""
    columns = ["id", "image_id", "caption", "pooled", *(["grid"] if grids else [])]
    rows = read_rows(files, uri, split, columns).to_pylist()
    if not rows:
        raise ValueError(f"no {split!r} rows in the features at {uri}")
    images: dict[str, dict[str, Any]] = {}
    for row in rows:
        image = images.setdefault(row["image_id"], {**row, "references": []})
        image["references"].append(row["caption"])
    keys = sorted(images)[:max_images]
    grouped = {
        "keys": keys,
        "ids": [images[k]["id"] for k in keys],
        "pooled": [np.asarray(images[k]["pooled"], dtype=np.float32) for k in keys],
        "references": {k: images[k]["references"] for k in keys},
        "feature_dim": len(rows[0]["pooled"]),
    }
    if grids:
        grouped["grid"] = [np.asarray(images[k]["grid"], dtype=np.float32) for k in keys]
    return grouped


def eval_set_name(features_uri: str, split: str, eval_set: dict[str, Any]) -> str:
    """What scores were measured on: CIDEr depends on the set (its document frequencies
    come from the references), so models are only compared on the same one. Named by the
    dataset folder, the split, the number of images and a digest of their references: the
    same set read from another place (a copy, a submitted job's path) keeps its name, and
    two datasets that happen to share a folder name do not."""
    return set_name(features_uri, split, len(eval_set["keys"]), eval_set["references"])


def source_images(features_uri: str, ids: list[str]) -> dict[str, bytes]:
    """The photos of the given record ids, from the curated data the features were computed
    from (features.json names it); empty when that data is not reachable from here."""
    summary_uri = storage.join(features_uri, SUMMARY)
    if not ids or not storage.exists(summary_uri):
        return {}
    data_uri = storage.read_json(summary_uri).get("curated")
    if not data_uri or not storage.exists(data_uri):
        return {}
    fs, _ = storage.resolve(data_uri)
    wanted = pc.field("id").isin(ids)
    found: dict[str, bytes] = {}
    for path in storage.list_files(data_uri):
        if path.endswith(".parquet"):
            with fs.open_input_file(path) as f:
                table = pq.read_table(f, columns=["id", "image"], filters=wanted)
            found.update(zip(table["id"].to_pylist(), table["image"].to_pylist()))
    return {i: found[i] for i in ids if found.get(i)}
