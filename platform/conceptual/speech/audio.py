"""Audio in the form every clip is stored in: 16 kHz mono, 16-bit FLAC.

Resampling is soxr's high-quality polyphase resampler (anti-aliased: its low-pass keeps
what lies under the new Nyquist frequency and removes what lies above). Encoding and
decoding are libsndfile's (through soundfile), which reads MP3 since libsndfile 1.1.
Both are deterministic: the same samples give the same FLAC bytes.
"""

from __future__ import annotations

import io

import numpy as np
import soundfile
import soxr

SAMPLE_RATE = 16_000


def resample(samples: np.ndarray, rate: float, target: int = SAMPLE_RATE) -> np.ndarray:
    """Mono float samples at `rate` (any positive number, not only an integer) to `target`."""
    if rate == target:
        return samples.astype(np.float32)
    return soxr.resample(samples.astype(np.float32), rate, target, quality="HQ")


def encode_flac(samples: np.ndarray, rate: int = SAMPLE_RATE) -> bytes:
    """Float samples in [-1, 1] (clipped there) as 16-bit mono FLAC bytes."""
    buffer = io.BytesIO()
    soundfile.write(buffer, np.clip(samples, -1.0, 1.0), rate, format="FLAC", subtype="PCM_16")
    return buffer.getvalue()


def decode(data: bytes) -> tuple[np.ndarray, int]:
    """(mono float32 samples, sample rate) of FLAC, WAV, MP3... bytes; channels averaged."""
    samples, rate = soundfile.read(io.BytesIO(data), dtype="float32", always_2d=True)
    return samples.mean(axis=1), rate


def decode_16k(data: bytes) -> np.ndarray:
    """Any clip's bytes as mono float32 samples at 16 kHz."""
    samples, rate = decode(data)
    return resample(samples, rate)


def duration(samples: np.ndarray, rate: int = SAMPLE_RATE) -> float:
    return len(samples) / rate
