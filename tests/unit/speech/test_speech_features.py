"""Audio for the speech tower: resampling (anti-aliased), FLAC and MP3, MFCCs checked against
a second implementation, crop/pad, SpecAugment's masks."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.fft
import torch

from conceptual.speech.audio import SAMPLE_RATE, decode, decode_16k, encode_flac, resample
from conceptual.speech.features import (
    HOP,
    N_FFT,
    WINDOW,
    AudioFeatureConfig,
    clip_features,
    crop_or_pad,
    draw_mask,
    mel_filters,
    mfcc,
    samples_features,
    spec_augment,
)


def tone(hz: float, seconds: float, rate: int) -> np.ndarray:
    return (0.5 * np.sin(2 * np.pi * hz * np.arange(round(seconds * rate)) / rate)).astype(
        np.float32
    )


def test_resampling_keeps_what_fits_and_removes_what_would_alias():
    kept = resample(tone(1000, 1.0, 22_050), 22_050)
    assert len(kept) == SAMPLE_RATE and np.abs(kept).max() == pytest.approx(0.5, rel=0.02)
    # 9 kHz lies above the new Nyquist frequency (8 kHz): a naive decimation would fold it
    # to 7 kHz; the anti-aliasing filter removes it (below -60 dB).
    folded = resample(tone(9000, 1.0, 22_050), 22_050)
    assert np.sqrt(np.mean(folded[1000:-1000] ** 2)) < 0.5 * 10 ** (-60 / 20)


def test_flac_round_trips_16khz_mono_and_encodes_deterministically():
    samples = tone(440, 0.5, SAMPLE_RATE)
    data = encode_flac(samples)
    assert data[:4] == b"fLaC" and data == encode_flac(samples.copy())
    decoded, rate = decode(data)
    assert rate == SAMPLE_RATE and decoded.shape == samples.shape
    assert np.abs(decoded - samples).max() < 1e-4  # 16-bit quantization


def test_an_mp3_clip_decodes_to_16khz(real_data):
    mp3 = sorted((real_data / "flickr8k_mini" / "speech_gtts").glob("*.mp3"))[0]
    samples, rate = decode(mp3.read_bytes())
    assert rate == 24_000
    at_16k = decode_16k(mp3.read_bytes())
    assert len(at_16k) == pytest.approx(len(samples) * 2 / 3, abs=2) and np.abs(at_16k).max() > 0.05


def reference_mfcc(samples: np.ndarray, n_mfcc: int = 128) -> np.ndarray:
    """The same MFCC definition by other code: torch's STFT (centred, zero-padded, a Hann
    window of 320 in a 512-point FFT), the mel filter table, dB with an 80 dB floor below
    the peak, and scipy's orthonormal DCT-II."""
    spectrum = torch.stft(
        torch.from_numpy(samples.astype(np.float64)),
        n_fft=N_FFT,
        hop_length=HOP,
        win_length=WINDOW,
        window=torch.hann_window(WINDOW, periodic=True, dtype=torch.float64),
        center=True,
        pad_mode="constant",
        return_complex=True,
    )
    power = spectrum.abs().numpy() ** 2
    db = 10 * np.log10(np.maximum(mel_filters(128).astype(np.float64) @ power, 1e-10))
    db = np.maximum(db, db.max() - 80)
    return scipy.fft.dct(db, type=2, axis=0, norm="ortho")[:n_mfcc]


def test_mfcc_shape_and_values_match_a_second_implementation():
    rng = np.random.default_rng(0)
    samples = (tone(300, 3.5, SAMPLE_RATE) + 0.05 * rng.standard_normal(56_000)).astype(np.float32)
    ours = mfcc(samples)
    assert ours.shape == (128, 351) and ours.dtype == np.float32  # 1 + 3.5 s / 10 ms
    reference = reference_mfcc(samples)
    assert np.abs(ours - reference).max() < 1e-3  # float32 rounding; values reach ~250


def test_crop_or_pad_gives_the_configured_length():
    long, short = np.ones(80_000, np.float32), np.ones(10_000, np.float32)
    assert len(crop_or_pad(long, 3.5)) == len(crop_or_pad(short, 3.5)) == 56_000
    assert crop_or_pad(short, 3.5)[10_000:].max() == 0  # silence after the clip
    offsets = {
        crop_or_pad(np.arange(80_000.0), 3.5, np.random.default_rng(i))[0] for i in range(20)
    }
    assert len(offsets) > 10 and max(offsets) <= 80_000 - 56_000


