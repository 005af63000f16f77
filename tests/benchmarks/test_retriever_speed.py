"""Retriever training speed on CPU at the default sizes (RetrieverSettings' defaults: embed
512, image MLP 1280 -> 1024 -> 512, speech convs 32/64/128/256 over 128 MFCCs x 351 frames,
text a 2-layer Transformer of width 256 over 32 tokens), batch 48, Adam:

- training steps/s and samples/s of the training core's step (pipelines/training/training.py's
  train_epoch: forward through both towers, the loss, backward, clipping, Adam) over
  batches already in memory, after a warm-up step, for the masked margin softmax (MMS) and,
  side by side in the same process, its baseline: the same step with the triplet loss
  (`mms_time_vs_triplet` is what a step costs with MMS over the step with triplet: above 1,
  MMS is dearer). The two are timed in alternating rounds (MMS first, then triplet first),
  the median round kept, so that a busy neighbour slows both alike. Once on one core with
  one torch thread (the per-core figure, steady on a shared machine: CPU time is about
  wall time) and once on every core with torch's default threads;
- the two losses alone (forward and backward over a batch's 48 x 48 scores);
- MFCC feature extraction (conceptual.speech.features.clip_features: FLAC decode, crop or
  pad to 3.5 s, 128 MFCCs, and SpecAugment in the training path) on 3 s tone-and-noise
  clips, on one core, in clips/s; and how many such cores keep a one-core speech trainer
  fed;
- the fine-tuned CNN (model.image_backbone=finetune: EfficientNet-lite0 trained end to end
  under the image MLP, reading uint8 photos of model.image_size pixels a side) for a text
  retriever (MMS), training samples/s of the same step at 64, 128 and 224 px, against its
  baseline, the features mode (the MLP over 1280-d pooled vectors), side by side on one
  core in alternating rounds (the order reversed each round), the median round kept; and
  the input path that feeds it (pipelines/families/retriever/retrieval_data.py's photo_pixels as a training
  task calls it, 48 photos a call: decode scaled down toward the size, a random crop of at
  least 67% of the photo, mirroring, resizing, brightness and saturation) in photos per
  CPU-second at each size, on real photos (coco_mini's 640 x 480 JPEGs, ~150 KB, like the
  curated photos the features were made from; skimage's sample photos when the real data
  is absent), and how many such cores keep a one-core fine-tuning trainer fed.

Inputs are random (a step's cost does not depend on the values); models are untrained.

    .venv/bin/python -m pytest -m benchmark tests/benchmarks/test_retriever_speed.py -s
    .venv/bin/python -m pytest -m benchmark tests/benchmarks/test_retriever_speed.py -s -k finetune

The fine-tuning test takes about 2 minutes at its defaults (CONCEPTUAL_BENCH_FINETUNE_STEPS
steps a round for the CNN, 2; CONCEPTUAL_BENCH_FINETUNE_ROUNDS rounds, 3; the features
baseline takes CONCEPTUAL_BENCH_STEPS steps a round).
"""

from __future__ import annotations

import contextlib
import os
import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import skimage.data
import torch
from PIL import Image
from threadpoolctl import threadpool_limits

from conceptual.models.losses import match_mask, mms_loss, triplet_loss
from conceptual.models.retriever import DualEncoder
from conceptual.models.vocab import Vocabulary
from conceptual.pipelines.families.retriever.retrieval_data import PhotoAugmentConfig, photo_pixels
from conceptual.pipelines.families.retriever.train_retriever import (
    RetrieverTrainConfig,
    retrieval_loss,
    retriever_config,
)
from conceptual.pipelines.training.training import make_optimizer, train_epoch
from conceptual.speech.audio import SAMPLE_RATE, encode_flac
from conceptual.speech.features import AudioFeatureConfig, clip_features
from conceptual_demo.images import good_jpeg

BATCH = 48  # the spec's batch per worker
IMAGE_DIM = 1280  # EfficientNet-lite0's pooled vector
VOCAB_WORDS = 5000
CAPTION_WORDS = 12
STEPS = int(os.environ.get("CONCEPTUAL_BENCH_STEPS", 8))  # timed steps per round
ROUNDS = int(os.environ.get("CONCEPTUAL_BENCH_ROUNDS", 4))  # alternating MMS / triplet
CLIPS = int(os.environ.get("BENCHMARK_CLIPS", 200))  # MFCC: clips timed per path
CLIP_SECONDS = 3.0
LOSSES = ("mms", "triplet")
FINETUNE_SIZES = (64, 128, 224)  # model.image_size, pixels a side
FINETUNE_STEPS = int(os.environ.get("CONCEPTUAL_BENCH_FINETUNE_STEPS", 2))  # a round, each size
FINETUNE_ROUNDS = int(os.environ.get("CONCEPTUAL_BENCH_FINETUNE_ROUNDS", 3))
PHOTOS = int(os.environ.get("BENCHMARK_PHOTOS", 240))  # input path: photos timed per size
REAL_DATA = Path(os.environ.get("CONCEPTUAL_REAL_DATA", Path(__file__).parents[3] / "shared/data"))
CPU = torch.device("cpu")


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


