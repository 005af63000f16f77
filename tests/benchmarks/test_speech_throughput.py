"""Spoken captions: synthesis clips/s per core and real-time factor (by step), 1 vs 2 CPUs
on Ray, MFCC frames/s, and the MP3 import, on real captions and clips from ../shared/data.

    .venv/bin/pytest -m benchmark tests/benchmarks/test_speech_throughput.py -s

BENCHMARK_CLIPS sets how many Conceptual Captions validation captions are synthesized
(default 400). "N CPUs" means N cores for everything (test_curation_throughput.on_cores)
and a Ray of N CPUs; each Ray run follows a warm-up run on the same Ray, so worker start-up
is not counted. The load average is recorded beside the figures: this machine is shared.
"""

from __future__ import annotations

import csv
import os
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import ray
from test_curation_throughput import on_cores
from threadpoolctl import threadpool_limits

from conceptual.pipelines.features.speech import SpeechConfig, speak, synthesize
from conceptual.runtime import init_ray
from conceptual.speech.audio import decode_16k, encode_flac, resample
from conceptual.speech.features import AudioFeatureConfig, clip_features, mfcc
from conceptual.speech.synthesis import (
    ESPEAK_RATE,
    SynthesisConfig,
    draw_parameters,
    engine_wpm,
    espeak,
)

