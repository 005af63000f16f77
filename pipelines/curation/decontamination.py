"""Decontamination against evaluation images (issue 59): a training candidate whose image is a
near-duplicate of an image a model will be scored on (a folder of images, an imported
dataset such as COCO's or Flickr's test split) is rejected `in_eval_set`, naming that
image. A global step (pipelines/dataflow/steps.py) after the exact deduplication: each batch gives
its rows' embeddings (near_duplicates.embedding_rows); `find_in_eval_set` reads the
evaluation images once, in the driver, embeds them with the extractor the vision step uses
(and their mirror images, when mirrors count), indexes them with FAISS, and searches each
batch of rows against that index on the cluster; the rows found are rejected batch by
batch (near_duplicates.mark_found). stats.json's `decontaminate` names each set
with a fingerprint of its images, which the evaluation jobs read (`warning`).
"""

from __future__ import annotations

import hashlib
import io
import posixpath
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import ray

from conceptual import storage
from conceptual.config import Config
from conceptual.pipelines.curation.near_duplicates import FOUND, Found, unit_vectors
from conceptual.pipelines.dataflow.rows import gathered
from conceptual.records import image_id

DECONTAMINATE_STAGE, IN_EVAL_SET = "decontaminate", "in_eval_set"
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp")
# The columns that name an imported dataset's image, the first present is taken.
NAME_COLUMNS = ("id", "image_id", "image_url")


class DecontaminateConfig(Config):
    """decontaminate: the evaluation images no training candidate may be a copy of."""

    # Folders of images, or imported/curated datasets (Parquet with `image` bytes: an
    # import job's output folder, or its curated/), paths or s3:// URIs.
    against: list[str] = []
    # Of a dataset with a `split` column, only this split's images (COCO's or Flickr's
    # `test`); None: every row. A folder of images is taken whole.
    split: str | None = None
    threshold: float = 0.88  # the cosine from which a candidate is a copy (as dedup.near)
    mirrored: bool = True  # a candidate that is an evaluation image mirrored is one too


@dataclass(frozen=True)
class EvalImage:
    name: str  # what a rejected candidate's detail names: a file's path, or the row's id
    data: bytes


def eval_files(uri: str) -> tuple[list[str], list[str]]:
    """(the Parquet files, the image files) under `uri`; a missing or empty one is an error
    (found as the run starts, before any candidate is processed)."""
    if not storage.exists(uri):
        raise FileNotFoundError(f"decontaminate.against: {uri} does not exist")
    files = storage.list_files(uri)
    parquet = sorted(f for f in files if f.endswith(".parquet"))
    images = sorted(f for f in files if f.lower().endswith(IMAGE_SUFFIXES))
    if not parquet and not images:
        raise ValueError(f"decontaminate.against: {uri} holds no Parquet file and no image")
    return parquet, images


def check(config: DecontaminateConfig) -> None:
    """Fail fast on a path that is missing or holds nothing to decontaminate against."""
    for uri in config.against:
        eval_files(uri)


def eval_images(uri: str, split: str | None) -> Iterator[EvalImage]:
    """The images of one evaluation set: a dataset's rows (of `split`, where it has a split
    column), or else every image file under the folder."""
    fs, root = storage.resolve(uri)
    parquet, images = eval_files(uri)
    for path in parquet:
        with fs.open_input_file(path) as f:
            table = pq.read_table(f)
        if "image" not in table.column_names:
            raise ValueError(f"decontaminate.against: {path} has no `image` column")
        if split is not None and "split" in table.column_names:
            table = table.filter(pa.compute.equal(table["split"], split))
        column = next((c for c in NAME_COLUMNS if c in table.column_names), None)
        names = table[column].to_pylist() if column else [None] * table.num_rows
        for row, (name, data) in enumerate(zip(names, table["image"].to_pylist())):
            if data is not None:
                yield EvalImage(name or f"{posixpath.basename(path)}:{row}", data)
    if parquet:
        return
    for path in images:
        with fs.open_input_file(path) as f:
            yield EvalImage(posixpath.relpath(path, root), f.read())


