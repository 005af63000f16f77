"""A retrieval index: a dual encoder's embeddings of a dataset's images, captions and spoken
captions, searched by inner product (the model's score), exactly or through FAISS.

Layout of an index (the build_index job's OUTPUT; local or s3://):

    index.json        the manifest: format_version, model_uri, registered {name, version}
                      (or null), modality, embed_dim, normalized, scale, features {uri,
                      model, image_size, curated}, splits, counts, targets (below),
                      approximate: null, or {settings, recall_queries, targets: {target:
                      kind, metric, faiss_version, nlist/nprobe or m/ef_*, recall@10}}
    images.parquet    records.INDEX_IMAGES: image_id, id (its first caption record),
                      caption (that record's), split, image_url; row i is row i of
                      images.npy
    images.npy        (images, embed_dim) float32
    captions.parquet  records.INDEX_CAPTIONS: id (the caption record), image_id, caption,
                      split
    captions.npy      text models only: (captions, embed_dim) float32
    clips.parquet     speech models built with clips, records.INDEX_CLIPS: id, caption_id,
                      image_id, caption (the transcript), split
    clips.npy         (clips, embed_dim) float32
    <target>.faiss    with approximate=true: FAISS's own serialization of the target's index
    _SUCCESS          written last

Nothing is pickled: .npy files are read with allow_pickle=False, FAISS indexes in FAISS's
binary format. A target is searched by the inner product of the stored vectors with the
query's embedding: the cosine when `normalized` (multiply by `scale` for the model's
score), else the model's plain dot product.

    index = RetrievalIndex.load("out/index")
    found = index.search(query_embeddings, k=10, target="images")    # exact
    found = index.search(query_embeddings, k=10, approximate=True)    # FAISS, when built
    index.records("images", found.rows[0])                            # image_id, image_url...

Exact search is a matrix product and an argpartition, in chunks of queries that bound the
score matrix (MAX_SCORES floats). The approximate index is an inverted file (IVF, the
default: fast to build on CPUs) or an HNSW graph, both with the inner-product metric;
`approximate_recall` measures how much of the exact top k it finds.
"""

from __future__ import annotations

import contextlib
import math
import os
import posixpath
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import Field

from conceptual import storage
from conceptual.config import Config

FORMAT_VERSION = 1
MANIFEST = "index.json"
# The tag of a registered model version naming its index (set by build_index, read by the
# search service: conceptual.serve.retriever_deployment).
INDEX_TAG = "index"
TARGETS = ("images", "captions", "clips")
# Scores held at once by exact search: 32M float32 (128 MB) per chunk of queries.
MAX_SCORES = 32 << 20
# FAISS trains an IVF's centroids on at most this many points per list (it warns below 39).
TRAIN_POINTS_PER_LIST = 64


# The approximate index is measured by its recall of exact search's top ten.
RECALL_K = 10
RECALL_KEY = f"recall@{RECALL_K}"


class ApproximateSettings(Config):
    """The FAISS index built with approximate=true (recorded in index.json)."""

    kind: Literal["ivf", "hnsw"] = "ivf"  # hnsw: better recall per probe, far slower to build
    nlist: int | None = Field(None, ge=1)  # ivf: inverted lists; None: round(sqrt(items))
    nprobe: int = Field(32, ge=1)  # ivf: lists searched per query (at most nlist)
    hnsw_m: int = Field(32, ge=2)  # hnsw: neighbours per node
    ef_construction: int = Field(80, ge=1)  # hnsw: candidates kept while adding
    ef_search: int = Field(128, ge=1)  # hnsw: candidates kept while searching
    seed: int = 0  # the IVF's training sample


@dataclass
class SearchResult:
    """The top k of each query, best first: `rows` into the target's table and vectors
    (-1 where the approximate index found fewer than k) and their `scores` (-inf there)."""

    rows: np.ndarray  # (queries, k) int64
    scores: np.ndarray  # (queries, k) float32

    def found(self, query: int) -> list[tuple[int, float]]:
        """(row, score) of one query's hits, without the padding."""
        return [
            (int(row), float(score))
            for row, score in zip(self.rows[query], self.scores[query])
            if row >= 0
        ]


# ---------------------------------------------------------------- search


