"""Fluency scoring speed on one CPU core (conceptual.fluency.scorer.FluencyScorer: the views,
then the four LSTM classifiers), in sentences/s, on real Flickr8k-CN sentences (Baidu's
translations, flickr8kzhb, with their English sources, flickr8kenc):

- `pairs`: `FluencyScorer(model_dir).score(chinese, english)`, translations with their
  sources (four views);
- `chinese`: `score(chinese)`, Chinese sentences alone (the two Chinese views, as generated
  captions are scored);
- side by side, the baseline of each: building the views alone (`sentence_views`: jieba's
  segmentation and POS tags, and for `pairs` spaCy's tagger over the English), and then the
  model alone over those same views (`encode`, `predict`, `scores`), so the report says
  which share of a score is the analysis and which the model.

The model: an untrained FluencyModel at FluencySettings' defaults (embed 256, LSTM 256, 32
tokens a view; a score's cost does not depend on the weights), its vocabularies built from
the views of other sentences of the same files (min_count 2, as train_fluency builds them),
saved with save_fluency and loaded by the scorer as any caller would, batch 256.

Every timed call reads sentences this process has never analysed (spaCy's vocabulary grows
with each new word, and the first calls load jieba's dictionary and spaCy's pipeline): the
Chinese and English sentences are distinct, the vocabulary's sentences and a warm-up call
are disjoint from the timed ones, and each path of each round gets its own chunk. The
paths are timed in alternating rounds (the baseline first, then the scorer first), the
median round kept, with one torch thread and the BLAS and OpenMP pools on one thread on one
core (steady on a shared machine: CPU time is about wall time). `seen_again` times, after
the rounds, the first round's chunks once more: its ratio to the fresh rate shows whether
anything cached flatters a repeat.

    .venv/bin/python -m pytest -m benchmark tests/benchmarks/test_fluency_speed.py -s

CONCEPTUAL_BENCH_SENTENCES (sentences per timed call, 1000) and CONCEPTUAL_BENCH_ROUNDS (7)
size it: 4 x rounds x sentences distinct pairs, plus VOCAB_PAIRS, must fit in the ~39,700
distinct pairs of the files.
"""

from __future__ import annotations

import contextlib
import os
import random
import statistics
import time
from collections.abc import Iterator

import pytest
import torch
from threadpoolctl import threadpool_limits

from conceptual.fluency.flickr8k_cn import ENGLISH, SOURCES, read_lines
from conceptual.fluency.model import VIEWS, FluencyConfig, FluencyModel, encode, predict, scores
from conceptual.fluency.scorer import FluencyScorer
from conceptual.fluency.views import sentence_views
from conceptual.models.saving import save_fluency
from conceptual.models.vocab import Vocabulary

SENTENCES = int(os.environ.get("CONCEPTUAL_BENCH_SENTENCES", 1000))  # per timed call
ROUNDS = int(os.environ.get("CONCEPTUAL_BENCH_ROUNDS", 7))
VOCAB_PAIRS = 2000  # the vocabularies' sentences, never timed
WARM_UP = 200  # of those, analysed and scored once before the rounds
MIN_COUNT = 2  # train_fluency's default
KINDS = ("pairs", "chinese")  # with English sources, Chinese alone
PATHS = ("views", "score")  # the baseline (views, then the model on them), the scorer


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


@contextlib.contextmanager
def on_one_core() -> Iterator[None]:
    """This process on one core, torch and the BLAS and OpenMP pools on one thread."""
    cores, threads = os.sched_getaffinity(0), torch.get_num_threads()
    os.sched_setaffinity(0, sorted(cores)[:1])
    torch.set_num_threads(1)
    try:
        with threadpool_limits(1):
            yield
    finally:
        torch.set_num_threads(threads)
        os.sched_setaffinity(0, cores)


