"""Spoken captions from a pool of engines (espeak-ng, Flite, Festival): every voice speaks a
real Flickr8k caption, clips name their engine and voice, pools draw by weight, and a pool
whose engine is not installed stops the job before it starts, naming the Debian package."""

from __future__ import annotations

import csv
import io
import json
import tarfile
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from conceptual.config import ConfigError
from conceptual.pipelines.features.speech import SpeechConfig, speak, tar_bytes
from conceptual.records import Rejection
from conceptual.speech.audio import SAMPLE_RATE, decode
from conceptual.speech.engines import ENGINES, SynthesisError
from conceptual.speech.synthesis import (
    SynthesisConfig,
    VoicesConfig,
    check_engines,
    clip_seed,
    draw_parameters,
    render,
)

CAPTIONS = Path("/work/shared/data/flickr8k_mini/captions.csv")


@pytest.fixture(scope="module")
def caption() -> str:
    """A real caption: the first of the shared Flickr8k-mini set."""
    if not CAPTIONS.exists():
        pytest.skip(f"{CAPTIONS} is not here")
    with CAPTIONS.open(newline="") as f:
        return next(csv.DictReader(f))["caption"]


VOICES = [(key, voice) for key in ENGINES for voice in getattr(VoicesConfig(), key)[:5]]


@pytest.mark.parametrize(("key", "voice"), VOICES, ids=[f"{k}-{v}" for k, v in VOICES])
def test_every_voice_speaks_a_real_caption(caption, key, voice):
    parameters = replace(
        draw_parameters("x", SynthesisConfig()), engine=ENGINES[key].name, voice=voice
    )
    clip = render(caption, parameters)
    seconds = len(clip.samples) / SAMPLE_RATE
    words = len(caption.split())
    assert clip.samples.dtype == np.float32 and np.abs(clip.samples).max() < 1
    assert 0.15 * words < seconds < 0.8 * words  # speech, not silence or a stuck engine
    assert (clip.engine_wpm is not None) == (key == "espeak")


@pytest.mark.parametrize("key", ["flite", "festival"])
def test_the_rate_draw_sets_the_speed_of_the_other_engines(caption, key):
    voices = getattr(VoicesConfig(), key)
    base = replace(draw_parameters("y", SynthesisConfig()), engine=ENGINES[key].name, pitch=0.0)
    for voice in (voices[0], voices[-1]):  # festival: a diphone voice, then the HTS voice
        slow = render(caption, replace(base, voice=voice, rate=0.8))
        fast = render(caption, replace(base, voice=voice, rate=1.2))
        assert len(fast.samples) / len(slow.samples) == pytest.approx(0.8 / 1.2, rel=0.12)


def test_a_clip_and_its_webdataset_metadata_name_its_engine_and_voice(caption):
    config = SpeechConfig(synthesis={"voices": {"pool": "all"}})
    seen = set()
    for i in range(12):
        record = {"id": f"caption-{i}", "caption": caption}
        clip = speak(record, config)
        drawn = draw_parameters(record["id"], config.synthesis)
        assert (clip["source"], clip["voice"]) == (drawn.engine, drawn.voice)
        samples, rate = decode(clip["audio"])
        assert rate == SAMPLE_RATE and clip["duration"] == pytest.approx(len(samples) / rate)
        with tarfile.open(fileobj=io.BytesIO(tar_bytes([clip]))) as tar:
            meta = json.load(tar.extractfile(f"{clip['id']}.json"))
        assert (meta["source"], meta["voice"]) == (clip["source"], clip["voice"])
        seen.add(clip["source"])
    assert seen == {"espeak-ng", "flite", "festival"}


def test_the_pool_draws_engines_by_weight_and_voices_uniformly():
    config = SynthesisConfig(voices={"pool": "all", "weights": {"espeak": 2, "festival": 1}})
    draws = [draw_parameters(f"c{i}", config) for i in range(6000)]
    engines = Counter(p.engine for p in draws)
    assert engines["espeak-ng"] / 6000 == pytest.approx(0.5, abs=0.03)
    assert engines["flite"] / 6000 == pytest.approx(0.25, abs=0.03)
    flite = Counter(p.voice for p in draws if p.engine == "flite")
    assert set(flite) == set(config.voices.flite)
    assert min(flite.values()) > 0.7 * max(flite.values())
    only = SynthesisConfig(voices={"pool": "all", "weights": {"espeak": 0, "festival": 0}})
    assert {draw_parameters(f"c{i}", only).engine for i in range(50)} == {"flite"}


def test_the_espeak_pool_draws_as_before_engines_were_pooled():
    """Clips made before pools regenerate bit for bit: the same generator calls in order."""
    config = SynthesisConfig()
    for caption_id in ("a", "b", "c"):
        rng = np.random.default_rng(clip_seed(caption_id))
        voice = config.voices.espeak[int(rng.integers(len(config.voices.espeak)))]
        rate = float(np.clip(rng.normal(1.0, 0.1), 0.8, 1.2))
        drawn = draw_parameters(caption_id, config)
        assert (drawn.engine, drawn.voice, drawn.rate) == ("espeak-ng", voice, rate)
    # The old key, a list of espeak-ng voices, still reads.
    assert SynthesisConfig(voices=["en-us+m1"]).voices.espeak == ["en-us+m1"]


def test_a_pool_whose_engine_is_missing_stops_with_the_debian_package(monkeypatch, tmp_path):
    check_engines(VoicesConfig(pool="all"))  # this machine has them all (requirements/apt.txt)
    monkeypatch.setenv("PATH", str(tmp_path))  # a machine without any engine
    for key, packages in [("flite", "flite"), ("festival", "festival, festvox-kallpc16k")]:
        with pytest.raises(ConfigError, match=f"voices.pool={key}.*{packages}"):
            check_engines(VoicesConfig(pool=key))


def test_an_unknown_voice_is_a_startup_error_not_a_clip_in_another_voice():
    with pytest.raises(ConfigError, match="none known with the voice cmu_us_awb_cg"):
        check_engines(VoicesConfig(pool="festival", festival=["cmu_us_awb_cg"]))
    with pytest.raises(ConfigError, match="voices.pool=flite"):
        check_engines(VoicesConfig(pool="flite", flite=["kal", "nosuchvoice"]))
    # A path or URL is never handed to an engine as a voice (Flite would load it).
    with pytest.raises(SynthesisError, match="not a voice name"):
        ENGINES["flite"].render("a dog", "/tmp/voice.flitevox", 1.0, 10)
    with pytest.raises(SynthesisError, match="festival"):  # Festival says so, and exits 0
        ENGINES["festival"].render("a dog", "nosuchvoice", 1.0, 30)


@pytest.mark.parametrize("key", list(ENGINES))
def test_a_caption_an_engine_fails_on_is_rejected_not_raised(key):
    """Festival crashes on punctuation alone, Flite renders silence: both are a rejection."""
    config = SpeechConfig(synthesis={"voices": {"pool": key}})
    outcome = speak({"id": "r", "caption": "..."}, config)
    assert isinstance(outcome, Rejection) and outcome.reason == "synthesis_failed"
    assert ENGINES[key].name in outcome.detail
