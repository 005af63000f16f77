"""The clip record (records.CLIP), one shape for synthesized and imported speech."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from conceptual.records import record_image_id
from conceptual.speech.audio import SAMPLE_RATE, duration, encode_flac
from conceptual.speech.synthesis import Parameters, Rendered


def clip_id(caption_id: str, source: str, seed: int) -> str:
    """Stable: the same caption, source and seed give the same id in every run."""
    return hashlib.sha1(f"{caption_id}\t{source}\t{seed}".encode()).hexdigest()[:20]


def caption_fields(record: dict[str, Any]) -> dict[str, Any]:
    """What a clip keeps of the caption record it speaks. The image's identity is the
    record's `image_id` (curation writes it; a features output carries it), null for a
    record with neither it nor an image."""
    return {
        "caption_id": record["id"],
        "image_id": record_image_id(record.get("image_id"), record.get("image")),
        "image_url": record.get("image_url"),
        "caption": record["caption"],
        "split": record.get("split"),
    }


def _audio_fields(samples: np.ndarray) -> dict[str, Any]:
    return {
        "audio": encode_flac(samples),
        "sample_rate": SAMPLE_RATE,
        "duration": duration(samples),
    }


def synthesized_clip(
    record: dict[str, Any], parameters: Parameters, rendered: Rendered
) -> dict[str, Any]:
    return {
        "id": clip_id(record["id"], parameters.engine, parameters.seed),
        **caption_fields(record),
        **_audio_fields(rendered.samples),
        "source": parameters.engine,  # the engine, and its own name of the voice
        "voice": parameters.voice,
        "rate": parameters.rate,
        "pitch": parameters.pitch,
        "gain": parameters.gain,
        "seed": parameters.seed,
        "engine_wpm": rendered.engine_wpm,
        "gain_applied": rendered.gain_applied,
    }


def imported_clip(record: dict[str, Any], samples: np.ndarray, source: str) -> dict[str, Any]:
    """A recorded clip: its voice is its source, rate, pitch and gain those of the recording."""
    return {
        "id": clip_id(record["id"], source, 0),
        **caption_fields(record),
        **_audio_fields(samples),
        "source": source,
        "voice": source,
        "rate": 1.0,
        "pitch": 0.0,
        "gain": 0.0,
        "seed": 0,
        "engine_wpm": None,
        "gain_applied": 0.0,
    }