@contextlib.contextmanager
def on_cores(n: int | None) -> Iterator[None]:
    """This process on n cores, torch and the BLAS and OpenMP pools on n threads (None: every
    core, torch's default threads)."""
    cores, threads = os.sched_getaffinity(0), torch.get_num_threads()
    if n is None:
        yield
        return
    os.sched_setaffinity(0, sorted(cores)[:n])
    torch.set_num_threads(n)
    try:
        with threadpool_limits(n):
            yield
    finally:
        torch.set_num_threads(threads)
        os.sched_setaffinity(0, cores)


# ---------------------------------------------------------------- training steps


def vocabulary() -> Vocabulary:
    return Vocabulary.build([" ".join(f"w{i}" for i in range(VOCAB_WORDS))], min_count=1)


def batches(modality: str, vocab: Vocabulary, config: RetrieverTrainConfig, count: int) -> list:
    """Batches as the input path hands them to the step: `image` (pooled vectors, or with
    model.image_backbone=finetune uint8 photos), the match ids (every pair its own image and
    caption, as in a shuffled batch of many photos) and the query tower's input."""
    rng = np.random.default_rng(0)
    size = config.model.photo_size
    out = []
    for n in range(count):
        ids = torch.arange(n * BATCH, (n + 1) * BATCH, dtype=torch.int64)
        if size is None:
            image = torch.from_numpy(rng.normal(size=(BATCH, IMAGE_DIM)).astype(np.float32))
        else:
            image = torch.from_numpy(rng.integers(0, 256, (BATCH, 3, size, size), dtype=np.uint8))
        batch = {
            "image": image,
            "image_group": ids,
            "caption_group": ids + 1_000_000,
        }
        if modality == "speech":
            frames = 1 + round(config.audio.seconds * 100)
            shape = (BATCH, config.audio.n_mfcc, frames)
            batch["mfcc"] = torch.from_numpy(rng.normal(size=shape).astype(np.float32))
        else:
            words = vocab.tokens[4:]
            captions = [" ".join(rng.choice(words, CAPTION_WORDS)) for _ in range(BATCH)]
            tokens = vocab.encode_array(captions, config.model.max_tokens)
            batch["tokens"] = torch.from_numpy(tokens)
        out.append(batch)
    return out


def trainer(modality: str, loss: str, vocab: Vocabulary, model: dict | None = None) -> tuple:
    """(step loss, optimizer, config) with the spec's defaults (`model`: model.* settings
    instead), the weights seeded alike."""
    config = RetrieverTrainConfig(
        modality=modality, loss=loss, batch_size=BATCH, **({"model": model} if model else {})
    )
    torch.manual_seed(0)
    text_vocab = vocab if modality == "text" else None
    model = DualEncoder(retriever_config(config, IMAGE_DIM, text_vocab))
    step_loss = retrieval_loss(model, config)
    return step_loss, make_optimizer(config, model, CPU), config


def timed_epoch(step_loss, optimizer, data: list, config) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) of train_epoch over `data`."""
    wall, cpu = time.perf_counter(), time.process_time()
    losses = train_epoch(step_loss, optimizer, data, config, CPU, before_step=step_loss.at_step)
    assert all(torch.isfinite(losses["loss"]))
    return time.perf_counter() - wall, time.process_time() - cpu


def step_speed(modality: str, vocab: Vocabulary) -> dict:
    """Both losses' steps for one modality, alternating rounds, the median round kept."""
    trainers = {loss: trainer(modality, loss, vocab) for loss in LOSSES}
    config = trainers["mms"][2]
    data = batches(modality, vocab, config, STEPS + 1)
    for step_loss, optimizer, cfg in trainers.values():
        timed_epoch(step_loss, optimizer, data[:1], cfg)  # warm-up
    rounds: dict[str, list[tuple[float, float]]] = {loss: [] for loss in LOSSES}
    for n in range(ROUNDS):
        for loss in LOSSES if n % 2 == 0 else LOSSES[::-1]:
            step_loss, optimizer, cfg = trainers[loss]
            rounds[loss].append(timed_epoch(step_loss, optimizer, data[1:], cfg))
    result = {}
    for loss in LOSSES:
        wall = statistics.median(w for w, _ in rounds[loss]) / STEPS
        cpu = statistics.median(c for _, c in rounds[loss]) / STEPS
        result[loss] = {
            "steps_per_s": round(1 / wall, 3),
            "samples_per_s": round(BATCH / wall, 1),
            "ms_per_step": round(wall * 1000, 1),
            "cpu_ms_per_step": round(cpu * 1000, 1),
        }
    model = trainers["mms"][0].model
    result["parameters"] = sum(p.numel() for p in model.parameters())
    result["mms_time_vs_triplet"] = round(
        result["mms"]["ms_per_step"] / result["triplet"]["ms_per_step"], 3
    )
    result["mms_cpu_time_vs_triplet"] = round(
        result["mms"]["cpu_ms_per_step"] / result["triplet"]["cpu_ms_per_step"], 3
    )
    return result


