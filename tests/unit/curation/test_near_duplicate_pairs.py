"""Near-duplicate pairs and groups (pipelines/curation/near_duplicates.py) on synthetic embeddings: a
photo's copies are its vector plus a little noise, its mirror image another vector (here
the reversed one), distinct photos are random vectors apart from each other."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from conceptual.pipelines.curation.near_duplicates import (
    EMBEDDED,
    close_pairs,
    embedding_rows,
    grouped,
    kept_of,
)
from conceptual.pipelines.dataflow.rows import table

D = 64


def photos(n: int, seed: int = 0) -> np.ndarray:
    # centred before the ReLU-like clip, so that distinct photos are far apart (cosine ~0.5)
    return np.clip(np.random.default_rng(seed).normal(size=(n, D)), 0, None).astype(np.float32)


def copy_of(vector: np.ndarray, seed: int) -> np.ndarray:
    noise = np.random.default_rng(seed).normal(scale=0.05, size=D)
    return (vector + noise * vector.mean()).astype(np.float32)


def rows(entries: list[tuple[str, np.ndarray, np.ndarray]], scores=None) -> pa.Table:
    """EMBEDDED rows of (id, embedding, mirrored embedding), at positions 10, 20, ..."""
    n = len(entries)
    scores = scores or [None] * n
    vectors = [[e[1].tolist() for e in entries], [e[2].tolist() for e in entries]]
    return pa.table(
        [
            pa.array([10 * (i + 1) for i in range(n)], pa.int64()),
            [e[0] for e in entries],
            pa.array(scores, pa.float64()),
            *(pa.array(v, pa.list_(pa.float32())) for v in vectors),
        ],
        EMBEDDED,
    )


def photo(name: str, vector: np.ndarray) -> tuple[str, np.ndarray, np.ndarray]:
    return (name, vector, vector[::-1].copy())


def rejected(found: pa.Table, embedded: pa.Table) -> dict[str, str]:
    """{rejected id: the kept id its detail names}."""
    ids = dict(zip(embedded["position"].to_pylist(), embedded["id"].to_pylist()))
    return {
        ids[p]: d.removeprefix("a near-duplicate of ").split(" ")[0]
        for p, d in zip(found["position"].to_pylist(), found["detail"].to_pylist())
    }


def test_copies_are_found_and_distinct_photos_kept():
    a, b, c, d = photos(4)
    embedded = rows(
        [
            photo("a", a),
            photo("b", b),
            photo("a-copy", copy_of(a, 1)),
            photo("c", c),
            photo("a-copy2", copy_of(a, 2)),
            photo("d", d),
            photo("b-copy", copy_of(b, 3)),
        ]
    )
    found = grouped(close_pairs(embedded, 0.95, mirrored=False))
    assert rejected(found, embedded) == {"a-copy": "a", "a-copy2": "a", "b-copy": "b"}
    detail = found["detail"][0].as_py()
    assert detail.startswith("a near-duplicate of a (cosine ") and "mirrored" not in detail


def test_a_mirror_image_is_a_copy_only_when_mirrors_count():
    (a,) = photos(1)
    # the mirror image of a: its embedding is a's mirror's, its mirror's is a's own
    mirror = ("a-mirrored", copy_of(a[::-1].copy(), 1), copy_of(a, 2))
    embedded = rows([photo("a", a), mirror])
    assert grouped(close_pairs(embedded, 0.95, mirrored=False)).num_rows == 0
    found = grouped(close_pairs(embedded, 0.95, mirrored=True))
    assert rejected(found, embedded) == {"a-mirrored": "a"}
    assert found["detail"][0].as_py().endswith(", mirrored)")


def test_a_copy_of_a_copy_is_in_one_group_which_keeps_one():
    # a ~ b and b ~ c, a and c further apart: one photo, one kept
    (a,) = photos(1)
    b = copy_of(a, 1)
    c = (b + (b - a) * 0.5).astype(np.float32)
    embedded = rows([photo("a", a), photo("b", b), photo("c", c)])
    pairs = close_pairs(embedded, 0.999, mirrored=False)
    threshold = min(pairs["cosine"].to_pylist()) if pairs.num_rows else 0
    found = grouped(close_pairs(embedded, threshold, mirrored=False))
    assert set(rejected(found, embedded).values()) == {"a"}


@pytest.mark.parametrize(
    ("scores", "kept"),
    [
        ([None, None, None], "first"),  # no scores: the first in input order
        ([0.2, 0.9, 0.5], "second"),  # the better-aligned
        ([None, None, 0.1], "third"),  # a score beats none
    ],
)
def test_the_kept_copy_is_the_better_aligned_else_the_first(scores, kept):
    (a,) = photos(1)
    names = ["first", "second", "third"]
    entries = [photo(name, copy_of(a, i)) for i, name in enumerate(names)]
    embedded = rows(entries, scores)
    found = grouped(close_pairs(embedded, 0.95, mirrored=False))
    assert set(rejected(found, embedded)) == set(names) - {kept}
    # the order the rows come in does not change the choice
    reversed_rows = embedded.take(pa.array([2, 1, 0]))
    assert grouped(close_pairs(reversed_rows, 0.95, mirrored=False)).equals(found)


def test_kept_of_is_by_score_then_position():
    members = [
        {"position": 5, "alignment_score": None},
        {"position": 9, "alignment_score": 0.3},
        {"position": 7, "alignment_score": 0.3},
    ]
    assert kept_of(members)["position"] == 7
    assert kept_of(members[:1] + [{"position": 2, "alignment_score": None}])["position"] == 2


def test_embedding_rows_are_those_still_in_the_running_with_an_embedding():
    vector = [0.5] * 4
    batch = table(
        [
            {"id": "kept", "position": 0, "embedding": vector, "mirrored_embedding": vector},
            {"id": "no-image", "position": 1},
            {"id": "gone", "position": 2, "stage": "text", "reason": "hashtag"},
        ]
    )
    out = embedding_rows(batch)
    assert out.schema == EMBEDDED and out["id"].to_pylist() == ["kept"]
    assert out["alignment_score"].to_pylist() == [None]
    at = batch.schema.get_field_index("alignment_score")  # PROCESSED has it, null until scored
    scored = embedding_rows(
        batch.set_column(at, "alignment_score", pa.array([0.7, 0.1, 0.2], pa.float32()))
    )
    assert scored["alignment_score"].to_pylist() == [pytest.approx(0.7)]
