"""Near-duplicate images over a whole curation (issue 59), in the style of SemDeDup (Abbas et
al., 2023): one photo re-encoded, resized, cropped a little or mirrored is one photo, told
by the cosine of the images' embeddings (the vision step's `embedding`, the features job's
pooled CNN vector). A global step (pipelines/dataflow/steps.py): each batch's rows still in the
running give their embeddings (`embedding_rows`); `find_near_duplicates` trains k-means
centroids with FAISS on a sample of them, sends each row to its nearest centroids, and
compares the rows of each cluster with each other, cluster by cluster on the cluster (a Ray
Data groupby), so no process holds every vector. Pairs at or above the threshold join
their rows into groups; a group keeps one row (`kept_of`), and the others are rejected
`near_duplicate` with the kept one's id. Decontamination against evaluation images
(pipelines/curation/decontamination.py) rejects its rows the same way (`Found`, `mark_found`).

Like pipelines/dataflow/rows.py, this module imports nothing heavy: Ray runs its functions in
worker processes (FAISS is imported where k-means is trained, in the driver).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import ray

from conceptual.config import Config
from conceptual.pipelines.dataflow.rows import EMBEDDINGS, gathered, is_kept, rejecting

NEAR_DUPLICATES_STAGE, NEAR_DUPLICATE = "near_duplicates", "near_duplicate"
# What a row gives the global steps that compare images: where it is, what it is called,
# how well its caption fits its image (where section 1's alignment score ran), its vectors.
EMBEDDED = pa.schema(
    [
        ("position", pa.int64()),
        ("id", pa.string()),
        ("alignment_score", pa.float64()),
        ("embedding", pa.list_(pa.float32())),
        ("mirrored_embedding", pa.list_(pa.float32())),
    ]
)
# Two rows whose images are one photo: `a` before `b` in input order, the cosine of their
# embeddings (the larger of the image's and its mirror's, when mirrors count), and which.
PAIRS = pa.schema(
    [
        ("a", pa.int64()),
        ("b", pa.int64()),
        ("cosine", pa.float32()),
        ("mirrored", pa.bool_()),
        ("a_id", pa.string()),
        ("b_id", pa.string()),
        ("a_score", pa.float64()),
        ("b_score", pa.float64()),
    ]
)


class NearDedupConfig(Config):
    """dedup.near: one photo kept once among its near-copies (off: the paper's behaviour)."""

    enabled: bool = False
    # The cosine of two images' embeddings from which they are one photo (BENCHMARKS.md,
    # "Near-duplicate images": the sweep that chose it on copies of the shared photos).
    threshold: float = 0.88
    mirrored: bool = True  # a mirror image counts as a copy (a second CNN pass per image)
    # SemDeDup's clusters: as many as there are this many rows, each compared whole.
    rows_per_cluster: int = 4096
    # Centroids each row is compared within: 2 also finds a pair whose two copies fell on
    # either side of a cluster boundary.
    nearest: int = 2
    sample: int = 100_000  # rows the k-means centroids are trained on
    seed: int = 0


def embedding_rows(batch: pa.Table) -> pa.Table:
    """EMBEDDED rows of the batch's rows still in the running that have an embedding."""
    kept = batch.filter(is_kept(batch))
    kept = kept.filter(pc.greater(pc.list_value_length(kept["embedding"]), 0))
    n = kept.num_rows
    score = (
        kept["alignment_score"]
        if "alignment_score" in kept.column_names
        else pa.nulls(n, pa.float64())
    )
    columns = [kept["position"], kept["id"], pc.cast(score, pa.float64())]
    return pa.table([*columns, *(kept[name] for name in EMBEDDINGS)], EMBEDDED)


def unit_vectors(vectors: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """(n, d) float32 of a list column, each row scaled to length 1 (cosine = dot product).
    An empty list (no mirror made) gives zeros."""
    vectors = vectors.combine_chunks() if isinstance(vectors, pa.ChunkedArray) else vectors
    lengths = pc.list_value_length(vectors).to_numpy(zero_copy_only=False)
    d = int(lengths.max()) if len(lengths) else 0
    out = np.zeros((len(vectors), d), np.float32)
    full = lengths == d
    if d and full.any():
        values = pc.list_flatten(vectors.filter(pa.array(full))).to_numpy()
        out[full] = values.reshape(-1, d)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.maximum(norms, 1e-12)


def close_pairs(rows: pa.Table, threshold: float, mirrored: bool) -> pa.Table:
    """PAIRS of EMBEDDED `rows` (all rows, or one cluster's) whose cosine is at least
    `threshold`; with `mirrored`, one image against the other's mirror image counts too."""
    x = unit_vectors(rows["embedding"])
    cosine = x @ x.T
    flipped = np.zeros_like(cosine, bool)
    if mirrored:
        m = unit_vectors(rows["mirrored_embedding"])
        mirror = x @ m.T
        mirror = np.maximum(mirror, mirror.T)  # a against b's mirror, or b against a's
        flipped = mirror > cosine
        cosine = np.maximum(cosine, mirror)
    i, j = np.nonzero(np.triu(cosine >= threshold, k=1))
    positions = rows["position"].to_numpy()
    before = positions[i] < positions[j]
    a, b = np.where(before, i, j), np.where(before, j, i)
    ids, scores = rows["id"], rows["alignment_score"]
    return pa.table(
        [
            pa.array(positions[a]),
            pa.array(positions[b]),
            pa.array(cosine[i, j], pa.float32()),
            pa.array(flipped[i, j]),
            ids.take(a),
            ids.take(b),
            scores.take(a),
            scores.take(b),
        ],
        PAIRS,
    )


def kept_of(members: list[dict[str, Any]]) -> dict[str, Any]:
    """The copy a group keeps: the better-aligned one where the rows carry an alignment
    score (a row without one loses to a row with one), else the first in input order (as
    the exact deduplication keeps)."""

    def rank(member: dict[str, Any]) -> tuple[bool, float, int]:
        score = member["alignment_score"]
        return (score is None, -(score or 0.0), member["position"])

    return min(members, key=rank)


# What a global step that compares images found: each row it rejects (by position) and why.
FOUND = pa.schema([("position", pa.int64()), ("detail", pa.string())])


def grouped(pairs: pa.Table) -> pa.Table:
    """FOUND rows from PAIRS: the rows joined by pairs form groups (a copy of a copy is in
    its group), each keeping one (`kept_of`); the others are rejected with the kept one's
    id and the closest cosine that joined them."""
    pairs = pairs.to_pylist()
    parent: dict[int, int] = {}

    def root(p: int) -> int:
        while parent.setdefault(p, p) != p:
            parent[p] = parent[parent[p]]
            p = parent[p]
        return p

    members: dict[int, dict[str, Any]] = {}
    closest: dict[int, tuple[float, bool]] = {}
    for pair in pairs:
        parent[root(pair["a"])] = root(pair["b"])
        for side in "ab":
            position = pair[side]
            members[position] = {
                "position": position,
                "id": pair[f"{side}_id"],
                "alignment_score": pair[f"{side}_score"],
            }
            if pair["cosine"] > closest.get(position, (-2.0, False))[0]:
                closest[position] = (pair["cosine"], pair["mirrored"])
    groups: dict[int, list[dict[str, Any]]] = {}
    for position, member in members.items():
        groups.setdefault(root(position), []).append(member)
    found = []
    for group in groups.values():
        kept = kept_of(group)
        for member in group:
            if member is not kept:
                cosine, mirrored = closest[member["position"]]
                how = ", mirrored" if mirrored else ""
                detail = f"a near-duplicate of {kept['id']} (cosine {cosine:.3f}{how})"
                found.append({"position": member["position"], "detail": detail})
    return pa.Table.from_pylist(found, FOUND).sort_by("position")


@dataclass(frozen=True)
class Found:
    """FOUND rows in the object store, for each batch's `mark_found`: as many as the rows
    rejected, never every row."""

    block: ray.ObjectRef
    rows: int

    @classmethod
    def of(cls, found: pa.Table) -> Found:
        return cls(ray.put(found), found.num_rows)

    def details(self, positions: np.ndarray) -> dict[int, str]:
        """{index in `positions`: detail} of the positions found."""
        if not self.rows:
            return {}
        found = ray.get(self.block)
        listed = found["position"].to_numpy()
        at = np.minimum(np.searchsorted(listed, positions), len(listed) - 1)
        hit = np.flatnonzero(listed[at] == positions)
        details = found["detail"].to_pylist()
        return {int(i): details[at[i]] for i in hit}


def mark_found(batch: pa.Table, found: Found, stage: str, reason: str) -> pa.Table:
    """The rows a global step that compares images found, rejected at `stage`."""
    details = found.details(batch["position"].to_numpy().astype(np.int64))
    return rejecting(batch, stage, reason, details)


def find_near_duplicates(
    rows: ray.data.Dataset,
    threshold: float,
    mirrored: bool,
    rows_per_cluster: int,
    nearest: int,
    sample: int,
    seed: int,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """`mark_found`'s arguments from the EMBEDDED rows of every batch, and what stats.json
    reports. Up to `rows_per_cluster` rows are one cluster, compared here; more are split
    into clusters by k-means centroids, each row compared within its `nearest` ones, one
    group of rows at a time on the cluster."""
    rows = rows.materialize()
    count = rows.count()
    clusters = max(1, math.ceil(count / rows_per_cluster))
    if clusters == 1:
        pairs = close_pairs(gathered(rows, embedding_rows), threshold, mirrored)
    else:
        centroids = trained_centroids(rows, clusters, count, sample, seed)
        assigned = rows.map_batches(
            in_clusters,
            fn_kwargs={"centroids": centroids, "nearest": min(nearest, clusters)},
            batch_format="pyarrow",
        )
        compared = assigned.groupby("cluster").map_groups(
            cluster_pairs,
            fn_kwargs={"threshold": threshold, "mirrored": mirrored},
            batch_format="pyarrow",
        )
        batches = compared.iter_batches(batch_size=None, batch_format="pyarrow")
        # (as PAIRS: a shuffle may hand a column back as another Arrow type of its values)
        pairs = pa.concat_tables([PAIRS.empty_table(), *(b.cast(PAIRS) for b in batches)])
    found = grouped(pairs)
    report = {
        "enabled": True,
        "threshold": threshold,
        "mirrored": mirrored,
        "rows": count,
        "clusters": clusters,
        # a pair in two clusters (both rows near the same two centroids) counts once
        "pairs": len(set(zip(pairs["a"].to_pylist(), pairs["b"].to_pylist()))),
        "rejected": found.num_rows,
    }
    arguments = {"found": Found.of(found), "stage": NEAR_DUPLICATES_STAGE, "reason": NEAR_DUPLICATE}
    return arguments, report


def trained_centroids(
    rows: ray.data.Dataset, clusters: int, count: int, sample: int, seed: int
) -> np.ndarray:
    """(clusters, d) unit k-means centroids (FAISS, spherical) of a random sample of rows."""
    import faiss

    drawn = rows.select_columns(["embedding"])
    if count > sample:
        drawn = drawn.random_sample(sample / count, seed=seed)
    x = unit_vectors(gathered(drawn, embedding_rows)["embedding"])
    kmeans = faiss.Kmeans(x.shape[1], clusters, niter=20, seed=seed, spherical=True)
    kmeans.train(x)
    return kmeans.centroids


def in_clusters(rows: pa.Table, centroids: np.ndarray, nearest: int) -> pa.Table:
    """The EMBEDDED rows, each once for each of its `nearest` centroids, with `cluster`."""
    x = unit_vectors(rows["embedding"])
    order = np.argsort(-(x @ centroids.T), axis=1)[:, :nearest]
    index = np.repeat(np.arange(rows.num_rows), nearest)
    return rows.take(pa.array(index)).append_column(
        "cluster", pa.array(order.reshape(-1), pa.int32())
    )


def cluster_pairs(rows: pa.Table, threshold: float, mirrored: bool) -> pa.Table:
    """`close_pairs` of one cluster's rows."""
    return close_pairs(rows.drop_columns(["cluster"]), threshold, mirrored)
