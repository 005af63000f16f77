"""Small crafted audio files that reproduce an outside review's decode bombs (issue 32): each
is a few KB but declares what a large one would (a sample rate, a channel count, a length),
or hides another container behind an audio media type. Built here with soundfile and struct."""

from __future__ import annotations

import io
import struct

import numpy as np
import soundfile


def encoded(samples: np.ndarray, rate: int = 16_000, **kwargs) -> bytes:
    buffer = io.BytesIO()
    soundfile.write(buffer, samples, rate, **kwargs)
    return buffer.getvalue()


def tone(seconds: float, rate: int = 16_000, amplitude: float = 0.3) -> np.ndarray:
    t = np.arange(round(seconds * rate)) / rate
    return (amplitude * np.sin(2 * np.pi * 440.0 * t)).astype(np.float32)


def wav(samples: np.ndarray, rate: int = 16_000, **kwargs) -> bytes:
    return encoded(samples, rate, format="WAV", **kwargs)


def flac_declaring(rate: int, channels: int) -> bytes:
    """A FLAC whose STREAMINFO declares `rate` Hz (FLAC's maximum is 655,350) and
    `channels` (at most 8): the 20 rate bits and 3 channel bits after the block sizes."""
    data = bytearray(encoded(tone(0.5), format="FLAC"))
    offset = 4 + 4 + 10  # "fLaC", the metadata block header, block and frame sizes
    packed = int.from_bytes(data[offset : offset + 3], "big")
    packed = (rate << 4) | ((channels - 1) << 1) | (packed & 1)  # bits per sample stay
    data[offset : offset + 3] = packed.to_bytes(3, "big")
    return bytes(data)


def wav_declaring(rate: int = 16_000, channels: int = 1, frames: int = 8000) -> bytes:
    """A 16-bit PCM WAV header declaring `rate`, `channels`, and `frames` of silence."""
    data_bytes = frames * channels * 2
    header = struct.pack(
        "<4sI4s4sIHHIIHH4sI",
        b"RIFF", 36 + data_bytes, b"WAVE", b"fmt ", 16, 1, channels,
        rate % (1 << 32), (rate * channels * 2) % (1 << 32), channels * 2, 16,
        b"data", data_bytes,
    )  # fmt: skip
    return header + bytes(data_bytes)


def opus(channels: int = 2, seconds: float = 0.5) -> bytes:
    """Ogg Opus (a container the service does not read), `channels` of silence."""
    return encoded(np.zeros((round(seconds * 48_000), channels), np.float32), 48_000,
                   format="OGG", subtype="OPUS")  # fmt: skip


def loud_float_wav(amplitude: float = 1e19) -> bytes:
    """A float WAV whose samples are finite but far outside [-1, 1]."""
    return wav(tone(0.5, amplitude=1.0) * np.float32(amplitude), subtype="FLOAT")


def id3_chain(tags: int, total_bytes: int = 0) -> bytes:
    """`tags` empty ID3v2.4 tags one after another (`ID3\\x04` and 6 zero bytes each), padded
    with zeros to `total_bytes`: a sniffer that follows them by recursion, copying the rest
    at each step, spent 1.8 GB on 2 MiB of it (issue 46)."""
    chain = b"ID3\x04" + bytes(6)
    data = chain * tags
    return data + bytes(max(0, total_bytes - len(data)))