def test_spec_augment_masks_at_most_f_coefficients_and_t_frames():
    rng = np.random.default_rng(0)
    features = rng.standard_normal((128, 351)).astype(np.float32) + 5
    widths = {"freq": [], "time": []}
    for _ in range(300):
        out = spec_augment(features, 20, 40, rng)
        masked = out != features
        rows = np.flatnonzero(masked.all(axis=1))
        cols = np.flatnonzero(masked.all(axis=0))
        for name, index in (("freq", rows), ("time", cols)):
            if len(index):
                assert index[-1] - index[0] + 1 == len(index)  # one contiguous band
            widths[name].append(len(index))
        assert masked.sum() == len(rows) * 351 + len(cols) * 128 - len(rows) * len(cols)
    assert max(widths["freq"]) == 20 and min(widths["freq"]) == 0
    assert max(widths["time"]) == 40 and min(widths["time"]) == 0
    assert np.mean(widths["freq"]) == pytest.approx(10, abs=1.5)  # U{0..20}


def test_draw_mask_stays_inside():
    rng = np.random.default_rng(1)
    for _ in range(200):
        start, width = draw_mask(30, 40, rng)
        assert 0 <= start and start + width <= 30


@pytest.mark.parametrize("cmvn", [True, False])
def test_clip_features_augment_in_training_only(cmvn):
    config = AudioFeatureConfig(cmvn=cmvn)
    audio = encode_flac(tone(300, 2.0, SAMPLE_RATE))
    evaluation = clip_features(audio, config)
    assert evaluation.shape == (40, 351) and np.array_equal(
        evaluation, clip_features(audio, config)
    )
    training = clip_features(audio, config, np.random.default_rng(3))
    assert training.shape == (40, 351) and not np.array_equal(training, evaluation)
    human = clip_features(audio, AudioFeatureConfig(seconds=8.0, n_mfcc=128, cmvn=cmvn))
    assert human.shape == (128, 801)


def speech_like(seconds: float) -> np.ndarray:
    """A tone gliding in pitch with noise bursts: frames that differ from one another."""
    rng = np.random.default_rng(0)
    t = np.arange(round(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    glide = np.sin(2 * np.pi * (200 + 300 * t) * t) * (0.5 + 0.5 * np.sin(2 * np.pi * 3 * t))
    return (0.3 * glide + 0.02 * rng.standard_normal(len(t))).astype(np.float32)


def test_cmvn_normalizes_each_coefficient_over_the_clip_and_pads_with_zero():
    samples = speech_like(2.0)  # 201 frames of a 3.5 s (351-frame) input
    features = samples_features(samples, AudioFeatureConfig())
    heard, tail = features[:, :201], features[:, 201:]
    assert np.abs(heard.mean(axis=1)).max() < 1e-4
    assert np.allclose(heard.std(axis=1), 1.0, atol=1e-3)
    assert not tail.any()  # the padding is the mean, not silence's MFCCs
    # The spec's unnormalized 128 coefficients, on the same samples, are the rows' source.
    spec = samples_features(samples, AudioFeatureConfig(n_mfcc=128, cmvn=False))
    assert spec.shape == (128, 351) and np.abs(spec[:, :190].mean(axis=1)).max() > 1


def test_cmvn_features_do_not_depend_on_loudness():
    """A gain adds the same dB to every mel band: only the 0th coefficient's level moves, and
    its mean over the clip is taken out."""
    samples = speech_like(3.0)
    config = AudioFeatureConfig()
    quiet, loud = samples_features(0.25 * samples, config), samples_features(samples, config)
    assert np.abs(quiet - loud).max() < 1e-2
    spec = AudioFeatureConfig(cmvn=False)
    assert (
        np.abs(samples_features(0.25 * samples, spec) - samples_features(samples, spec)).max() > 1
    )


def test_cmvn_features_of_silence_and_of_a_clip_shorter_than_a_window():
    config = AudioFeatureConfig()
    assert np.abs(samples_features(np.zeros(16_000, np.float32), config)).max() < 1e-6
    short = samples_features(speech_like(0.01), config)  # 160 samples: less than one window
    assert short.shape == (40, 351) and np.isfinite(short).all()
    tiny = AudioFeatureConfig(seconds=0.01)  # shorter than the window it is padded to
    assert samples_features(speech_like(1.0), tiny).shape == (40, 2)