def fingerprint(images: list[EvalImage]) -> str:
    """A set's content, whatever its paths: the SHA-256 of its images' sorted ids."""
    ids = sorted(image_id(image.data) for image in images)
    return hashlib.sha256("\n".join(ids).encode()).hexdigest()[:32]


def embedded(images: list[EvalImage], extractor, mirrored: bool) -> tuple[np.ndarray, list[str]]:
    """(unit vectors, the name of each): every image that decodes, and its mirror image's
    too with `mirrored` (a candidate that is a mirror copy then meets it as it is)."""
    from PIL import Image, ImageOps

    decoded, names = [], []
    for image in images:
        try:
            with Image.open(io.BytesIO(image.data)) as opened:
                decoded.append(opened.convert("RGB"))
        except (OSError, ValueError, Image.DecompressionBombError) as exc:
            raise ValueError(f"decontaminate.against: {image.name} does not decode: {exc}") from exc
        names.append(image.name)
    views = [decoded, [ImageOps.mirror(i) for i in decoded]] if mirrored else [decoded]
    batch = 32
    vectors = [
        extractor.pooled(view[start : start + batch])
        for view in views
        for start in range(0, len(view), batch)
    ]
    x = np.concatenate(vectors) if vectors else np.empty((0, 0), np.float32)
    return unit_vectors(pa.array(x.tolist(), pa.list_(pa.float32()))), names * len(views)


def find_in_eval_set(
    rows: ray.data.Dataset, against: list[str], split: str | None, threshold: float,
    mirrored: bool, cnn,
) -> tuple[dict[str, Any], dict[str, Any]]:  # fmt: skip
    """`mark_found`'s arguments from the EMBEDDED rows of every batch (rows.embedding_rows),
    and stats.json's `decontaminate`: each set's path, images and fingerprint."""
    from conceptual.vision.cnn import FeatureExtractor

    extractor = FeatureExtractor(cnn)
    sets, vectors, names = [], [], []
    for uri in against:
        images = list(eval_images(uri, split))
        x, named = embedded(images, extractor, mirrored)
        vectors.append(x)
        names += named
        sets.append({"path": uri, "images": len(images), "fingerprint": fingerprint(images)})
    index = ray.put((np.concatenate(vectors), names))
    found = rows.map_batches(
        matches,
        fn_kwargs={"index": [index], "threshold": threshold},
        batch_format="pyarrow",
    )
    found = gathered(found, lambda _: FOUND.empty_table()).sort_by("position")
    report = {
        "against": sets,
        "split": split,
        "threshold": threshold,
        "mirrored": mirrored,
        "rejected": found.num_rows,
    }
    return {"found": Found.of(found), "stage": DECONTAMINATE_STAGE, "reason": IN_EVAL_SET}, report


def matches(rows: pa.Table, index: list[ray.ObjectRef], threshold: float) -> pa.Table:
    """FOUND rows of the EMBEDDED `rows` whose nearest evaluation image (FAISS, inner product
    of unit vectors: the cosine) is at least `threshold` close."""
    import faiss

    vectors, names = ray.get(index[0])
    if not rows.num_rows or not len(vectors):
        return FOUND.empty_table()
    search = faiss.IndexFlatIP(vectors.shape[1])
    search.add(vectors)
    cosine, nearest = search.search(unit_vectors(rows["embedding"]), 1)
    hit = np.flatnonzero(cosine[:, 0] >= threshold)
    details = [
        f"a near-duplicate of the evaluation image {names[nearest[i, 0]]} "
        f"(cosine {cosine[i, 0]:.3f})"
        for i in hit
    ]
    return pa.table([rows["position"].take(pa.array(hit, pa.int64())), details], FOUND)


def decontaminated(stats: dict[str, Any]) -> list[dict[str, Any]]:
    """The sets a curation's stats.json says it was decontaminated against ([]: none)."""
    return (stats.get(DECONTAMINATE_STAGE) or {}).get("against", [])
