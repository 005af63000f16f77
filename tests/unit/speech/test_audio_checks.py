"""Audio from strangers is checked before it is decoded (conceptual.speech.audio.check_header,
decode_checked): the decode bombs of an outside review (issue 32), small-scale, are refused
with their reason, and honest WAV, FLAC and MP3 pass."""

from __future__ import annotations

import time
import tracemalloc

import numpy as np
import pytest
from audio_bombs import (  # tests/audio_bombs.py
    encoded,
    flac_declaring,
    id3_chain,
    loud_float_wav,
    opus,
    tone,
    wav,
    wav_declaring,
)

from conceptual.speech.audio import SAMPLE_RATE, AudioRefused, check_header, decode_checked

MAX_SECONDS = 2.0


def refusal(data: bytes, media_type: str | None = None, **kwargs) -> str:
    with pytest.raises(AudioRefused) as refused:
        decode_checked(data, MAX_SECONDS, media_type, **kwargs)
    assert refused.value.message and "Error" not in refused.value.message
    return refused.value.reason


@pytest.mark.parametrize(
    ("data", "media_type", "reason"),
    [
        pytest.param(flac_declaring(655_350, 8), "audio/flac", "bad_sample_rate",
                     id="FLAC declaring 655,350 Hz"),
        pytest.param(flac_declaring(16_000, 8), "audio/flac", "too_many_channels",
                     id="FLAC declaring 8 channels"),
        pytest.param(wav_declaring(rate=2**31 - 1), "audio/wav", "bad_sample_rate",
                     id="WAV declaring 2^31-1 Hz"),
        pytest.param(wav_declaring(rate=2**31), "audio/wav", "bad_audio",
                     id="WAV declaring 2^31 Hz (libsndfile refuses the header)"),
        pytest.param(wav_declaring(rate=4_000), "audio/wav", "bad_sample_rate", id="4 kHz"),
        pytest.param(wav_declaring(channels=255), "audio/wav", "too_many_channels",
                     id="WAV with 255 channels"),
        pytest.param(opus(255), "audio/wav", "unsupported_format", id="Ogg Opus as audio/wav"),
        pytest.param(opus(1), None, "unsupported_format", id="Ogg Opus undeclared"),
        pytest.param(encoded(tone(0.5), format="FLAC"), "audio/wav", "format_mismatch",
                     id="FLAC as audio/wav"),
        pytest.param(wav(tone(0.5)), "audio/mpeg", "format_mismatch", id="WAV as audio/mpeg"),
        pytest.param(wav(tone(MAX_SECONDS + 0.5)), "audio/wav", "too_long", id="too long"),
        pytest.param(wav_declaring(rate=8_000, frames=round(8_000 * (MAX_SECONDS + 1))), None,
                     "too_long", id="too long at 8 kHz"),
        pytest.param(wav(np.zeros(0, np.float32)), "audio/wav", "empty_audio", id="no samples"),
        pytest.param(b"RIFF\x00\x00\x00\x00WAVEjunk", "audio/wav", "bad_audio",
                     id="a WAV header and nothing more"),
        pytest.param(np.random.default_rng(0).bytes(4000), None, "unsupported_format",
                     id="random bytes"),
        pytest.param(wav(np.full(800, np.nan, np.float32), subtype="FLOAT"), None, "bad_audio",
                     id="NaN samples"),
    ],
)  # fmt: skip
def test_hostile_audio_is_refused_with_its_reason(data, media_type, reason):
    assert refusal(data, media_type) == reason


def test_the_header_is_checked_without_decoding():
    """A WAV declaring a million frames of 255 channels is refused from its 44-byte header
    (the data it declares is not even there)."""
    header = wav_declaring(channels=255, frames=1_000_000)[:44]
    with pytest.raises(AudioRefused, match="2 channels"):
        check_header(header, MAX_SECONDS, "audio/wav")


@pytest.mark.parametrize(
    ("data", "media_type"),
    [
        (wav(tone(1.0)), "audio/wav"),
        (wav(np.stack([tone(1.0, 48_000)] * 2, axis=1), 48_000), "audio/x-wav"),
        (encoded(tone(1.0, 8_000), 8_000, format="FLAC"), "audio/flac"),
        (encoded(tone(1.0), format="MP3"), "audio/mpeg"),
        (encoded(tone(1.0), format="MP3"), None),
    ],
    ids=["WAV 16 kHz", "stereo WAV 48 kHz", "FLAC 8 kHz", "MP3", "MP3 undeclared"],
)
def test_honest_audio_decodes_to_16_khz_mono(data, media_type):
    samples = decode_checked(data, MAX_SECONDS, media_type)
    assert samples.dtype == np.float32 and samples.ndim == 1
    assert abs(len(samples) - SAMPLE_RATE) < 0.05 * SAMPLE_RATE
    assert 0.2 < np.abs(samples).max() <= 1.0


def test_samples_far_outside_one_are_clipped():
    samples = decode_checked(loud_float_wav(1e19), MAX_SECONDS, "audio/wav")
    assert np.isfinite(samples).all() and np.abs(samples).max() == 1.0


def test_a_decode_past_its_deadline_is_refused():
    assert refusal(wav(tone(1.0)), "audio/wav", deadline_s=1e-9) == "decode_timeout"


def test_the_longest_allowed_audio_decodes_fast():
    """The worst a checked query can cost: MAX_SECONDS of 48 kHz stereo."""
    stereo = np.stack([tone(MAX_SECONDS, 48_000)] * 2, axis=1)
    started = time.perf_counter()
    decode_checked(wav(stereo, 48_000), MAX_SECONDS, "audio/wav")
    assert time.perf_counter() - started < 2.0


@pytest.mark.parametrize(
    "data",
    [id3_chain(990, 2 << 20), id3_chain(5000), id3_chain(209_715)],
    ids=["990 tags in 2 MiB", "5,000 tags", "2 MiB of tags"],
)
def test_a_chain_of_id3_tags_is_refused_fast_and_small(data):
    """Chained ID3 tags are followed over a view, not by recursion over copies: refused
    as bad_audio within a second and a few MB, however many the bytes hold."""
    tracemalloc.start()
    started = time.perf_counter()
    try:
        assert refusal(data, "audio/mpeg") == "bad_audio"
        seconds, (_, peak) = time.perf_counter() - started, tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert seconds < 1.0 and peak < 100e6, (seconds, peak)


def test_an_mp3_behind_two_id3_tags_still_decodes():
    mp3 = encoded(tone(1.0), format="MP3")
    tagged = b"ID3\x04\x00\x00\x00\x00\x00\x05" + b"TIT2\x00" + id3_chain(1) + mp3
    assert len(decode_checked(tagged, MAX_SECONDS, "audio/mpeg")) > 0.9 * SAMPLE_RATE
