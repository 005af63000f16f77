"""Text curation throughput (candidates/s) at 1 and 2 CPUs, side by side with spaCy's own
`nlp.pipe` over the same texts in the same run.

    make bench   # or: .venv/bin/pytest -m benchmark tests/benchmarks/test_curation_throughput.py -s

Reports the pipeline's overhead ratio (its time at 1 CPU over nlp.pipe's on one core;
target <= 1.5) and the 1 -> 2 CPU scaling (target >= 1.7). BENCHMARK_CANDIDATES sets the
size (default 20,000).
"""

from __future__ import annotations

import os
import time

import ray

from conceptual.assets import load_spacy
from conceptual.demo.corpus import generate_candidates, write_candidates
from conceptual.pipelines.curation import CurationConfig, curate
from conceptual.runtime import init_ray

N = int(os.environ.get("BENCHMARK_CANDIDATES", "20000"))


def time_pipeline(input_dir: str, output_dir: str, cpus: int) -> tuple[float, dict]:
    ray.shutdown()
    init_ray(num_cpus=cpus)
    config = CurationConfig.model_validate({"entity_frequency": {"more_than": 3}, "samples": 0})
    curate(input_dir, output_dir, config)  # warm-up: actor start, spaCy load, files cached
    started = time.perf_counter()
    stats = curate(input_dir, output_dir, config)
    elapsed = time.perf_counter() - started
    ray.shutdown()
    return elapsed, stats


def test_curation_throughput(tmp_path, record):
    rows = generate_candidates(N, seed=11)
    input_dir = tmp_path / "candidates"
    input_dir.mkdir()
    # Several files so the read stage can run in parallel too.
    for part in range(4):
        write_candidates(rows[part::4], str(input_dir / f"part-{part}.tsv"), fmt="cc_tsv")

    nlp = load_spacy()
    texts = [r["alt_text"] or "" for r in rows]
    list(nlp.pipe(texts[:500]))  # warm-up
    started = time.perf_counter()
    for _ in nlp.pipe(texts, batch_size=512):
        pass
    spacy_seconds = time.perf_counter() - started

    one_cpu, stats = time_pipeline(str(input_dir), str(tmp_path / "out1"), cpus=1)
    two_cpu, _ = time_pipeline(str(input_dir), str(tmp_path / "out2"), cpus=2)
    parsed = stats["funnel"][1]["leaving"]  # candidates that reached the spaCy parse
    record(
        "curation_throughput",
        {
            "candidates": N,
            "parsed_by_spacy_in_pipeline": parsed,
            "kept": stats["kept"],
            "spacy_nlp_pipe_1_core": {
                "seconds": round(spacy_seconds, 2),
                "texts_per_s": round(N / spacy_seconds, 1),
            },
            "pipeline_1_cpu": {
                "seconds": round(one_cpu, 2),
                "candidates_per_s": round(N / one_cpu, 1),
            },
            "pipeline_2_cpu": {
                "seconds": round(two_cpu, 2),
                "candidates_per_s": round(N / two_cpu, 1),
            },
            "overhead_ratio_vs_nlp_pipe": round(one_cpu / spacy_seconds, 3),
            "scaling_1_to_2_cpu": round(one_cpu / two_cpu, 3),
        },
    )
