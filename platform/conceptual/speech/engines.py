"""The offline text-to-speech engines a clip's voice comes from, behind one interface.

Each engine renders a text with one of its voices at a speed (1.0 = the voice's normal
speaking rate) and returns its samples at its own sample rate; synthesis.render does the
rest the same way for every engine (pitch by resampling, gain by scaling). Every call is
its own process, with the text in a file or on standard input (never on the command line,
so a caption starting with "-" stays text), and a voice name that must be one the engine
lists: Flite loads a path or URL given as a voice, and Festival falls back to its default
voice for an unknown one, either of which would make the stored voice lie.

| engine    | Debian package(s)                            | speed setting                  |
|-----------|----------------------------------------------|--------------------------------|
| espeak-ng | espeak-ng                                    | -s words per minute (175 = 1.0)|
| flite     | flite                                        | duration_stretch = 1 / speed   |
| festival  | festival + festvox-kallpc16k (kal_diphone),  | Duration_Stretch = 1 / speed   |
|           | festvox-kdlpc16k (ked_diphone),              | (diphone voices), hts_engine   |
|           | festvox-us-slt-hts (cmu_us_slt_arctic_hts)   | -r speed (the HTS voice)       |

All three take the drawn rate; none takes pitch or gain in a way that gives a drawn value
exactly, so those are applied to the samples for every engine alike (synthesis.py).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile


class SynthesisError(RuntimeError):
    """An engine failed on a text, or rendered nothing for it."""


@dataclass(frozen=True)
class Raw:
    samples: np.ndarray  # float32 in [-1, 1]
    rate: int  # the engine's sample rate
    wpm: int | None = None  # espeak-ng's -s; the other engines take a float speed


def _run(engine: str, command: list[str], timeout: float, text: bytes | None = None):
    try:
        done = subprocess.run(command, input=text, capture_output=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SynthesisError(f"{engine}: {exc}") from exc
    if done.returncode:
        raise SynthesisError(f"{engine} exit {done.returncode}: {done.stderr.decode()[-200:]}")
    return done


def _read_wav(engine: str, path: Path) -> Raw:
    try:
        samples, rate = soundfile.read(path, dtype="float32")
    except (OSError, RuntimeError) as exc:  # no file, or not a WAV
        raise SynthesisError(f"{engine} rendered no audio: {exc}") from exc
    return Raw(samples, rate)


class Engine:
    """One engine: its name (the clip's `source`), its program, and the Debian package of
    each voice (the error that names what to install when one is missing)."""

    name: str
    program: str
    # voice -> Debian package; "*": the engine's own, alone when it holds every voice
    packages: dict[str, str]
    # A voice is a name, never a path, URL or option (Flite loads a path or URL as a voice).
    VOICE = re.compile(r"[a-z0-9_]+")

    def render(self, text: str, voice: str, speed: float, timeout: float) -> Raw:
        """`text` in `voice` at `speed`: the engine's samples at its own rate."""
        if not self.VOICE.fullmatch(voice):
            raise SynthesisError(f"{self.name}: {voice!r} is not a voice name")
        return self._render(text, voice, speed, timeout)

    def _render(self, text: str, voice: str, speed: float, timeout: float) -> Raw:
        raise NotImplementedError

    def package(self, voice: str) -> str:
        if voice in self.packages or len(self.packages) == 1:
            return self.packages.get(voice, self.packages["*"])
        return f"(none known with the voice {voice})"

    def installed_voices(self) -> set[str] | None:
        """The voices this machine has, or None when any name may be tried (espeak-ng)."""
        return None

    def missing(self, voices: list[str]) -> list[str]:
        """The Debian packages to install before these voices can speak (empty: none)."""
        if shutil.which(self.program) is None:
            return sorted({self.packages["*"], *(self.package(v) for v in voices)})
        installed = self.installed_voices()
        if installed is None:
            return []
        return sorted({self.package(v) for v in voices if v not in installed})


class Espeak(Engine):
    """espeak-ng: 22,050 Hz, amplitude -a 60 (of 200) for headroom, text on standard input."""

    name, program = "espeak-ng", "espeak-ng"
    packages = {"*": "espeak-ng"}
    VOICE = re.compile(r"[a-z0-9][a-z0-9_+-]*")  # accent+variant: en-gb-x-rp+f2
    RATE = 22_050
    NORMAL_WPM = 175  # espeak-ng's default speed: 1.0
    AMPLITUDE = 60  # -a: headroom for +4 dB of gain (espeak's default is 100)

    def _render(self, text: str, voice: str, speed: float, timeout: float) -> Raw:
        wpm = round(self.NORMAL_WPM * speed)
        command = [self.program, "-b", "1", "-v", voice, "-s", str(wpm), "-a", str(self.AMPLITUDE)]
        wav = _run(self.name, [*command, "--stdin", "--stdout"], timeout, text.encode()).stdout
        if wav[:4] != b"RIFF" or len(wav) <= 44:
            raise SynthesisError("espeak-ng rendered no audio")
        # --stdout streams a 44-byte header whose sizes are placeholders; the rest is samples.
        samples = np.frombuffer(wav[44 : 44 + (len(wav) - 44) // 2 * 2], dtype="<i2")
        return Raw(samples.astype(np.float32) / 32768, self.RATE, wpm)


class Flite(Engine):
    """CMU Flite's compiled-in voices (kal and kal16 diphone, awb/rms/slt cluster-gen)."""

    name, program = "flite", "flite"
    packages = {"*": "flite"} | dict.fromkeys(("kal", "kal16", "awb", "rms", "slt"), "flite")

    def _render(self, text: str, voice: str, speed: float, timeout: float) -> Raw:
        with tempfile.TemporaryDirectory(prefix="flite-") as tmp:
            source, wav = Path(tmp) / "text.txt", Path(tmp) / "clip.wav"
            source.write_text(text, encoding="utf-8")
            stretch = f"duration_stretch={1 / speed:.6f}"
            command = [self.program, "-voice", voice, "--setf", stretch, "-f", str(source)]
            _run(self.name, [*command, "-o", str(wav)], timeout)
            return _read_wav(self.name, wav)

    def installed_voices(self) -> set[str] | None:
        # "Voices available: kal awb_time kal16 awb rms slt "
        listed = subprocess.run([self.program, "-lv"], capture_output=True, text=True, timeout=30)
        return set(listed.stdout.partition(":")[2].split())


class Festival(Engine):
    """Festival's English voices through text2wave (text mode: no markup is read)."""

    name, program = "festival", "text2wave"
    packages = {
        "*": "festival",
        "kal_diphone": "festvox-kallpc16k",
        "ked_diphone": "festvox-kdlpc16k",
        "cmu_us_slt_arctic_hts": "festvox-us-slt-hts",
    }

    def _render(self, text: str, voice: str, speed: float, timeout: float) -> Raw:
        # Diphone voices read Duration_Stretch and ignore hts_engine's -r; the HTS voice the
        # other way round (measured: a stretch of 1.3 leaves its clip unchanged), so both go.
        stretch = f"(Parameter.set 'Duration_Stretch {1 / speed:.6f})"
        hts = (  # defvar: a diphone voice never loads hts.scm, which defines it
            "(begin (defvar hts_engine_params nil) (set! hts_engine_params (append"
            f' hts_engine_params (list (list "-r" {speed:.6f})))))'
        )
        with tempfile.TemporaryDirectory(prefix="festival-") as tmp:
            source, wav = Path(tmp) / "text.txt", Path(tmp) / "clip.wav"
            source.write_text(text, encoding="utf-8")
            # -scale 0.5: ked_diphone reaches full scale (clips) at its own level; at half it
            # has espeak-ng's headroom for the gain draws.
            command = [self.program, "-scale", "0.5", "-eval", f"(voice_{voice})"]
            command += ["-eval", stretch, "-eval", hts]
            done = _run(self.name, [*command, "-o", str(wav), str(source)], timeout)
            # An unknown voice is an error message and a clip in the default voice, exit 0.
            if b"SIOD ERROR" in done.stderr:
                raise SynthesisError(f"festival: {done.stderr.decode()[-200:]}")
            return _read_wav(self.name, wav)

    def installed_voices(self) -> set[str] | None:
        probe = "(print (voice.list))"  # the voices Festival finds on its path
        done = subprocess.run(
            ["festival", "--batch", probe], capture_output=True, text=True, timeout=60
        )
        return set(re.findall(r"[a-z0-9_]+", done.stdout))


# By the pool's key (voices.pool, voices.weights.*): the engine.
ENGINES: dict[str, Engine] = {"espeak": Espeak(), "flite": Flite(), "festival": Festival()}
BY_NAME: dict[str, Engine] = {engine.name: engine for engine in ENGINES.values()}
