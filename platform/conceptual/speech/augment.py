"""Augmentation of a clip's 16 kHz samples for the speech tower's training, on the fly: one
stored clip is heard in many variants (a faster or slower speaker, in a room, in noise),
where storing each variant would multiply the clips. In this order, as Kaldi's recipes do:

- speed perturbation: a factor drawn uniformly from `speed` (Kaldi: 0.9, 1.0, 1.1); the
  samples are read as if recorded at 16 kHz x factor (sox's `speed`, Kaldi's
  perturb_data_dir_speed.sh): tempo and pitch both scale, and the clip's length becomes
  length / factor (0.9: 11% longer; 1.1: 9% shorter). The only step that changes length.
- reverberation, with probability `reverb`: the clip convolved with the impulse response of
  a simulated shoebox room (pyroomacoustics' image source model: a room of 3-10 x 3-8 x
  2.5-4 m, reverberation time RT60 ~ U(rt60), source and microphone at random places at
  least 0.5 m from the walls). Room impulse responses take 0.01-0.8 s each to compute, so
  each worker process computes a bank of `rooms` once, drawn from `seed` (the same bank in
  every process), and each row picks one. The response is cut before its direct path (the
  words stay where they were), the tail past the clip's end is dropped (same length), and
  the result is scaled back to the dry clip's RMS level.
- additive noise, with probability `noise`: white Gaussian noise at an SNR ~ U(snr_db) dB
  against the clip's mean power (no noise corpus ships offline; MUSAN is Kaldi's).

`augmented` is a pure function of the samples, the config and its generator. The training
rows (train_retriever._mfccs) seed that generator from `seed`, the clip's bytes and a
variant drawn anew each epoch from `variants`, so a row's variant can be regenerated.
"""

from __future__ import annotations

import functools
import hashlib

import numpy as np
import scipy.signal
from pydantic import Field, model_validator

from conceptual.config import Config
from conceptual.speech.audio import SAMPLE_RATE, resample

ROOM_MIN, ROOM_MAX = (3.0, 3.0, 2.5), (10.0, 8.0, 4.0)  # metres: small office to classroom
WALL_GAP = 0.5  # metres between a wall and the source or microphone


class SpeechAugmentConfig(Config):
    speed: list[float] = Field(default=[1.0], min_length=1)  # Kaldi's: [0.9, 1.0, 1.1]
    noise: float = Field(default=0.0, ge=0, le=1)  # share of rows with additive noise
    snr_db: tuple[float, float] = (5.0, 20.0)  # their SNR ~ U(low, high) dB
    reverb: float = Field(default=0.0, ge=0, le=1)  # share of rows heard in a simulated room
    rt60: tuple[float, float] = (0.2, 0.6)  # its reverberation time ~ U(low, high) seconds
    rooms: int = Field(default=32, ge=1)  # impulse responses per bank (module docstring)
    seed: int = 0  # the bank's rooms and every row's draws
    variants: int = Field(default=100, ge=1)  # distinct draws a clip can get across epochs

    @model_validator(mode="after")
    def _ranges_are_ordered(self) -> SpeechAugmentConfig:
        if any(f <= 0 for f in self.speed):
            raise ValueError(f"augment.speed={self.speed}: factors must be above 0")
        if self.snr_db[0] > self.snr_db[1] or not 0 < self.rt60[0] <= self.rt60[1]:
            raise ValueError("augment.snr_db and augment.rt60 are (low, high), low <= high")
        return self

    @property
    def enabled(self) -> bool:
        return self.speed != [1.0] or self.noise > 0 or self.reverb > 0


def row_generator(config: SpeechAugmentConfig, clip: bytes, variant: int) -> np.random.Generator:
    """The generator of a clip's `variant`: the same draws on every machine and epoch."""
    key = int.from_bytes(hashlib.sha1(clip).digest()[:8], "big")
    return np.random.default_rng([config.seed, key, variant])


def speed_perturbed(samples: np.ndarray, factor: float) -> np.ndarray:
    """Tempo and pitch x factor; length / factor (sox `speed`)."""
    return samples if factor == 1.0 else resample(samples, SAMPLE_RATE * factor)


def room_response(rt60: float, rng: np.random.Generator) -> np.ndarray:
    """The impulse response of a random shoebox room with this RT60, from its direct path."""
    import pyroomacoustics as pra  # a second or two to import: only where rooms are built

    size = rng.uniform(ROOM_MIN, ROOM_MAX)
    absorption, max_order = pra.inverse_sabine(rt60, size)
    room = pra.ShoeBox(
        size, fs=SAMPLE_RATE, materials=pra.Material(absorption), max_order=max_order
    )
    room.add_source(rng.uniform(WALL_GAP, size - WALL_GAP))
    room.add_microphone(rng.uniform(WALL_GAP, size - WALL_GAP))
    room.compute_rir()
    response = np.asarray(room.rir[0][0], dtype=np.float32)
    return response[int(np.abs(response).argmax()) :]


@functools.lru_cache(maxsize=2)
def room_bank(rooms: int, rt60: tuple[float, float], seed: int) -> tuple[np.ndarray, ...]:
    """`rooms` impulse responses, computed once per process, the same in every process."""
    rng = np.random.default_rng([seed, rooms])
    return tuple(room_response(float(rng.uniform(*rt60)), rng) for _ in range(rooms))


def reverberated(samples: np.ndarray, response: np.ndarray) -> np.ndarray:
    wet = scipy.signal.fftconvolve(samples, response)[: len(samples)]
    dry_rms, wet_rms = np.sqrt(np.mean(samples**2)), np.sqrt(np.mean(wet**2))
    return (wet * (dry_rms / wet_rms if wet_rms > 0 else 0.0)).astype(np.float32)


def noisy(samples: np.ndarray, snr_db: float, rng: np.random.Generator) -> np.ndarray:
    power = float(np.mean(samples.astype(np.float64) ** 2))
    noise = rng.standard_normal(len(samples)) * np.sqrt(power / 10 ** (snr_db / 10))
    return (samples + noise).astype(np.float32)


def augmented(
    samples: np.ndarray, config: SpeechAugmentConfig, rng: np.random.Generator
) -> np.ndarray:
    """The clip (16 kHz float32) as one training variant: speed, then room, then noise.
    Every draw is made whether or not its step applies, so one step's setting does not
    change another's draws."""
    factor = config.speed[int(rng.integers(len(config.speed)))]
    room, in_room = int(rng.integers(config.rooms)), rng.random() < config.reverb
    snr, in_noise = float(rng.uniform(*config.snr_db)), rng.random() < config.noise
    samples = speed_perturbed(samples.astype(np.float32), factor)
    if in_room:
        samples = reverberated(samples, room_bank(config.rooms, config.rt60, config.seed)[room])
    if in_noise:
        samples = noisy(samples, snr, rng)
    return samples
