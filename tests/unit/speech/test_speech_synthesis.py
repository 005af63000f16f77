"""Spoken captions: the per-clip parameter draws, the espeak-ng engine, and the text checks
that decide a caption's rejection (empty, huge, non-ASCII captions)."""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest

from conceptual.pipelines.features.speech import SYNTHESIZE, SpeechConfig, speak
from conceptual.records import Rejection
from conceptual.speech.audio import SAMPLE_RATE, decode
from conceptual.speech.synthesis import (
    SynthesisConfig,
    SynthesisError,
    draw_parameters,
    render,
    speakable,
)
from conceptual.text.curate import TEXT_REASONS

CAPTION = "a dog runs across the grassy field with a ball in its mouth"


@pytest.fixture(scope="module")
def draws():
    config = SynthesisConfig()
    return [draw_parameters(f"caption-{i}", config) for i in range(20_000)]


@pytest.mark.parametrize(
    ("name", "mean", "sd"), [("rate", 1.0, 0.1), ("pitch", 0.0, 1.0), ("gain", 0.0, 2.0)]
)
def test_draws_have_the_spec_means_spreads_and_clipping(draws, name, mean, sd):
    values = np.array([getattr(p, name) for p in draws])
    assert abs(values.mean() - mean) < 0.03 * sd
    # A normal clipped at 2 sd keeps 0.9545 of its variance's square root... about 0.95 sd.
    assert 0.93 * sd < values.std() < 0.97 * sd
    assert values.min() == pytest.approx(mean - 2 * sd) and values.max() == pytest.approx(
        mean + 2 * sd
    )
    at_bounds = np.mean(np.isclose(np.abs(values - mean), 2 * sd))
    assert at_bounds == pytest.approx(0.0455, abs=0.006)  # P(|Z| > 2)


def test_voices_are_drawn_uniformly_from_at_least_six(draws):
    config = SynthesisConfig()
    counts = Counter(p.voice for p in draws)
    accents = {voice.split("+")[0] for voice in config.voices.espeak}
    assert len(accents) >= 6 and set(counts) == set(config.voices.espeak)
    expected = len(draws) / len(config.voices.espeak)
    assert all(abs(n - expected) < 0.2 * expected for n in counts.values())


def test_the_same_caption_id_draws_the_same_parameters_and_another_seed_others():
    config = SynthesisConfig()
    assert draw_parameters("abc", config) == draw_parameters("abc", SynthesisConfig())
    assert draw_parameters("abc", config) != draw_parameters("abd", config)
    assert draw_parameters("abc", config) != draw_parameters("abc", SynthesisConfig(seed=1))


def test_the_same_caption_id_gives_identical_audio():
    config = SpeechConfig()
    record = {"id": "same-id", "caption": CAPTION}
    first, second = speak(record, config), speak(dict(record), config)
    assert first["audio"][:4] == b"fLaC"
    assert hashlib.sha1(first["audio"]).digest() == hashlib.sha1(second["audio"]).digest()


def test_clips_are_16khz_mono_of_a_sane_duration_and_follow_the_rate():
    parameters = draw_parameters("x", SynthesisConfig())
    slow = render(CAPTION, replace(parameters, rate=0.8))
    fast = render(CAPTION, replace(parameters, rate=1.2))
    clip = speak({"id": "x", "caption": CAPTION}, SpeechConfig())
    samples, rate = decode(clip["audio"])
    assert rate == SAMPLE_RATE == clip["sample_rate"] and samples.ndim == 1
    assert clip["duration"] == pytest.approx(len(samples) / rate)
    assert 1.5 < clip["duration"] < 8
    assert len(fast.samples) / len(slow.samples) == pytest.approx(0.8 / 1.2, rel=0.12)
    assert np.abs(slow.samples).max() < 1 and np.abs(fast.samples).max() < 1


def test_a_pitch_draw_moves_the_voice_by_its_semitones():
    base = draw_parameters("y", SynthesisConfig())
    plain = render(CAPTION, replace(base, pitch=0.0))
    higher = render(CAPTION, replace(base, pitch=2.0))

    def median_f0(samples):  # the strongest autocorrelation lag, 60-400 Hz, loud frames
        frames = np.lib.stride_tricks.sliding_window_view(samples, 1024)[::256]
        frames = frames[np.abs(frames).max(axis=1) > 0.1]
        spectra = np.fft.rfft(frames - frames.mean(axis=1, keepdims=True), 2048)
        autocorrelation = np.fft.irfft(np.abs(spectra) ** 2)[:, 40:267]
        return np.median(SAMPLE_RATE / (40 + autocorrelation.argmax(axis=1)))

    # The same words at the same duration, the voice's pitch times 2^(2/12).
    assert len(higher.samples) == pytest.approx(len(plain.samples), rel=0.03)
    assert median_f0(higher.samples) / median_f0(plain.samples) == pytest.approx(
        2 ** (2 / 12), rel=0.03
    )


