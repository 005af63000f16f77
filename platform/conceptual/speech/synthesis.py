"""Synthesized speech for a caption: the parameters of each clip, drawn as the spec says,
and the engines that render them (spec/retrieval.md, "Conceptual Spoken Captions";
conceptual.speech.engines: espeak-ng, Flite, Festival).

Every clip draws, from a generator seeded by its caption's id (and `seed`, to draw another
set), in this order:
- engine: by `voices.weights` over the engines of `voices.pool` (espeak, flite, festival
  or all); a pool of one engine draws none, so an espeak pool draws exactly as before
  engines were pooled and its clips regenerate bit for bit;
- voice: uniform over that engine's voices (`voices.espeak`: 8 English accents x 4
  variants; `voices.flite`: kal, kal16, awb, rms, slt; `voices.festival`: kal_diphone,
  ked_diphone, cmu_us_slt_arctic_hts);
- rate ~ N(1, 0.1^2), pitch ~ N(0, 1^2) semitones, gain ~ N(0, 2^2) dB, each clipped to
  within 2 standard deviations of its mean.
The draws are stored with the clip (its `source` is the engine), and the clip is a pure
function of them and the text, so it regenerates bit for bit.

How a draw maps onto the engines, the same for each:
- pitch -> exact, by resampling. No engine moves pitch by an exact semitone value
  (espeak's `-p` moves F0 in steps of 1/50 octave and retunes formants with it; Flite and
  Festival take an F0 target of their intonation model, which the voice then deviates
  from). Instead the engine's samples are read as if recorded at its rate * 2^(pitch/12)
  while resampling to 16 kHz: every frequency is multiplied by exactly 2^(pitch/12) (F0 and
  formants alike, as a slightly smaller or larger speaker), and the clip gets shorter by
  the same factor.
- rate -> the engine's speed, rate / 2^(pitch/12), which gives that time back: the clip
  lasts as long as at `rate` without a pitch change. espeak-ng takes it as `-s` words per
  minute (175 * speed, rounded; stored as `engine_wpm`), Flite and Festival as a duration
  stretch 1 / speed (their HTS voice as hts_engine's -r speed; engines.py).
- gain -> the samples are multiplied by 10^(gain/20). espeak renders at amplitude
  `-a 60` (of 200), about half of full scale at its loudest, so +4 dB (the largest draw)
  usually stays below full scale; should a clip (of any engine) still exceed it, the gain is
  lowered to put its peak at full scale rather than clipping (`gain_applied` records the
  gain used).

What an engine reads is the caption as text only (`speakable`). espeak-ng obeys commands
embedded in its input even without `-m` (SSML, not used here): U+0001 (Ctrl-A), a number
and a letter change the rate, volume or pitch from there on (the stored draws would then
lie about the audio), `[[...]]` is read as phoneme mnemonics, and a NUL ends the input (the
clip stops short). So each U+0001 command is removed whole, every other control character
(NUL, tabs, line ends) and lone surrogate becomes a space, `[[` and `]]` lose a bracket (a
single bracket is punctuation: a pause, not a word), and runs of spaces become one: a
caption with such sequences sounds exactly as the caption without them. Every engine reads
the same speakable text. The clip keeps the caption record's own text.

One engine process per clip. Measured (BENCHMARKS.md): calling libespeak-ng through a
binding in a long-lived worker takes 4.5 ms per caption against 14 ms for a process, but
the library keeps state between utterances (the same text after another caption gives
different samples), which would make a clip depend on the clips its worker made before.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pydantic import Field, model_validator

from conceptual.config import Config, ConfigError
from conceptual.speech.audio import resample
from conceptual.speech.engines import BY_NAME, ENGINES, Espeak, SynthesisError

ENGINE = Espeak.name  # the default pool's engine
ESPEAK_RATE = Espeak.RATE
NORMAL_WPM = Espeak.NORMAL_WPM
AMPLITUDE = Espeak.AMPLITUDE
ACCENTS = (
    "en-us",
    "en-us-nyc",
    "en-gb",
    "en-gb-x-rp",
    "en-gb-scotland",
    "en-gb-x-gbclan",
    "en-gb-x-gbcwmd",
    "en-029",
)
VARIANTS = ("m1", "m3", "f2", "f4")  # espeak-ng's voice variants: two male, two female
# A clip whose peak stays below -40 dBFS rendered no speech: Flite's awb/rms/slt render a
# caption of punctuation alone as a pause of noise near -47 dBFS; speech peaks above -16.
SILENCE = 0.01


class EngineWeights(Config):
    """Each engine's share of the clips, relative to the others in the pool (0: none)."""

    espeak: float = Field(default=1.0, ge=0)
    flite: float = Field(default=1.0, ge=0)
    festival: float = Field(default=1.0, ge=0)


class VoicesConfig(Config):
    pool: Literal["espeak", "flite", "festival", "all"] = "espeak"
    weights: EngineWeights = EngineWeights()
    espeak: list[str] = [f"{accent}+{variant}" for accent in ACCENTS for variant in VARIANTS]
    flite: list[str] = ["kal", "kal16", "awb", "rms", "slt"]
    festival: list[str] = ["kal_diphone", "ked_diphone", "cmu_us_slt_arctic_hts"]

    @model_validator(mode="before")
    @classmethod
    def _a_list_is_espeak_voices(cls, data: Any) -> Any:
        # synthesis.voices was espeak-ng's voice list before engines were pooled.
        return {"espeak": data} if isinstance(data, list) else data

    @model_validator(mode="after")
    def _every_engine_drawn_has_voices(self) -> VoicesConfig:
        engines = self.engines()
        if not engines:
            raise ValueError(f"voices.pool={self.pool}: every engine's weight is 0")
        for key in engines:
            if not getattr(self, key):
                raise ValueError(f"voices.{key} is empty, and voices.pool={self.pool} draws it")
        return self

    def engines(self) -> dict[str, float]:
        """The pool's engines (their keys) with a weight above 0, and their weights."""
        keys = tuple(ENGINES) if self.pool == "all" else (self.pool,)
        return {k: getattr(self.weights, k) for k in keys if getattr(self.weights, k) > 0}


