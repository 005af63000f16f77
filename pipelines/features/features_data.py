"""The reader of a features job's output (records.FEATURES), for every model family: its
files, its summary (features.json: the CNN settings a model saves), a split's rows, the train
captions (for a vocabulary), and a split grouped by image with all its references
(`split_images`: what captioning is evaluated on or searches for the nearest-neighbour
baseline, the retrievers' images and their crops); the retrievers' pairs and clips build on
these reads (pipelines/families/retriever/retrieval_data.py).
Training itself streams the rows through Ray Data.

Features rows are one per (caption record, crop); the records of one image share its
`image_id` (written once by curation, records.CURATED), and an image's references are the
captions of every record with that id.
"""

from __future__ import annotations

import functools
import posixpath
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from conceptual import storage
from conceptual.models.saving import FeatureSettings
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


@dataclass
class SplitImages:
    """One split of a features output grouped by image, in a stable order (by image_id): its
    images' pooled vectors (every crop, or the centre one), their centre crop's grid when
    read, and its caption records, an image's in the order they were read."""

    image_ids: list[str]
    pooled: np.ndarray  # (images, crops, channels) float32, the centre crop first
    caption_image: dict[str, str]  # caption record id -> its image's id
    captions: dict[str, str]  # caption record id -> caption
    grid: np.ndarray | None = None  # (images, rows * cols * channels) float32, when read

    @property
    def feature_dim(self) -> int:
        return self.pooled.shape[-1]

    @functools.cached_property
    def index(self) -> dict[str, int]:
        return {image: i for i, image in enumerate(self.image_ids)}

    @functools.cached_property
    def references(self) -> dict[str, list[str]]:
        """image id -> the captions of all its records: what a caption of it is scored on."""
        references: dict[str, list[str]] = {image: [] for image in self.image_ids}
        for record, image in self.caption_image.items():
            references[image].append(self.captions[record])
        return references

    @functools.cached_property
    def records(self) -> dict[str, str]:
        """image id -> one of its caption records (the first by id): where its photo is."""
        first: dict[str, str] = {}
        for record, image in sorted(self.caption_image.items()):
            first.setdefault(image, record)
        return first

    def subset(self, image_ids: list[str]) -> SplitImages:
        """These images only (a seeded draw for train_fraction), with their captions."""
        keep = set(image_ids)
        rows = [i for i, image in enumerate(self.image_ids) if image in keep]
        caption_image = {r: image for r, image in self.caption_image.items() if image in keep}
        return SplitImages(
            [self.image_ids[i] for i in rows],
            self.pooled[rows],
            caption_image,
            {r: self.captions[r] for r in caption_image},
            None if self.grid is None else self.grid[rows],
        )


def split_images(
    files: list[str],
    uri: str,
    split: str,
    every_crop: bool = False,
    grids: bool = False,
    max_images: int | None = None,
) -> SplitImages:
    """A split grouped by image (SplitImages): the centre crop's pooled vector of each image,
    or every crop's with `every_crop`; the centre crop's grid with `grids` (64 times the
    pooled vector's size); the first `max_images` images only, when given."""
    columns = ["id", "image_id", "caption", "crop", "pooled", *(["grid"] if grids else [])]
    table = read_rows(files, uri, split, columns, every_crop)
    if table.num_rows == 0:
        raise ValueError(f"no {split!r} rows in the features at {uri}")
    image_ids = sorted(set(table["image_id"].to_pylist()))[:max_images]
    if max_images is not None:
        table = table.filter(pc.field("image_id").isin(image_ids))
    # A stable sort: an image's records keep the order they were read in.
    table = table.sort_by([("image_id", "ascending"), ("crop", "ascending")])
    index = {image: i for i, image in enumerate(image_ids)}
    rows = np.array([index[image] for image in table["image_id"].to_pylist()], dtype=np.int64)
    crop = table["crop"].to_numpy()
    crops = int(crop.max()) + 1
    vectors = pc.list_flatten(table["pooled"]).to_numpy().reshape(table.num_rows, -1)
    # The records of an image share its crops: each crop's first row holds it.
    first = np.unique(rows * crops + crop, return_index=True)[1]
    pooled = np.zeros((len(image_ids), crops, vectors.shape[1]), dtype=np.float32)
    pooled[rows[first], crop[first]] = vectors[first]
    centre = np.flatnonzero(crop == 0)
    records, images = table["id"].take(centre).to_pylist(), rows[centre].tolist()
    caption_image = {record: image_ids[i] for record, i in zip(records, images)}
    captions = dict(zip(records, table["caption"].take(centre).to_pylist()))
    grid = None
    if grids:  # the centre crop's first row
        first = first[crop[first] == 0]
        grid = pc.list_flatten(table["grid"].take(first)).to_numpy().reshape(len(first), -1)
    return SplitImages(image_ids, pooled, caption_image, captions, grid)


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