def loss_alone(calls: int = 2000) -> dict:
    """Microseconds of one loss's forward and backward over a batch's (B, B) scores."""
    generator = torch.Generator().manual_seed(0)
    scores = torch.randn(BATCH, BATCH, generator=generator, requires_grad=True)
    mask = match_mask(torch.arange(BATCH), torch.arange(BATCH) + BATCH)
    losses = {
        "mms": lambda: mms_loss(scores, mask, 0.001),
        "triplet": lambda: triplet_loss(scores, mask, 0.001, generator),
    }
    out = {}
    for name, loss in losses.items():
        for _ in range(50):
            loss().backward()  # warm-up
        started = time.perf_counter()
        for _ in range(calls):
            loss().backward()
        out[f"{name}_us"] = round((time.perf_counter() - started) / calls * 1e6, 1)
    return out


# ---------------------------------------------------------------- MFCCs


def clips(count: int = 20) -> list[bytes]:
    """3 s clips like a synthesized caption's: a voiced tone with harmonics whose pitch and
    loudness move, in a little noise, as 16 kHz FLAC."""
    rng = np.random.default_rng(0)
    t = np.arange(int(CLIP_SECONDS * SAMPLE_RATE)) / SAMPLE_RATE
    out = []
    for _ in range(count):
        pitch = rng.uniform(100, 250) * (1 + 0.1 * np.sin(2 * np.pi * rng.uniform(0.5, 2) * t))
        phase = 2 * np.pi * np.cumsum(pitch) / SAMPLE_RATE
        voiced = sum(np.sin(h * phase) / h for h in range(1, 6))
        envelope = 0.5 + 0.5 * np.sin(2 * np.pi * rng.uniform(2, 5) * t) ** 2
        samples = 0.2 * envelope * voiced + 0.02 * rng.normal(size=t.size)
        out.append(encode_flac(np.clip(samples, -1, 1).astype(np.float32)))
    return out


def mfcc_speed(audio: list[bytes]) -> dict:
    """clips/s on one core, wall and CPU, for the training path (random crop, SpecAugment)
    and the evaluation path (neither)."""
    config = AudioFeatureConfig()
    rng = np.random.default_rng(0)
    out = {}
    with on_cores(1):
        clip_features(audio[0], config, rng)  # librosa's lazy imports, the mel filters
        for path, draw in (("training", rng), ("evaluation", None)):
            wall, cpu = time.perf_counter(), time.process_time()
            for i in range(CLIPS):
                features = clip_features(audio[i % len(audio)], config, draw)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            assert features.shape == (config.n_mfcc, 1 + round(config.seconds * 100))
            out[path] = {
                "clips_per_s": round(CLIPS / wall, 1),
                "clips_per_cpu_s": round(CLIPS / cpu, 1),
                "ms_per_clip": round(wall / CLIPS * 1000, 2),
            }
    return out


# ---------------------------------------------------------------- a fine-tuned CNN


def image_modes() -> dict[str, dict]:
    """model.* settings of each image tower timed: the features baseline, then the CNN."""
    modes = {"features": {"image_backbone": "features"}}
    for size in FINETUNE_SIZES:
        modes[f"finetune_{size}"] = {"image_backbone": "finetune", "image_size": size}
    return modes