def distinct_pairs(cn_dir) -> list[tuple[str, str]]:
    """(Baidu's translation, its English source) pairs in a fixed random order, no Chinese
    and no English sentence twice."""

    def sentences(file_name: str, tag: str) -> dict[tuple[str, int], str]:
        return {
            (line.image, line.n): line.text
            for line in read_lines(cn_dir / file_name, tag)
            if not line.problem and line.text.strip()
        }

    chinese, english = sentences(*SOURCES["baidu"]), sentences(*ENGLISH)
    keys = sorted(chinese.keys() & english.keys())
    random.Random(0).shuffle(keys)
    seen_zh, seen_en, out = set(), set(), []
    for key in keys:
        zh, en = chinese[key], english[key]
        if zh not in seen_zh and en not in seen_en:
            seen_zh.add(zh)
            seen_en.add(en)
            out.append((zh, en))
    return out


def untrained_model(pairs: list[tuple[str, str]], directory) -> None:
    views = sentence_views([zh for zh, _ in pairs], [en for _, en in pairs])
    vocabs = {view: Vocabulary.build(views[view], min_count=MIN_COUNT) for view in VIEWS}
    torch.manual_seed(0)
    model = FluencyModel(FluencyConfig(vocab_sizes={view: len(vocabs[view]) for view in VIEWS}))
    save_fluency(model, vocabs, directory)