def exact_search(vectors: np.ndarray, queries: np.ndarray, k: int) -> SearchResult:
    """The k highest inner products of each query with `vectors` (items, dim), best first
    (ties: the lower row first)."""
    queries = _as_queries(queries, vectors.shape[1])
    items = len(vectors)
    k = min(k, items)
    rows = np.empty((len(queries), k), dtype=np.int64)
    scores = np.empty((len(queries), k), dtype=np.float32)
    step = max(1, MAX_SCORES // max(items, 1))
    for start in range(0, len(queries), step):
        chunk = queries[start : start + step] @ vectors.T  # (b, items)
        if k < items:
            top = np.argpartition(-chunk, k - 1, axis=1)[:, :k]
        else:
            top = np.broadcast_to(np.arange(items), chunk.shape)
        top_scores = np.take_along_axis(chunk, top, axis=1)
        order = np.lexsort((top, -top_scores), axis=-1)
        rows[start : start + step] = np.take_along_axis(top, order, axis=1)
        scores[start : start + step] = np.take_along_axis(top_scores, order, axis=1)
    return SearchResult(rows, scores)


def faiss_search(index: Any, queries: np.ndarray, k: int) -> SearchResult:
    """The approximate top k from a FAISS index (rows -1, scores -inf where it has fewer)."""
    queries = _as_queries(queries, index.d)
    k = min(k, index.ntotal)
    scores, rows = index.search(queries, k)
    scores = np.where(rows >= 0, scores, -np.inf).astype(np.float32)
    return SearchResult(rows.astype(np.int64), scores)


def approximate_recall(vectors: np.ndarray, index: Any, queries: np.ndarray, k: int = 10) -> float:
    """Recall@k of the approximate index against exact search: the mean fraction of each
    query's exact top k that the approximate top k holds."""
    exact = exact_search(vectors, queries, k).rows
    approximate = faiss_search(index, queries, k).rows
    k = exact.shape[1]
    if k == 0 or len(exact) == 0:
        return 1.0
    hits = [len(set(e) & set(a[a >= 0])) for e, a in zip(exact.tolist(), approximate)]
    return float(np.mean(hits) / k)


def _as_queries(queries: np.ndarray, dim: int) -> np.ndarray:
    queries = np.ascontiguousarray(np.atleast_2d(np.asarray(queries, dtype=np.float32)))
    if queries.ndim != 2 or queries.shape[1] != dim:
        raise ValueError(f"queries of shape {queries.shape}; the index holds {dim}-d vectors")
    return queries


# ---------------------------------------------------------------- building FAISS indexes


def ivf_lists(items: int, settings: ApproximateSettings) -> int:
    """The IVF's list count: the setting, else round(sqrt(items)); at most one per item."""
    nlist = settings.nlist or round(math.sqrt(items))
    return max(1, min(nlist, items))


def build_faiss(
    vectors: np.ndarray, settings: ApproximateSettings, chunk: int = 65536
) -> tuple[Any, dict[str, Any]]:
    """An inner-product FAISS index of `vectors` (a memory map is fine: it is added in
    chunks), and its parameters as recorded in index.json."""
    import faiss

    items, dim = vectors.shape
    if items == 0:
        raise ValueError("an approximate index needs at least one vector")
    params: dict[str, Any] = {
        "kind": settings.kind,
        "metric": "inner_product",
        "faiss_version": faiss.__version__,
    }
    if settings.kind == "ivf":
        nlist = ivf_lists(items, settings)
        index = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, nlist, faiss.METRIC_INNER_PRODUCT)
        rng = np.random.default_rng(settings.seed)
        sample = min(items, TRAIN_POINTS_PER_LIST * nlist)
        picked = np.sort(rng.choice(items, size=sample, replace=False))
        index.train(np.ascontiguousarray(vectors[picked], dtype=np.float32))
        index.nprobe = min(settings.nprobe, nlist)
        params.update(nlist=nlist, nprobe=index.nprobe, train_points=sample)
    else:
        index = faiss.IndexHNSWFlat(dim, settings.hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = settings.ef_construction
        index.hnsw.efSearch = settings.ef_search
        params.update(
            m=settings.hnsw_m,
            ef_construction=settings.ef_construction,
            ef_search=settings.ef_search,
        )
    for start in range(0, items, chunk):
        index.add(np.ascontiguousarray(vectors[start : start + chunk], dtype=np.float32))
    return index, params


def set_search_params(index: Any, params: dict[str, Any]) -> None:
    """The recorded search-time parameters (nprobe, efSearch) on a loaded index."""
    if params.get("kind") == "ivf":
        index.nprobe = int(params["nprobe"])
    elif params.get("kind") == "hnsw":
        index.hnsw.efSearch = int(params["ef_search"])


# ---------------------------------------------------------------- files


@contextlib.contextmanager
def open_output(uri: str) -> Iterator[Any]:
    """A writable stream to `uri`: locally a temporary file renamed into place when the
    block ends without error (a reader never sees half a file); on S3 a multipart upload."""
    fs, path = storage.resolve(uri)
    parent = posixpath.dirname(path)
    if parent:
        fs.create_dir(parent, recursive=True)
    target = path if storage.is_remote(uri) else f"{path}.{uuid.uuid4().hex}.tmp"
    try:
        with fs.open_output_stream(target) as stream:
            yield stream
    except BaseException:
        if target != path:
            with contextlib.suppress(OSError):
                fs.delete_file(target)
        raise
    if target != path:
        fs.move(target, path)


def write_vectors(uri: str, vectors: np.ndarray) -> None:
    """A float32 .npy file, streamed in chunks (numpy writes 16 MiB at a time)."""
    with open_output(uri) as stream:
        np.lib.format.write_array(
            stream, vectors.astype(np.float32, copy=False), allow_pickle=False
        )


def read_vectors(uri: str, mmap: bool = False) -> np.ndarray:
    """A .npy file's array, never unpickled; memory-mapped when `mmap` and local."""
    if mmap and not storage.is_remote(uri):
        return np.load(storage.resolve(uri)[1], mmap_mode="r", allow_pickle=False)
    fs, path = storage.resolve(uri)
    with fs.open_input_file(path) as stream:
        return np.lib.format.read_array(stream, allow_pickle=False)


def write_table(uri: str, table: pa.Table) -> None:
    with open_output(uri) as stream:
        pq.write_table(table, stream)


def read_table(uri: str) -> pa.Table:
    fs, path = storage.resolve(uri)
    with fs.open_input_file(path) as stream:
        return pq.read_table(stream)


def write_faiss(uri: str, index: Any) -> None:
    import faiss

    if storage.is_remote(uri):
        storage.write_bytes(uri, faiss.serialize_index(index).tobytes())
        return
    path = storage.resolve(uri)[1]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    temporary = f"{path}.{uuid.uuid4().hex}.tmp"
    faiss.write_index(index, temporary)
    os.replace(temporary, path)


def read_faiss(uri: str) -> Any:
    import faiss

    if storage.is_remote(uri):
        return faiss.deserialize_index(np.frombuffer(storage.read_bytes(uri), dtype=np.uint8))
    return faiss.read_index(storage.resolve(uri)[1])


def write_index(
    uri: str,
    manifest: dict[str, Any],
    tables: dict[str, pa.Table],
    vectors: dict[str, np.ndarray],
    approximate: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Writes a whole index (manifest last but for _SUCCESS) and returns the manifest as
    written, its `targets` filled in: every table, with its vectors and FAISS index when
    given. A table's vectors must have one row per table row."""
    storage.delete(storage.join(uri, storage.SUCCESS))
    approximate = approximate or {}
    targets = {}
    for target, table in tables.items():
        if target not in TARGETS:
            raise ValueError(f"unknown target {target!r}; targets are {', '.join(TARGETS)}")
        entry: dict[str, Any] = {"rows": table.num_rows, "table": f"{target}.parquet"}
        entry["vectors"] = entry["approximate"] = None
        write_table(storage.join(uri, entry["table"]), table)
        if target in vectors:
            if len(vectors[target]) != table.num_rows:
                raise ValueError(
                    f"{target}: {len(vectors[target])} vectors for {table.num_rows} rows"
                )
            entry["vectors"] = f"{target}.npy"
            write_vectors(storage.join(uri, entry["vectors"]), vectors[target])
        if target in approximate:
            entry["approximate"] = f"{target}.faiss"
            write_faiss(storage.join(uri, entry["approximate"]), approximate[target])
        targets[target] = entry
    manifest = {"format_version": FORMAT_VERSION, **manifest, "targets": targets}
    storage.write_json(storage.join(uri, MANIFEST), manifest)
    storage.write_json(storage.join(uri, storage.SUCCESS), {"targets": list(targets)})
    return manifest


# ---------------------------------------------------------------- the index


@dataclass
class RetrievalIndex:
    uri: str
    manifest: dict[str, Any]
    tables: dict[str, pa.Table]
    vectors: dict[str, np.ndarray]
    approximate: dict[str, Any] = field(default_factory=dict)  # target -> FAISS index

    @classmethod
    def load(
        cls,
        uri: str,
        approximate: bool = True,
        targets: Sequence[str] | None = None,
        mmap: bool = False,
    ) -> RetrievalIndex:
        """The index at `uri` (it must hold _SUCCESS): the tables and vectors of `targets`
        (default: all), and their FAISS indexes when built and `approximate`."""
        if not storage.exists(storage.join(uri, storage.SUCCESS)):
            raise storage.StorageError(
                f"no finished index at {uri} (no {storage.SUCCESS}): run build_index"
            )
        manifest = storage.read_json(storage.join(uri, MANIFEST))
        if manifest.get("format_version") != FORMAT_VERSION:
            raise ValueError(
                f"{uri} has index format {manifest.get('format_version')}; this code reads "
                f"{FORMAT_VERSION}: build the index again"
            )
        tables, vectors, faiss_indexes = {}, {}, {}
        for target, entry in manifest["targets"].items():
            if targets is not None and target not in targets:
                continue
            tables[target] = read_table(storage.join(uri, entry["table"]))
            if entry.get("vectors"):
                vectors[target] = read_vectors(storage.join(uri, entry["vectors"]), mmap)
            if approximate and entry.get("approximate"):
                index = read_faiss(storage.join(uri, entry["approximate"]))
                set_search_params(index, manifest["approximate"]["targets"][target])
                faiss_indexes[target] = index
        return cls(uri, manifest, tables, vectors, faiss_indexes)

    @property
    def embed_dim(self) -> int:
        return int(self.manifest["embed_dim"])

    def searchable(self, target: str) -> bool:
        return target in self.vectors

    def search(
        self,
        queries: np.ndarray,
        k: int,
        target: str = "images",
        approximate: bool = False,
    ) -> SearchResult:
        """The top k rows of `target` for each query embedding (queries, embed_dim), by
        inner product: exact, or from the FAISS index when `approximate` and it was built."""
        if target not in self.vectors:
            searchable = ", ".join(sorted(self.vectors)) or "none"
            raise ValueError(f"{self.uri} has no {target!r} vectors (searchable: {searchable})")
        if k < 1:
            raise ValueError(f"k must be at least 1, not {k}")
        if approximate and target in self.approximate:
            return faiss_search(self.approximate[target], queries, k)
        return exact_search(self.vectors[target], queries, k)

    def records(self, target: str, rows: Sequence[int] | np.ndarray) -> list[dict[str, Any]]:
        """The table rows of `target` (padding rows, -1, left out), in the order given."""
        wanted = [int(row) for row in rows if row >= 0]
        return self.tables[target].take(pa.array(wanted, pa.int64())).to_pylist()

    def describe(self) -> dict[str, Any]:
        """What a service shows about the index: its URI and the manifest without targets."""
        return {"uri": self.uri, **{k: v for k, v in self.manifest.items() if k != "targets"}}


def recall_queries(
    target: str, vectors: dict[str, np.ndarray], count: int, rng: np.random.Generator
) -> np.ndarray:
    """Sampled queries for measuring a target's FAISS recall: the embeddings that search it
    (captions or clips search images, images search captions and clips)."""
    source = (
        "images"
        if target != "images"
        else next(
            (name for name in ("captions", "clips") if len(vectors.get(name, ())) > 0), "images"
        )
    )
    pool = vectors[source]
    picked = np.sort(rng.choice(len(pool), size=min(count, len(pool)), replace=False))
    return np.ascontiguousarray(pool[picked], dtype=np.float32)


def faiss_indexes(
    vectors: dict[str, np.ndarray], settings: ApproximateSettings, queries: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A FAISS index of each target's vectors, and the manifest's `approximate`: the settings
    and each index's recall@10 against exact search on `queries` sampled queries."""
    rng = np.random.default_rng(settings.seed)
    indexes: dict[str, Any] = {}
    report: dict[str, Any] = {"settings": settings.model_dump(), "recall_queries": queries}
    report["targets"] = {}
    for target, array in vectors.items():
        if len(array) == 0:
            continue
        indexes[target], params = build_faiss(array, settings)
        sampled = recall_queries(target, vectors, queries, rng)
        recall = approximate_recall(array, indexes[target], sampled, RECALL_K)
        report["targets"][target] = {**params, RECALL_KEY: round(recall, 4)}
    return indexes, report