def finetune_speed(vocab: Vocabulary) -> dict:
    """Text retrievers' steps (MMS) with each image tower, alternating rounds, the median
    round kept: the features baseline STEPS steps a round, the CNN FINETUNE_STEPS."""
    modes = image_modes()
    trainers = {mode: trainer("text", "mms", vocab, model) for mode, model in modes.items()}
    steps = {mode: STEPS if mode == "features" else FINETUNE_STEPS for mode in modes}
    data = {mode: batches("text", vocab, trainers[mode][2], steps[mode] + 1) for mode in modes}
    for mode, (step_loss, optimizer, cfg) in trainers.items():
        timed_epoch(step_loss, optimizer, data[mode][:1], cfg)  # warm-up
    rounds: dict[str, list[tuple[float, float]]] = {mode: [] for mode in modes}
    for n in range(FINETUNE_ROUNDS):
        for mode in list(modes) if n % 2 == 0 else list(modes)[::-1]:
            step_loss, optimizer, cfg = trainers[mode]
            rounds[mode].append(timed_epoch(step_loss, optimizer, data[mode][1:], cfg))
    result: dict = {}
    for mode in modes:
        wall = statistics.median(w for w, _ in rounds[mode]) / steps[mode]
        cpu = statistics.median(c for _, c in rounds[mode]) / steps[mode]
        result[mode] = {
            "samples_per_s": round(BATCH / wall, 2),
            "samples_per_cpu_s": round(BATCH / cpu, 2),
            "ms_per_step": round(wall * 1000, 1),
            "cpu_ms_per_step": round(cpu * 1000, 1),
            "parameters": sum(p.numel() for p in trainers[mode][0].model.parameters()),
        }
    for mode in modes:
        r, base = result[mode], result["features"]
        r["time_vs_features"] = round(r["ms_per_step"] / base["ms_per_step"], 2)
        r["cpu_time_vs_features"] = round(r["cpu_ms_per_step"] / base["cpu_ms_per_step"], 2)
    return result


def photo_jpegs() -> tuple[str, list[bytes]]:
    """(where from, JPEGs): coco_mini's photos, else skimage's sample photos."""
    paths = sorted(REAL_DATA.glob("coco_mini/*/*.jpg"))
    if paths:
        return f"coco_mini ({len(paths)} photos)", [path.read_bytes() for path in paths]
    names = ("astronaut", "coffee", "chelsea", "rocket")
    photos = [good_jpeg(Image.fromarray(getattr(skimage.data, n)()).convert("RGB")) for n in names]
    return f"skimage sample photos ({', '.join(names)})", photos