def timed(call) -> tuple[float, float, object]:
    """(wall seconds, CPU seconds of this process, the result) of call()."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = call()
    return time.perf_counter() - wall, time.process_time() - cpu, result


def run_path(scorer: FluencyScorer, kind: str, path: str, chunk: list) -> dict[str, tuple]:
    """Times of one path over one chunk: {"views", "model"} for the baseline, {"score"}."""
    chinese = [zh for zh, _ in chunk]
    english = [en for _, en in chunk] if kind == "pairs" else None
    if path == "score":
        wall, cpu, result = timed(lambda: scorer.score(chinese, english))
        assert result.shape == (len(chunk),)
        return {"score": (wall, cpu)}
    views_wall, views_cpu, views = timed(lambda: sentence_views(chinese, english))
    max_tokens = scorer.model.config.max_tokens

    def model():
        columns = encode(views, scorer.vocabs, max_tokens)
        return scores(predict(scorer.model, columns, scorer.batch_size), columns["lengths"])

    model_wall, model_cpu, result = timed(model)
    assert result.shape == (len(chunk),)
    return {"views": (views_wall, views_cpu), "model": (model_wall, model_cpu)}


def rates(times: list[tuple[float, float]]) -> dict:
    wall = statistics.median(w for w, _ in times)
    cpu = statistics.median(c for _, c in times)
    return {
        "sentences_per_s": round(SENTENCES / wall, 1),
        "sentences_per_cpu_s": round(SENTENCES / cpu, 1),
        "ms_per_sentence": round(wall / SENTENCES * 1000, 3),
        "cpu_ms_per_sentence": round(cpu / SENTENCES * 1000, 3),
        "rounds_cpu_ms_per_sentence": [round(c / SENTENCES * 1000, 3) for _, c in times],
    }


def table(results: dict) -> str:
    lines = [f"{'':<26}{'sentences/s':>12}{'per CPU-s':>11}{'ms each':>9}"]
    for kind in KINDS:
        for part in ("score", "views", "model", "score_seen_again", "views_seen_again"):
            r = results[kind][part]
            lines.append(
                f"{f'{kind} {part}':<26}{r['sentences_per_s']:>12.1f}"
                f"{r['sentences_per_cpu_s']:>11.1f}{r['ms_per_sentence']:>9.3f}"
            )
    return "\n".join(lines)


def test_fluency_scoring_speed_on_one_core(real_data, tmp_path, record):
    cn_dir = real_data / "flickr8k_cn"
    if not (cn_dir / SOURCES["baidu"][0]).is_file():
        pytest.skip(f"no Flickr8k-CN under {real_data}")
    pairs = distinct_pairs(cn_dir)
    chunks_needed = len(KINDS) * len(PATHS) * ROUNDS
    if len(pairs) < VOCAB_PAIRS + chunks_needed * SENTENCES:
        pytest.skip(f"{len(pairs)} distinct pairs: too few for {ROUNDS} rounds of {SENTENCES}")
    vocab_pairs, timed_pairs = pairs[:VOCAB_PAIRS], pairs[VOCAB_PAIRS:]
    chunks = iter(timed_pairs[i * SENTENCES : (i + 1) * SENTENCES] for i in range(chunks_needed))
    load_before = load_average()
    with on_one_core():
        untrained_model(vocab_pairs, tmp_path / "fluency")  # also loads jieba and spaCy
        scorer = FluencyScorer(tmp_path / "fluency")
        warm = vocab_pairs[:WARM_UP]
        for kind in KINDS:
            for path in PATHS:
                run_path(scorer, kind, path, warm)
        times: dict[str, dict[str, list]] = {
            kind: {"views": [], "model": [], "score": []} for kind in KINDS
        }
        first: dict[tuple[str, str], list] = {}
        for n in range(ROUNDS):
            for kind in KINDS:
                for path in PATHS if n % 2 == 0 else PATHS[::-1]:
                    chunk = next(chunks)
                    first.setdefault((kind, path), chunk)
                    for part, t in run_path(scorer, kind, path, chunk).items():
                        times[kind][part].append(t)
        # The first round's chunks again: the same sentences a second time in this process.
        again = {
            (kind, path): run_path(scorer, kind, path, first[kind, path])
            for kind in KINDS
            for path in PATHS
        }
    results: dict = {}
    for kind in KINDS:
        r = {part: rates(times[kind][part]) for part in ("score", "views", "model")}
        r["score_seen_again"] = rates([again[kind, "score"]["score"]])
        r["views_seen_again"] = rates([again[kind, "views"]["views"]])
        # Ratios of times a sentence, by wall time and by this process's CPU time (the
        # steadier where a neighbour takes a share of the core).
        for clock, key in (("wall", "ms_per_sentence"), ("cpu", "cpu_ms_per_sentence")):
            score_ms, views_ms, model_ms = (r[part][key] for part in ("score", "views", "model"))
            r[clock] = {
                "score_time_vs_views": round(score_ms / views_ms, 3),
                "views_share_of_score": round(views_ms / score_ms, 3),
                "model_share_of_score": round(model_ms / score_ms, 3),
                "views_plus_model_vs_score": round((views_ms + model_ms) / score_ms, 3),
                "score_seen_again_vs_fresh": round(score_ms / r["score_seen_again"][key], 3),
                "views_seen_again_vs_fresh": round(views_ms / r["views_seen_again"][key], 3),
            }
        results[kind] = r
    config = scorer.model.config
    print(
        f"\nfluency scoring on one core, 1 torch thread: {SENTENCES} distinct sentences a call, "
        f"median of {ROUNDS} rounds; untrained model embed {config.embed_dim}, hidden "
        f"{config.hidden}, vocabularies {[len(scorer.vocabs[v]) for v in VIEWS]}"
    )
    print(table(results))
    for kind in KINDS:
        for clock in ("wall", "cpu"):
            r = results[kind][clock]
            print(
                f"{kind} ({clock} time): score = views x{r['score_time_vs_views']}; the views "
                f"are {r['views_share_of_score']:.0%} of a score, the model "
                f"{r['model_share_of_score']:.0%} (views + model = "
                f"{r['views_plus_model_vs_score']} x score); the same sentences again: score "
                f"x{r['score_seen_again_vs_fresh']}, views x{r['views_seen_again_vs_fresh']} "
                "the fresh rate"
            )
    record(
        "fluency_scoring_one_core",
        {
            "device": "cpu (1 core, 1 torch thread)",
            "sentences_per_call": SENTENCES,
            "rounds": ROUNDS,
            "data": "flickr8kzhb (Baidu) with flickr8kenc, distinct pairs, unseen before timing",
            "model": {
                "embed_dim": config.embed_dim,
                "hidden": config.hidden,
                "max_tokens": config.max_tokens,
                "vocab_sizes": config.vocab_sizes,
                "batch_size": scorer.batch_size,
            },
            "load_average_before": load_before,
            "load_average_after": load_average(),
            **results,
        },
    )
    assert all(results[kind]["score"]["sentences_per_s"] > 0 for kind in KINDS)
