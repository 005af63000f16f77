"""Throughput of the EfficientNet-lite0 classifier (224 px) and feature extractor (256 px,
8 x 8 grid) on 128 real photos (flickr8k_mini, about 500 x 375), batches of 32, with the time
spent in preprocessing (crop, resize, normalize) apart from the model. CPU in fp32; CUDA in
bf16 and fp16 when torch sees a GPU.

    .venv/bin/pytest -q -s -m benchmark tests/benchmarks/test_vision_models.py
"""

from __future__ import annotations

import time

import pytest
import torch
from PIL import Image

from conceptual.vision.cnn import CnnConfig, FeatureExtractor, ImageNetClassifier, to_tensor

PHOTOS = 128
BATCH_SIZE = 32


@pytest.fixture(scope="module")
def photos(real_data) -> list[Image.Image]:
    """Decoded photos: the pipeline hands the models decoded images."""
    paths = sorted((real_data / "flickr8k_mini" / "images").glob("*.jpg"))[:PHOTOS]
    images = [Image.open(path) for path in paths]
    for image in images:
        image.load()
    return images


def seconds(work) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def throughput(model, images: list[Image.Image], run) -> dict:
    """Images per second of `run(images)` (after a warm-up batch), and how that time splits
    between preprocessing and the model."""
    run(images[:BATCH_SIZE])
    total = seconds(lambda: run(images))
    preprocess = seconds(
        lambda: [
            to_tensor(images[start : start + BATCH_SIZE], model.image_size)
            for start in range(0, len(images), BATCH_SIZE)
        ]
    )
    return {
        "images_per_s": round(len(images) / total, 1),
        "preprocess_s": round(preprocess, 2),
        "model_s": round(total - preprocess, 2),
        "preprocess_share": round(preprocess / total, 3),
    }


def measure(config: CnnConfig, images: list[Image.Image]) -> dict:
    classifier = ImageNetClassifier(config)
    extractor = FeatureExtractor(config)
    return {
        "classifier_224px": throughput(classifier, images, classifier.classify),
        "features_256px_grid": throughput(extractor, images, extractor.extract),
    }


def test_cpu_throughput(photos, record):
    results = measure(CnnConfig(device="cpu", precision="fp32", batch_size=BATCH_SIZE), photos)
    record(
        "vision_models",
        {
            "device": "cpu",
            "precision": "fp32",
            "threads": torch.get_num_threads(),
            "photos": len(photos),
            "batch_size": BATCH_SIZE,
            **results,
        },
    )


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_throughput(photos, record):
    results = {
        precision: measure(
            CnnConfig(device="cuda", precision=precision, batch_size=BATCH_SIZE), photos
        )
        for precision in ("fp32", "bf16", "fp16")
    }
    record(
        "vision_models_cuda",
        {
            "device": torch.cuda.get_device_name(),
            "photos": len(photos),
            "batch_size": BATCH_SIZE,
            **results,
        },
    )
