"""The speech tower's on-the-fly augmentation (speech/augment.py): speed changes a clip's
length by 1/factor and nothing else does, everything stays 16 kHz float32, each variant is
reproducible from its seed, and the training rows hear variants only when it is on."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from conceptual.pipelines.families.retriever.train_retriever import _mfccs
from conceptual.speech.audio import SAMPLE_RATE, encode_flac
from conceptual.speech.augment import (
    SpeechAugmentConfig,
    augmented,
    noisy,
    room_bank,
    row_generator,
    speed_perturbed,
)
from conceptual.speech.features import AudioFeatureConfig
from conceptual.speech.synthesis import SynthesisConfig, draw_parameters, render

# Small, quick rooms: a bank of two (a room of RT60 0.6 s takes ~0.3 s to compute).
ROOMS = {"rooms": 2, "rt60": (0.2, 0.3)}


@pytest.fixture(scope="module")
def clip() -> np.ndarray:
    text = "a brown dog is running through the grass"
    return render(text, draw_parameters("augment", SynthesisConfig())).samples


def test_augmentation_is_off_by_default():
    assert not SpeechAugmentConfig().enabled
    assert SpeechAugmentConfig(speed=[0.9, 1.0, 1.1]).enabled


@pytest.mark.parametrize("factor", [0.9, 1.0, 1.1])
def test_speed_changes_the_length_by_one_over_its_factor(clip, factor):
    faster = speed_perturbed(clip, factor)
    assert faster.dtype == np.float32
    assert len(faster) == pytest.approx(len(clip) / factor, abs=1)


def test_rooms_and_noise_keep_the_length_and_the_level(clip):
    config = SpeechAugmentConfig(reverb=1.0, noise=1.0, snr_db=(10.0, 10.0), **ROOMS)
    heard = augmented(clip, config, row_generator(config, b"clip", 0))
    assert heard.dtype == np.float32 and len(heard) == len(clip)
    assert np.sqrt(np.mean(heard**2)) == pytest.approx(np.sqrt(np.mean(clip**2)), rel=0.15)
    assert not np.allclose(heard, clip, atol=1e-3)


def test_noise_is_added_at_the_drawn_snr(clip):
    heard = noisy(clip, 10.0, np.random.default_rng(0))
    snr = 10 * np.log10(np.mean(clip**2) / np.mean((heard - clip) ** 2))
    assert snr == pytest.approx(10.0, abs=0.2)


def test_a_variant_is_reproducible_from_its_seed_and_others_differ(clip):
    config = SpeechAugmentConfig(speed=[0.9, 1.0, 1.1], reverb=0.5, noise=0.5, **ROOMS)
    first = augmented(clip, config, row_generator(config, b"clip", 3))
    room_bank.cache_clear()  # another worker process computes the same rooms
    again = augmented(clip, config, row_generator(config, b"clip", 3))
    np.testing.assert_array_equal(first, again)
    others = [augmented(clip, config, row_generator(config, b"clip", v)) for v in range(8)]
    assert len({o.tobytes() for o in others}) > 4
    reseeded = config.model_copy(update={"seed": 1})
    assert not np.array_equal(first, augmented(clip, reseeded, row_generator(reseeded, b"clip", 3)))


def test_the_room_bank_is_real_impulse_responses():
    bank = room_bank(2, (0.2, 0.3), 0)
    for response in bank:
        assert np.abs(response).argmax() == 0  # cut at its direct path
        tail = np.cumsum(response[::-1] ** 2)[::-1]  # Schroeder's energy decay
        decay = 10 * np.log10(np.maximum(tail / tail[0], 1e-12))
        t60 = 3 * np.argmax(decay < -20) / SAMPLE_RATE  # T20, as RT60 is measured
        assert 0.1 < t60 < 0.6


def test_the_training_rows_hear_variants_only_when_augmentation_is_on(clip):
    batch = pa.table({"audio": [encode_flac(clip), encode_flac(clip[::-1].copy())]})
    audio = AudioFeatureConfig()
    plain = _mfccs(batch, np.random.default_rng(0), audio)
    off = _mfccs(batch, np.random.default_rng(0), audio, SpeechAugmentConfig())
    np.testing.assert_array_equal(plain, off)
    on = SpeechAugmentConfig(speed=[0.9, 1.1], noise=1.0, **ROOMS)
    heard = _mfccs(batch, np.random.default_rng(0), audio, on)
    assert heard.shape == plain.shape and not np.allclose(heard, plain)
    np.testing.assert_array_equal(heard, _mfccs(batch, np.random.default_rng(0), audio, on))