def input_path_speed(jpegs: list[bytes], size: int) -> dict:
    """photo_pixels over PHOTOS photos, BATCH a call as a training task's batch, with the
    spec's distortion: photos/s and photos per CPU-second."""
    rng, augment = np.random.default_rng(0), PhotoAugmentConfig()
    calls = [
        [jpegs[(n * BATCH + i) % len(jpegs)] for i in range(BATCH)]
        for n in range(max(1, PHOTOS // BATCH))
    ]
    photo_pixels(calls[0][:4], size, rng, augment)  # warm-up
    wall, cpu = time.perf_counter(), time.process_time()
    for call in calls:
        pixels = photo_pixels(call, size, rng, augment)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert pixels.shape == (BATCH, 3, size, size) and pixels.dtype == np.uint8
    count = len(calls) * BATCH
    return {
        "photos_per_s": round(count / wall, 1),
        "photos_per_cpu_s": round(count / cpu, 1),
        "ms_per_photo": round(wall / count * 1000, 2),
    }


# ---------------------------------------------------------------- the benchmark


def table(results: dict) -> str:
    lines = [f"{'':<16}{'steps/s':>9}{'samples/s':>11}{'ms/step':>10}{'CPU ms/step':>13}"]
    for modality in ("speech", "text"):
        for loss in LOSSES:
            r = results[modality][loss]
            lines.append(
                f"{f'{modality} {loss}':<16}{r['steps_per_s']:>9.3f}{r['samples_per_s']:>11.1f}"
                f"{r['ms_per_step']:>10.1f}{r['cpu_ms_per_step']:>13.1f}"
            )
        ratio = results[modality]
        lines.append(
            f"{f'{modality} MMS/triplet':<16} step time x{ratio['mms_time_vs_triplet']}"
            f" (CPU time x{ratio['mms_cpu_time_vs_triplet']})"
        )
    return "\n".join(lines)


@pytest.mark.parametrize("cores", [1, None], ids=["one_core", "all_cores"])
def test_retriever_training_speed_on_cpu(record, cores):
    vocab = vocabulary()
    load_before = load_average()
    with on_cores(cores):
        threads = torch.get_num_threads()
        results = {modality: step_speed(modality, vocab) for modality in ("speech", "text")}
        results["loss_alone"] = loss_alone()
    where = f"{len(os.sched_getaffinity(0)) if cores is None else cores} core(s)"
    alone = results["loss_alone"]
    print(f"\nretriever training on {where}, {threads} torch thread(s), batch {BATCH}")
    print(table(results))
    print(f"losses alone: MMS {alone['mms_us']} us, triplet {alone['triplet_us']} us")
    record(
        f"retriever_training_cpu_{'one_core' if cores else 'all_cores'}",
        {
            "device": f"cpu ({where}, {threads} torch threads)",
            "batch": BATCH,
            "steps": STEPS,
            "rounds": ROUNDS,
            "load_average_before": load_before,
            "load_average_after": load_average(),
            **results,
        },
    )
    assert all(results[m][loss]["samples_per_s"] > 0 for m in ("speech", "text") for loss in LOSSES)


def test_mfcc_speed_on_one_core(record):
    load_before = load_average()
    results = mfcc_speed(clips())
    # A one-core speech trainer's demand, measured beside (median of ROUNDS single steps).
    vocab = vocabulary()
    with on_cores(1):
        step_loss, optimizer, config = trainer("speech", "mms", vocab)
        data = batches("speech", vocab, config, 2)
        timed_epoch(step_loss, optimizer, data[:1], config)
        wall = statistics.median(
            timed_epoch(step_loss, optimizer, data[1:], config)[0] for _ in range(ROUNDS)
        )
    demand = BATCH / wall
    results["speech_trainer_samples_per_s_one_core"] = round(demand, 1)
    supply = results["training"]["clips_per_s"]
    results["mfcc_cores_per_one_core_trainer"] = round(demand / supply, 3)
    print("")
    for path in ("training", "evaluation"):
        m = results[path]
        print(
            f"MFCC {path:<10} {m['clips_per_s']:>7.1f} clips/s on one core "
            f"({m['clips_per_cpu_s']} per CPU-second, {m['ms_per_clip']} ms a clip)"
        )
    print(
        f"a one-core speech trainer (MMS) reads {demand:.1f} clips/s: "
        f"{results['mfcc_cores_per_one_core_trainer']} of a core of MFCCs keeps it fed"
    )
    record(
        "retriever_mfcc_one_core",
        {
            "clips": CLIPS,
            "clip_seconds": CLIP_SECONDS,
            "features": "FLAC decode + crop/pad to 3.5 s + 128 MFCCs (+ SpecAugment: training)",
            "load_average_before": load_before,
            "load_average_after": load_average(),
            **results,
        },
    )
    assert supply > 0


def test_finetune_training_speed_on_one_core(record):
    vocab = vocabulary()
    load_before = load_average()
    source, jpegs = photo_jpegs()
    with on_cores(1):
        results = finetune_speed(vocab)
        for size in FINETUNE_SIZES:
            path = input_path_speed(jpegs, size)
            # CPU time on both sides: what a core of each does, however busy the machine.
            demand = results[f"finetune_{size}"]["samples_per_cpu_s"]
            path["cores_per_one_core_trainer"] = round(demand / path["photos_per_cpu_s"], 3)
            results[f"input_path_{size}"] = path
    print(f"\ntext retriever (MMS) training on one core, 1 torch thread, batch {BATCH}")
    print(
        f"{'':<14}{'samples/s':>10}{'per CPU-s':>11}{'ms/step':>10}{'CPU ms/step':>13}"
        f"{'time x features':>17}{'CPU x features':>16}"
    )
    for mode in image_modes():
        r = results[mode]
        print(
            f"{mode:<14}{r['samples_per_s']:>10.2f}{r['samples_per_cpu_s']:>11.2f}"
            f"{r['ms_per_step']:>10.1f}{r['cpu_ms_per_step']:>13.1f}"
            f"{r['time_vs_features']:>17.2f}{r['cpu_time_vs_features']:>16.2f}"
        )
    for size in FINETUNE_SIZES:
        p = results[f"input_path_{size}"]
        print(
            f"input path {size:>3} px: {p['photos_per_s']:>6.1f} photos/s, "
            f"{p['photos_per_cpu_s']:>6.1f} per CPU-second ({p['ms_per_photo']} ms a photo): "
            f"{p['cores_per_one_core_trainer']} of a core keeps a one-core trainer fed"
        )
    print(f"photos: {source}")
    record(
        "retriever_finetune_one_core",
        {
            "device": "cpu (1 core, 1 torch thread)",
            "modality": "text",
            "loss": "mms",
            "batch": BATCH,
            "steps": {"features": STEPS, "finetune": FINETUNE_STEPS},
            "rounds": FINETUNE_ROUNDS,
            "photos": source,
            "load_average_before": load_before,
            "load_average_after": load_average(),
            **results,
        },
    )
    assert all(results[mode]["samples_per_s"] > 0 for mode in image_modes())