class SynthesisConfig(Config):
    voices: VoicesConfig = VoicesConfig()
    rate_sd: float = 0.1  # speaking rate: mean 1.0
    pitch_sd: float = 1.0  # semitones: mean 0
    gain_sd: float = 2.0  # dB: mean 0
    clip_sds: float = 2.0  # every draw is clipped to mean +- this many standard deviations
    seed: int = 0  # another seed draws another set of parameters for the same captions
    timeout_seconds: float = 60.0  # one engine call


def check_engines(voices: VoicesConfig) -> None:
    """At a job's start: every engine and voice the pool draws is installed, or a
    ConfigError (an `error:` line) that names the Debian packages to install."""
    for key in voices.engines():
        if packages := ENGINES[key].missing(getattr(voices, key)):
            raise ConfigError(
                f"synthesis.voices.pool={voices.pool} draws {ENGINES[key].name} voices"
                f" {getattr(voices, key)}, which need the Debian package(s) {', '.join(packages)}:"
                f" apt-get install {' '.join(packages)} (or scripts/setup.sh as root)"
            )


@dataclass(frozen=True)
class Parameters:
    """What a clip was drawn with: with the text, everything needed to regenerate it."""

    voice: str
    rate: float
    pitch: float  # semitones
    gain: float  # dB
    seed: int
    engine: str = ENGINE  # the engine's name, the clip's `source`


def clip_seed(caption_id: str, seed: int = 0) -> int:
    """A 63-bit seed from the caption's id (fits Arrow's int64), the same on every machine."""
    digest = hashlib.sha1(f"{seed}\t{caption_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def draw_parameters(caption_id: str, config: SynthesisConfig) -> Parameters:
    seed = clip_seed(caption_id, config.seed)
    rng = np.random.default_rng(seed)
    weights = config.voices.engines()
    keys = list(weights)
    if len(keys) > 1:  # one engine draws nothing here: its clips stay those of before pools
        p = np.array(list(weights.values())) / sum(weights.values())
        keys = [keys[int(rng.choice(len(keys), p=p))]]
    voices = getattr(config.voices, keys[0])
    voice = voices[int(rng.integers(len(voices)))]

    def normal(mean: float, sd: float) -> float:
        value = rng.normal(mean, sd)
        return float(np.clip(value, mean - config.clip_sds * sd, mean + config.clip_sds * sd))

    return Parameters(
        voice=voice,
        rate=normal(1.0, config.rate_sd),
        pitch=normal(0.0, config.pitch_sd),
        gain=normal(0.0, config.gain_sd),
        seed=seed,
        engine=ENGINES[keys[0]].name,
    )


@dataclass(frozen=True)
class Rendered:
    samples: np.ndarray  # float32 at 16 kHz
    engine_wpm: int | None  # espeak-ng's -s; None for the engines that take a float speed
    gain_applied: float


def engine_wpm(parameters: Parameters) -> int:
    return round(NORMAL_WPM * parameters.rate / 2 ** (parameters.pitch / 12))


# espeak-ng's embedded command: \x01, a value (optionally signed), a command letter.
EMBEDDED_COMMAND = re.compile(r"\x01[+-]?[0-9]*[A-Za-z]?")
# Other control characters (C0, DEL, C1) and lone surrogates, which cannot be encoded.
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
PHONEME_BRACKETS = re.compile(r"\[{2,}|\]{2,}")


def speakable(text: str) -> str:
    """`text` as an engine must read it: words, nothing it would obey (module docstring)."""
    text = CONTROL.sub(" ", EMBEDDED_COMMAND.sub(" ", text))
    text = PHONEME_BRACKETS.sub(lambda m: m.group()[0], text)
    return " ".join(text.split())


def espeak(text: str, voice: str, wpm: int, timeout: float) -> np.ndarray:
    """espeak-ng's samples (int16 at 22,050 Hz) for `text` (the throughput benchmark's)."""
    raw = ENGINES["espeak"].render(speakable(text), voice, wpm / NORMAL_WPM, timeout)
    return np.round(raw.samples * 32768).astype(np.int16)


def render(text: str, parameters: Parameters, timeout: float = 60.0) -> Rendered:
    """The clip of `text` with these parameters: 16 kHz float32 samples."""
    text = speakable(text)
    if not text:
        raise SynthesisError("no words to speak once control characters are removed")
    shift = 2 ** (parameters.pitch / 12)
    raw = BY_NAME[parameters.engine].render(
        text, parameters.voice, parameters.rate / shift, timeout
    )
    if raw.samples.size == 0 or np.abs(raw.samples).max() < SILENCE:
        raise SynthesisError(f"{parameters.engine} rendered silence")
    # Read as if recorded 2^(pitch/12) times faster: every frequency moves by that factor.
    samples = resample(raw.samples, raw.rate * shift)
    peak = float(np.abs(samples).max())
    gain = min(parameters.gain, 20 * np.log10(32767 / 32768 / peak))
    return Rendered(samples * np.float32(10 ** (gain / 20)), raw.wpm, float(gain))
