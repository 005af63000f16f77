"""Synthesized speech for a caption: the parameters of each clip, drawn as the spec says,
and the espeak-ng engine that renders them (spec/retrieval.md, "Conceptual Spoken Captions").

Every clip draws, from a generator seeded by its caption's id (and `seed`, to draw another
set), in this order:
- voice: uniform over `voices` (espeak-ng accent + variant: 8 English accents x 4 variants);
- rate ~ N(1, 0.1^2), pitch ~ N(0, 1^2) semitones, gain ~ N(0, 2^2) dB, each clipped to
  within 2 standard deviations of its mean.
The draws are stored with the clip, and the clip is a pure function of them and the text,
so it regenerates bit for bit.

How a draw maps onto the engine:
- voice -> `espeak-ng -v VOICE`.
- pitch -> exact, by resampling. espeak's own `-p` moves F0 in steps of 1/50 octave
  (0.24 semitones, from its pitch_adjust_tab) and retunes formants with it, so it cannot
  give a drawn semitone value exactly. Instead the 22,050 Hz samples are read as if they
  were recorded at 22,050 * 2^(pitch/12) Hz while resampling to 16 kHz: every frequency is
  multiplied by exactly 2^(pitch/12) (F0 and formants alike, as a slightly smaller or larger
  speaker), and the clip gets shorter by the same factor.
- rate -> `-s round(175 * rate / 2^(pitch/12))` words per minute (175 is espeak's normal
  speed), which gives that time back: the clip lasts as long as at `rate` without a pitch
  change. The integer words per minute are stored as `engine_wpm`.
- gain -> the samples are multiplied by 10^(gain/20). espeak renders at amplitude
  `-a 60` (of 200), about half of full scale at its loudest, so +4 dB (the largest draw)
  usually stays below full scale; should a clip still exceed it, the gain is lowered to put its
  peak at full scale rather than clipping (`gain_applied` records the gain used).

What espeak-ng reads is the caption as text only (`speakable`). espeak-ng obeys commands
embedded in its input even without `-m` (SSML, not used here): U+0001 (Ctrl-A), a number
and a letter change the rate, volume or pitch from there on (the stored draws would then
lie about the audio), `[[...]]` is read as phoneme mnemonics, and a NUL ends the input (the
clip stops short). So each U+0001 command is removed whole, every other control character
(NUL, tabs, line ends) and lone surrogate becomes a space, `[[` and `]]` lose a bracket (a
single bracket is punctuation: a pause, not a word), and runs of spaces become one: a
caption with such sequences sounds exactly as the caption without them. The clip keeps the
caption record's own text.

One espeak-ng process per clip. Measured (BENCHMARKS.md): calling libespeak-ng through a
binding in a long-lived worker takes 4.5 ms per caption against 14 ms for a process, but
the library keeps state between utterances (the same text after another caption gives
different samples), which would make a clip depend on the clips its worker made before.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from dataclasses import dataclass

import numpy as np

from conceptual.config import Config
from conceptual.speech.audio import resample

ENGINE = "espeak-ng"
ESPEAK_RATE = 22_050  # what espeak-ng renders at
NORMAL_WPM = 175  # espeak-ng's default speed: rate 1.0
AMPLITUDE = 60  # -a: headroom for +4 dB of gain (espeak's default is 100)
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


class SynthesisError(RuntimeError):
    """espeak-ng failed on a text, or rendered nothing for it."""


class SynthesisConfig(Config):
    voices: list[str] = [f"{accent}+{variant}" for accent in ACCENTS for variant in VARIANTS]
    rate_sd: float = 0.1  # speaking rate: mean 1.0
    pitch_sd: float = 1.0  # semitones: mean 0
    gain_sd: float = 2.0  # dB: mean 0
    clip_sds: float = 2.0  # every draw is clipped to mean +- this many standard deviations
    seed: int = 0  # another seed draws another set of parameters for the same captions
    timeout_seconds: float = 60.0  # one espeak-ng call


@dataclass(frozen=True)
class Parameters:
    """What a clip was drawn with: with the text, everything needed to regenerate it."""

    voice: str
    rate: float
    pitch: float  # semitones
    gain: float  # dB
    seed: int


def clip_seed(caption_id: str, seed: int = 0) -> int:
    """A 63-bit seed from the caption's id (fits Arrow's int64), the same on every machine."""
    digest = hashlib.sha1(f"{seed}\t{caption_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def draw_parameters(caption_id: str, config: SynthesisConfig) -> Parameters:
    seed = clip_seed(caption_id, config.seed)
    rng = np.random.default_rng(seed)
    voice = config.voices[int(rng.integers(len(config.voices)))]

    def normal(mean: float, sd: float) -> float:
        value = rng.normal(mean, sd)
        return float(np.clip(value, mean - config.clip_sds * sd, mean + config.clip_sds * sd))

    return Parameters(
        voice=voice,
        rate=normal(1.0, config.rate_sd),
        pitch=normal(0.0, config.pitch_sd),
        gain=normal(0.0, config.gain_sd),
        seed=seed,
    )


@dataclass(frozen=True)
class Rendered:
    samples: np.ndarray  # float32 at 16 kHz
    engine_wpm: int
    gain_applied: float


def engine_wpm(parameters: Parameters) -> int:
    return round(NORMAL_WPM * parameters.rate / 2 ** (parameters.pitch / 12))


# espeak-ng's embedded command: \x01, a value (optionally signed), a command letter.
EMBEDDED_COMMAND = re.compile(r"\x01[+-]?[0-9]*[A-Za-z]?")
# Other control characters (C0, DEL, C1) and lone surrogates, which cannot be encoded.
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
PHONEME_BRACKETS = re.compile(r"\[{2,}|\]{2,}")


def speakable(text: str) -> str:
    """`text` as espeak-ng must read it: words, nothing it would obey (module docstring)."""
    text = CONTROL.sub(" ", EMBEDDED_COMMAND.sub(" ", text))
    text = PHONEME_BRACKETS.sub(lambda m: m.group()[0], text)
    return " ".join(text.split())


def espeak(text: str, voice: str, wpm: int, timeout: float) -> np.ndarray:
    """espeak-ng's samples (int16 at 22,050 Hz) for `text`, read from standard input (a
    caption starting with "-" is text, not an option; no markup is interpreted, and
    `speakable` removes the commands espeak-ng would obey)."""
    text = speakable(text)
    if not text:
        raise SynthesisError("no words to speak once control characters are removed")
    command = ["espeak-ng", "-b", "1", "-v", voice, "-s", str(wpm), "-a", str(AMPLITUDE)]
    try:
        done = subprocess.run(
            [*command, "--stdin", "--stdout"],
            input=text.encode("utf-8"),
            capture_output=True,
            timeout=timeout,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SynthesisError(f"espeak-ng: {exc}") from exc
    if done.returncode:
        raise SynthesisError(f"espeak-ng exit {done.returncode}: {done.stderr.decode()[-200:]}")
    wav = done.stdout
    if wav[:4] != b"RIFF" or len(wav) <= 44:
        raise SynthesisError("espeak-ng rendered no audio")
    # --stdout streams a 44-byte header whose sizes are placeholders; the rest is samples.
    return np.frombuffer(wav[44 : 44 + (len(wav) - 44) // 2 * 2], dtype="<i2")


def render(text: str, parameters: Parameters, timeout: float = 60.0) -> Rendered:
    """The clip of `text` with these parameters: 16 kHz float32 samples."""
    wpm = engine_wpm(parameters)
    raw = espeak(text, parameters.voice, wpm, timeout).astype(np.float32) / 32768
    if not np.any(raw):
        raise SynthesisError("espeak-ng rendered silence")
    # Read as if recorded 2^(pitch/12) times faster: every frequency moves by that factor.
    samples = resample(raw, ESPEAK_RATE * 2 ** (parameters.pitch / 12))
    peak = float(np.abs(samples).max())
    gain = min(parameters.gain, 20 * np.log10(32767 / 32768 / peak))
    return Rendered(samples * np.float32(10 ** (gain / 20)), wpm, float(gain))
