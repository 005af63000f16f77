"""A features job's output as captioning needs it: the train captions (for the vocabulary),
and a split grouped by image with all its references (to evaluate on, or to search for the
nearest-neighbour baseline). Training itself streams the rows through Ray Data.

Features rows are one per (caption record, crop); the records of one image share its
`image_id` (records.image_id, computed once by the features job), and an image's references
are the captions of every record with that id.
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
from conceptual.splits import split_names

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


def read_rows(files: list[str], uri: str, split: str, columns: list[str]) -> pa.Table:
    """One split's centre-crop rows, read on the driver (vocabularies and eval sets are small)."""
    fs, _ = storage.resolve(uri)
    wanted = pc.field("split").isin(split_names(split)) & (pc.field("crop") == 0)
    tables = []
    for path in files:
        with fs.open_input_file(path) as f:
            tables.append(pq.read_table(f, columns=columns, filters=wanted))
    return pa.concat_tables(tables)


def train_captions(files: list[str], uri: str) -> list[str]:
    """One caption per record: augmented crops repeat it and must not inflate word counts."""
    return read_rows(files, uri, TRAIN_SPLIT, ["caption"])["caption"].to_pylist()


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
    fs, _ = storage.resolve(uri)
    with fs.open_input_file(files[0]) as f:
        if "fluency" not in pq.read_schema(f).names:
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
    if any(row["image_id"] is None for row in rows):
        raise ValueError(
            f"the features at {uri} have rows without an image_id (made by an older features "
            "job): run the features job again"
        )
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
