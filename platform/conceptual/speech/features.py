"""What the audio tower sees: MFCCs of the 16 kHz signal, 20 ms windows every 10 ms, over a
clip cropped or padded to a fixed length, with SpecAugment (one frequency mask, one time mask,
no time warping) in training only.

The spec (spec/retrieval.md, "Audio features") takes 128 MFCCs as they come (`n_mfcc=128
cmvn=false`). The defaults here are 40 MFCCs, each normalized to mean 0 and variance 1 over
the clip's own frames (cepstral mean and variance normalization, as speech recognizers'
front ends do): the coefficients past the 40th resolve the harmonics of the voice's pitch
rather than what is said, and a coefficient's mean over a clip is the speaker's and the
channel's average spectral envelope, not the words. Measured with a teacher (BENCHMARKS.md,
"Spoken search at our scale"), the spec's tower scores as well on held-out synthetic clips
with them as with the 128 raw ones, with under a third of the convolutions, and they are
what the 1-D tower (`speech_tower=conv1d`), which learned fastest, reads. With `cmvn` the
statistics are taken before padding, so a short clip's silent tail does not enter them; the
tail is then 0 (the mean), as is a SpecAugment mask.

Computed on the fly by the training data loader, not precomputed by a job: a clip's MFCCs
take a few milliseconds of one core (BENCHMARKS.md, "Spoken captions"), while stored they
would be 2.8 times the size of its FLAC, the random crop and the masks differ every epoch
anyway, and any change of these settings would mean recomputing every stored matrix.

MFCCs are librosa's (`librosa.feature.mfcc` over librosa's STFT and Slaney mel filters): a
320-sample Hann window zero-padded to a 512-point FFT (257 bins; a 320-point FFT leaves some
of 128 mel filters empty), frames centred (the first frame is centred on sample 0), the
log-power mel spectrogram in dB, and an orthonormal DCT-II. Cropping and padding are done
on the samples, so a padded tail is silence, and a clip of `seconds` gives
1 + seconds * 100 frames.
"""

from __future__ import annotations

import functools

import librosa
import numpy as np

from conceptual.config import Config
from conceptual.speech.audio import SAMPLE_RATE, decode_16k

WINDOW = 320  # 20 ms at 16 kHz
HOP = 160  # 10 ms
N_FFT = 512


class AudioFeatureConfig(Config):
    n_mfcc: int = 40  # the spec's 128
    n_mels: int = 128
    seconds: float = 3.5  # crop/pad length: 3.5 s for synthesized clips, 8 s for human speech
    freq_mask: int = 20  # SpecAugment F: the frequency mask is 0..F coefficients wide
    time_mask: int = 40  # SpecAugment T: the time mask is 0..T frames wide
    # Each coefficient to mean 0, variance 1 over the clip's frames (the spec's: false).
    cmvn: bool = True


@functools.cache
def mel_filters(n_mels: int) -> np.ndarray:
    return librosa.filters.mel(sr=SAMPLE_RATE, n_fft=N_FFT, n_mels=n_mels)


def mfcc(samples: np.ndarray, n_mfcc: int = 128, n_mels: int = 128) -> np.ndarray:
    """(n_mfcc, frames) float32 MFCCs of 16 kHz samples; the mel filters are made once."""
    stft = librosa.stft(samples, n_fft=N_FFT, win_length=WINDOW, hop_length=HOP)
    mel_db = librosa.power_to_db(mel_filters(n_mels) @ np.abs(stft) ** 2)
    return librosa.feature.mfcc(S=mel_db, n_mfcc=n_mfcc).astype(np.float32)


def crop(samples: np.ndarray, seconds: float, rng: np.random.Generator | None = None) -> np.ndarray:
    """At most `seconds` of samples: a longer clip cropped at a random offset with `rng`,
    else from its start."""
    length = round(seconds * SAMPLE_RATE)
    if len(samples) > length:
        start = int(rng.integers(len(samples) - length + 1)) if rng is not None else 0
        return samples[start : start + length]
    return samples


def crop_or_pad(
    samples: np.ndarray, seconds: float, rng: np.random.Generator | None = None
) -> np.ndarray:
    """Exactly `seconds` of samples: cropped, or a shorter clip padded with silence at the end."""
    samples = crop(samples, seconds, rng)
    return np.pad(samples, (0, round(seconds * SAMPLE_RATE) - len(samples)))


def normalized(features: np.ndarray, frames: int) -> np.ndarray:
    """Each row (coefficient) to mean 0 and variance 1 over its columns, then padded with 0 to
    `frames` columns. A constant row (silence) becomes 0."""
    features = features.astype(np.float64)  # identical frames must give exactly their mean
    var, mean = features.var(axis=1, keepdims=True), features.mean(axis=1, keepdims=True)
    features = (features - mean) / np.sqrt(var + 1e-5)
    return np.pad(features, ((0, 0), (0, frames - features.shape[1])))


def draw_mask(size: int, max_width: int, rng: np.random.Generator) -> tuple[int, int]:
    """(start, width) of a SpecAugment mask: width ~ U{0..max_width}, start ~ U{0..size-width}."""
    width = int(rng.integers(min(max_width, size) + 1))
    return int(rng.integers(size - width + 1)), width


def spec_augment(
    features: np.ndarray, freq_mask: int, time_mask: int, rng: np.random.Generator
) -> np.ndarray:
    """One frequency mask and one time mask (no time warping) over (coefficients, frames),
    filled with the matrix's mean (SpecAugment masks to zero on mean-normalized features)."""
    out = features.copy()
    fill = features.mean()
    start, width = draw_mask(features.shape[0], freq_mask, rng)
    out[start : start + width, :] = fill
    start, width = draw_mask(features.shape[1], time_mask, rng)
    out[:, start : start + width] = fill
    return out


def clip_features(
    audio: bytes, config: AudioFeatureConfig, rng: np.random.Generator | None = None
) -> np.ndarray:
    """The tower's input for a stored clip: decode, then samples_features."""
    return samples_features(decode_16k(audio), config, rng)


def samples_features(
    samples: np.ndarray, config: AudioFeatureConfig, rng: np.random.Generator | None = None
) -> np.ndarray:
    """The tower's input (n_mfcc, 1 + seconds * 100) for 16 kHz samples: crop/pad, MFCC (and
    with `cmvn` their normalization over the clip's own frames, then the padding); with `rng`
    (training) the crop is random and SpecAugment applies, without it (evaluation, search)
    neither does."""
    if config.cmvn:
        frames = 1 + round(config.seconds * SAMPLE_RATE) // HOP  # as many as padded samples give
        heard = crop(samples, config.seconds, rng)
        heard = np.pad(heard, (0, max(0, N_FFT - len(heard))))  # at least one whole window
        coefficients = mfcc(heard, config.n_mfcc, config.n_mels)[:, :frames]
        features = normalized(coefficients, frames).astype(np.float32)
    else:
        features = mfcc(crop_or_pad(samples, config.seconds, rng), config.n_mfcc, config.n_mels)
    if rng is None:
        return features
    return spec_augment(features, config.freq_mask, config.time_mask, rng)
