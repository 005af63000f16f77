"""Retrieval search (conceptual.retrieval_index): index build items/s, single-query search
latency p50/p99, exact against approximate (FAISS IVF, the build_index default; HNSW at the
smaller size only: its build takes ~30 min for 1M items on 2 cores), and the approximate
index's recall@10 against exact search, for 10k and 1M random normalized 512-d items.

    .venv/bin/pytest -m benchmark tests/benchmarks/test_retrieval_search.py -s

BENCHMARK_RETRIEVAL_SIZES overrides the sizes (comma-separated, default 10000,1000000).
1M x 512 float32 is 2 GB, and the IVF holds a copy: ~4.5 GB at the peak.

Random vectors are the worst case for an approximate index (no clusters to exploit: the
true neighbours of a random query are barely nearer than the rest), so recall is reported
for random queries; and for "planted" queries, noisy copies of indexed items (cosine ~0.7
to their item, as a caption's embedding sits nearer its image's than the rest), the
fraction whose item is in the top 10 (found@10): what retrieval needs of an index.
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from conceptual.retrieval_index import (
    ApproximateSettings,
    build_faiss,
    exact_search,
    faiss_search,
)

DIM, K = 512, 10
SIZES = [int(n) for n in os.environ.get("BENCHMARK_RETRIEVAL_SIZES", "10000,1000000").split(",")]


def normalized(rng: np.random.Generator, n: int, chunk: int = 100_000) -> np.ndarray:
    out = np.empty((n, DIM), dtype=np.float32)
    for start in range(0, n, chunk):
        block = rng.standard_normal((min(chunk, n - start), DIM), dtype=np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        out[start : start + len(block)] = block
    return out


def planted(rng: np.random.Generator, items: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Noisy copies of random items (cosine ~0.7 to the item they come from), and the items'
    rows."""
    rows = rng.choice(len(items), size=n, replace=False)
    noisy = items[rows] + normalized(rng, n)
    return noisy / np.linalg.norm(noisy, axis=1, keepdims=True), rows


def found_at_k(found_rows: np.ndarray, rows: np.ndarray) -> float:
    return round(float((found_rows == rows[:, None]).any(axis=1).mean()), 4)


def latency_ms(search, queries: np.ndarray) -> dict[str, float]:
    """p50 and p99 of one query at a time, after one warm-up query."""
    search(queries[:1])
    times = []
    for query in queries:
        started = time.perf_counter()
        search(query[None])
        times.append((time.perf_counter() - started) * 1e3)
    return {
        "p50_ms": round(float(np.percentile(times, 50)), 3),
        "p99_ms": round(float(np.percentile(times, 99)), 3),
        "queries": len(times),
    }


class Queries:
    """The query sets, and the exact answers recall is measured against (computed once)."""

    def __init__(self, rng: np.random.Generator, items: np.ndarray):
        self.random = normalized(rng, 200)
        self.planted, self.planted_rows = planted(rng, items, 200)
        self.latency = normalized(rng, 1000)
        self.exact_rows = exact_search(items, self.random, K).rows

    def quality(self, index) -> dict[str, float]:
        found = faiss_search(index, self.random, K).rows
        hits = [len(set(e) & set(a)) for e, a in zip(self.exact_rows.tolist(), found.tolist())]
        return {
            "recall@10_random_queries": round(float(np.mean(hits)) / K, 4),
            "planted_found@10": found_at_k(
                faiss_search(index, self.planted, K).rows, self.planted_rows
            ),
        }


def approximate(settings: ApproximateSettings, items: np.ndarray, queries: Queries) -> dict:
    started = time.perf_counter()
    index, params = build_faiss(items, settings)
    build_s = time.perf_counter() - started
    results = {
        **params,
        "build_s": round(build_s, 2),
        "build_items_per_s": round(len(items) / build_s),
        **latency_ms(lambda q: faiss_search(index, q, K), queries.latency),
        **queries.quality(index),
    }
    if settings.kind == "ivf":  # the search-time trade-off, on the same index
        results["by_nprobe"] = {}
        for nprobe in (8, 32, 128):
            index.nprobe = min(nprobe, params["nlist"])
            latency = latency_ms(lambda q: faiss_search(index, q, K), queries.latency[:300])
            results["by_nprobe"][nprobe] = {"p50_ms": latency["p50_ms"], **queries.quality(index)}
    return results


@pytest.mark.parametrize("items", SIZES, ids=lambda n: f"{n}-items")
def test_search_latency_and_recall(record, items):
    rng = np.random.default_rng(0)
    started = time.perf_counter()
    vectors = normalized(rng, items)
    generated_s = time.perf_counter() - started
    queries = Queries(rng, vectors)
    exact_queries = 200 if items <= 100_000 else 50  # ~0.2 s a query at 1M
    results = {
        "items": items,
        "dim": DIM,
        "k": K,
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "generate_s": round(generated_s, 2),
        # Exact search needs no structure: its "build" is the vectors themselves.
        "exact": {
            **latency_ms(lambda q: exact_search(vectors, q, K), queries.random[:exact_queries]),
            "planted_found@10": found_at_k(
                exact_search(vectors, queries.planted, K).rows, queries.planted_rows
            ),
        },
        "ivf": approximate(ApproximateSettings(), vectors, queries),
    }
    if items <= 100_000:
        results["hnsw"] = approximate(ApproximateSettings(kind="hnsw"), vectors, queries)
    record(f"retrieval_search_{items}", results)
    assert results["ivf"]["planted_found@10"] > 0.5