N = int(os.environ.get("BENCHMARK_CLIPS", "400"))


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def cpu_seconds() -> float:
    """CPU time of this process and its finished children (espeak-ng): what a clip costs a
    core, whatever else the shared machine runs meanwhile (wall time is reported beside)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def captions(real_data, n: int) -> list[str]:
    with open(real_data / "cc_val_captions.tsv", newline="") as f:
        return [row["caption"] for _, row in zip(range(n), csv.DictReader(f, delimiter="\t"))]


def timed_steps(texts: list[str]) -> dict[str, float]:
    """CPU seconds in each step of rendering, over all texts."""
    config, seconds = SynthesisConfig(), dict.fromkeys(("espeak", "resample", "flac"), 0.0)
    audio = 0.0
    for i, text in enumerate(texts):
        parameters = draw_parameters(str(i), config)
        started = cpu_seconds()
        raw = espeak(text, parameters.voice, engine_wpm(parameters), 60).astype(np.float32) / 32768
        resampled = cpu_seconds()
        samples = resample(raw, ESPEAK_RATE * 2 ** (parameters.pitch / 12))
        encoded = cpu_seconds()
        encode_flac(samples)
        seconds["espeak"] += resampled - started
        seconds["resample"] += encoded - resampled
        seconds["flac"] += cpu_seconds() - encoded
        audio += len(samples) / 16_000
    return {**seconds, "audio": audio}


def test_synthesis_per_core(real_data, record):
    texts = captions(real_data, N)
    with on_cores(1):
        load = load_average()
        started = time.perf_counter()
        steps = timed_steps(texts)
        wall = time.perf_counter() - started
    work = steps["espeak"] + steps["resample"] + steps["flac"]
    per_second = len(texts) / work
    record(
        "speech_synthesis_per_core",
        {
            "clips": len(texts),
            "load_average": load,
            "clips_per_cpu_second": round(per_second, 1),
            "clips_per_wall_second": round(len(texts) / wall, 1),
            "real_time_factor": round(work / steps["audio"], 4),
            "mean_clip_seconds": round(steps["audio"] / len(texts), 2),
            "cpu_ms_per_clip": {
                k: round(1000 * steps[k] / len(texts), 2) for k in ("espeak", "resample", "flac")
            },
            "core_hours_per_million_clips": round(1e6 / per_second / 3600, 1),
        },
    )


def time_pipeline(data: str, output: str, cpus: int) -> float:
    """Seconds of one synthesize() over `data` on a fresh Ray of `cpus` CPUs, pinned to as
    many cores, after a warm-up run on a few captions."""
    config = SpeechConfig(clips_per_shard=max(N // 16, 1), webdataset=True)
    with on_cores(cpus):
        init_ray(num_cpus=cpus)
        try:
            synthesize(f"{data}-warmup", f"{output}-warmup", SpeechConfig(clips_per_shard=4))
            started = time.perf_counter()
            stats = synthesize(data, output, config)
            seconds = time.perf_counter() - started
        finally:
            ray.shutdown()
    assert stats["kept"] + sum(stats["rejected"].get("synthesize", {}).values()) == N
    return seconds


def test_ray_scaling(real_data, tmp_path, record):
    texts = captions(real_data, N)
    for name, rows in (("data", texts), ("data-warmup", texts[: 4 * 2])):
        (tmp_path / name).mkdir()
        table = pa.table({"id": [f"c{i}" for i in range(len(rows))], "caption": rows})
        pq.write_table(table, tmp_path / name / "captions.parquet")
        (tmp_path / name / "_SUCCESS").write_text("{}")
    load = load_average()
    one = time_pipeline(str(tmp_path / "data"), str(tmp_path / "out1"), 1)
    two = time_pipeline(str(tmp_path / "data"), str(tmp_path / "out2"), 2)

    record(
        "speech_ray_scaling",
        {
            "clips": N,
            "load_average_before": load,
            "load_average_after": load_average(),
            "ray_1_cpu_clips_per_second": round(N / one, 1),
            "ray_2_cpu_clips_per_second": round(N / two, 1),
            "scaling_1_to_2": round(one / two, 2),
        },
    )


def test_features_per_core(real_data, record):
    config = SpeechConfig()
    records = [{"id": str(i), "caption": text} for i, text in enumerate(captions(real_data, 100))]
    outcomes = [speak(record, config) for record in records]
    clips = [clip["audio"] for clip in outcomes if isinstance(clip, dict)]
    # One BLAS thread, as in a Ray worker of one CPU (Ray sets OMP_NUM_THREADS to its CPUs).
    with on_cores(1), threadpool_limits(1):
        load = load_average()
        decoded = [decode_16k(audio) for audio in clips]
        mfcc(decoded[0])  # librosa's lazy imports and the mel filters, once per worker
        started = cpu_seconds()
        frames = sum(mfcc(samples).shape[1] for samples in decoded)
        mfcc_seconds = cpu_seconds() - started
        rng, features = np.random.default_rng(0), AudioFeatureConfig()
        started = cpu_seconds()
        for audio in clips:
            clip_features(audio, features, rng)
        training_seconds = cpu_seconds() - started
    record(
        "speech_features_per_core",
        {
            "clips": len(clips),
            "load_average": load,
            "mfcc_frames_per_cpu_second": round(frames / mfcc_seconds),
            "training_features_clips_per_cpu_second": round(len(clips) / training_seconds, 1),
            "training_features": "FLAC decode + random 3.5 s crop + 128 MFCCs + SpecAugment",
            "mfcc_bytes_per_clip_float32": 128 * 351 * 4,
            "flac_bytes_per_clip_mean": round(sum(map(len, clips)) / len(clips)),
        },
    )


def test_mp3_import_per_core(real_data, record):
    mp3s = sorted((real_data / "flickr8k_mini" / "speech_gtts").glob("*.mp3"))[:100]
    data = [path.read_bytes() for path in mp3s]
    with on_cores(1):
        load = load_average()
        started = cpu_seconds()
        audio = 0.0
        for mp3 in data:
            samples = decode_16k(mp3)
            encode_flac(samples)
            audio += len(samples) / 16_000
        seconds = cpu_seconds() - started
    record(
        "speech_mp3_import_per_core",
        {
            "clips": len(data),
            "load_average": load,
            "clips_per_cpu_second": round(len(data) / seconds, 1),
            "real_time_factor": round(seconds / audio, 4),
            "mean_clip_seconds": round(audio / len(data), 2),
        },
    )