@pytest.mark.parametrize(
    ("caption", "reason"),
    [
        ("", "empty"),
        ("   \t ", "empty"),
        (None, "empty"),
        ("a very long caption " * 100, "too_long"),
        ("...", "synthesis_failed"),  # espeak-ng renders silence for punctuation alone
    ],
)
def test_captions_without_a_clip_are_rejected_with_their_reason(caption, reason):
    outcome = speak({"id": "r", "caption": caption}, SpeechConfig())
    assert isinstance(outcome, Rejection) and outcome.reason in SYNTHESIZE.reasons
    assert outcome.reason == reason


def test_an_empty_or_long_caption_has_the_text_filters_reasons_and_details():
    assert SYNTHESIZE.reasons[:2] == TEXT_REASONS[:2] == ("empty", "too_long")
    outcome = speak({"id": "r", "caption": "word " * 40}, SpeechConfig(max_chars=100))
    assert outcome == Rejection("too_long", "200 characters > 100")


def test_non_ascii_and_option_like_captions_are_spoken():
    for caption in ("un café à Zürich, naïve façade", "-v is not an option here", "日本 and 中文"):
        clip = speak({"id": caption, "caption": caption}, SpeechConfig())
        assert not isinstance(clip, Rejection) and clip["caption"] == caption


def test_a_clip_longer_than_max_seconds_is_too_long():
    outcome = speak({"id": "z", "caption": CAPTION}, SpeechConfig(max_seconds=0.5))
    assert isinstance(outcome, Rejection) and outcome.reason == "too_long"


def test_an_engine_failure_is_a_synthesis_error():
    config = SynthesisConfig(voices=["xx-no-such-voice"])
    with pytest.raises(SynthesisError):
        render(CAPTION, draw_parameters("a", config))


@pytest.mark.parametrize(
    "dirty",
    [
        "a dog runs \x0130S across the grassy field \x01200A with a ball in its mouth",
        "a dog runs across the grassy field\x00 with a ball in its mouth",
        "a dog runs\t across the\n grassy field with a ball in its \x01-5P mouth\x00",
    ],
)
def test_espeak_commands_and_control_characters_change_nothing_in_the_clip(dirty):
    """\\x01 commands would change the rate and volume the clip's draws describe, and a NUL
    would end the text: the clip is the clip of the caption without them."""
    assert speakable(dirty) == CAPTION
    clip = speak({"id": "same-id", "caption": dirty}, SpeechConfig())
    clean = speak({"id": "same-id", "caption": CAPTION}, SpeechConfig())
    assert clip["duration"] == clean["duration"] and clip["audio"] == clean["audio"]
    assert clip["caption"] == dirty  # the record's caption, as the caption record has it


def test_phoneme_brackets_are_read_as_text():
    assert speakable("a dog [[h@l@U]] runs") == "a dog [h@l@U] runs"
    assert speakable("[[[ a ]]]] [\x00[x]\x01]") == "[ a ] [ [x] ]"
    assert "[[" not in speakable("[\x01[") and "]]" not in speakable("]\x01S]")


@pytest.mark.parametrize("caption", ["\x00", "\x01\x0130S\x00 \t", "\ud800"])
def test_a_caption_of_control_characters_only_is_empty(caption):
    outcome = speak({"id": "c", "caption": caption}, SpeechConfig())
    assert isinstance(outcome, Rejection) and outcome.reason == "empty"


@pytest.mark.parametrize("language", ["zh", "zh-CN", "cmn", "de"])
def test_a_record_in_another_language_is_refused_not_spelled_out(language):
    record = {"id": "zh", "caption": "一只 狗 在 草地 上 跑", "language": language}
    outcome = speak(record, SpeechConfig())
    assert isinstance(outcome, Rejection) and outcome.reason == "unsupported_language"
    assert language in outcome.detail


def test_english_records_are_spoken_whatever_their_language_tag_looks_like():
    for language in (None, "en", "en-GB", "EN"):
        record = {"id": "en", "caption": "a dog", "language": language}
        assert not isinstance(speak(record, SpeechConfig()), Rejection)
