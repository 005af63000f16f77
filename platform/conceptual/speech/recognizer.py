"""Spoken search's baseline: an offline recognizer turns a clip into text, and a text retriever
searches with the text (the route a user would take instead of an end-to-end speech tower).

The recognizer is CMU PocketSphinx (the `pocketsphinx` wheel, BSD-style licence): its
US-English acoustic model, pronunciation dictionary and trigram language model ship inside
the wheel, so it runs without a network and without weights fetched at run time. On the
shared `speech_gtts` clips (a voice none of our models heard) its general English model gets
about half the words wrong; a text retriever carries a trigram model of its own training
captions (speech/language_model.py), which PocketSphinx then uses in its place
(`asr.lm=captions`, the default): about a quarter wrong, and faster.

    recognizer = Recognizer(saved.language_model)   # None: the general English model
    recognizer.transcribe(samples_16k)            # "a man lays on a bench ..."
    word_error_rate(["a dog runs"], ["the dog runs"])   # 1/3
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pocketsphinx import Decoder
from pydantic import model_validator

from conceptual.config import Config
from conceptual.speech.audio import SAMPLE_RATE, decode_16k

WORD = re.compile(r"[a-z0-9']+")


class AsrConfig(Config):
    """Spoken queries heard by the recognizer and searched by a text retriever. `asr=true`
    (a bool) reads as `asr.enabled=true`."""

    enabled: bool = False
    # captions: the text retriever's own caption model where it has one (else general);
    # general: PocketSphinx's English model
    lm: Literal["captions", "general"] = "captions"

    @model_validator(mode="before")
    @classmethod
    def _from_bool(cls, value: Any) -> Any:
        return {"enabled": value} if isinstance(value, bool) else value

    def language_model(self, saved_model: Path | None) -> Path | None:
        """The ARPA file to hear with: the model's caption model, or None for the general one."""
        return saved_model if self.lm == "captions" else None


class Recognizer:
    """One PocketSphinx decoder with the wheel's US-English acoustic model and dictionary and
    `language_model` (an ARPA file; None: the wheel's general English model), 16 kHz mono
    in, lower-case words out. A decoder holds state between utterances, so one object
    serves one thread."""

    def __init__(self, language_model: str | Path | None = None) -> None:
        lm = {} if language_model is None else {"lm": str(language_model)}
        self.decoder = Decoder(samprate=SAMPLE_RATE, loglevel="ERROR", **lm)

    def transcribe(self, samples: np.ndarray) -> str:
        """Float samples in [-1, 1] at 16 kHz -> the best hypothesis (possibly '')."""
        pcm = (np.clip(samples, -1.0, 1.0) * 32767).astype("<i2").tobytes()
        self.decoder.start_utt()
        self.decoder.process_raw(pcm, full_utt=True)
        self.decoder.end_utt()
        hypothesis = self.decoder.hyp()
        return " ".join(words(hypothesis.hypstr)) if hypothesis is not None else ""


def words(text: str) -> list[str]:
    """Lower-case words without punctuation: what word error rate compares."""
    return WORD.findall(text.lower())


def word_errors(reference: Sequence[str], hypothesis: Sequence[str]) -> int:
    """Substitutions + deletions + insertions turning `reference` into `hypothesis` (the word
    Levenshtein distance), one row of the table at a time."""
    previous = list(range(len(hypothesis) + 1))
    for i, ref in enumerate(reference, 1):
        current = [i]
        for j, hyp in enumerate(hypothesis, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ref != hyp)))
        previous = current
    return previous[-1]


def word_error_rate(references: Sequence[str], hypotheses: Sequence[str]) -> float:
    """Corpus WER: every clip's word errors over every reference's words (not a mean of
    per-clip rates, which would weigh a 3-word caption like a 20-word one)."""
    if len(references) != len(hypotheses):
        raise ValueError(f"{len(references)} references for {len(hypotheses)} hypotheses")
    pairs = [(words(r), words(h)) for r, h in zip(references, hypotheses)]
    total = sum(len(r) for r, _ in pairs)
    if total == 0:
        raise ValueError("the references hold no words")
    return sum(word_errors(r, h) for r, h in pairs) / total


def transcribe_clips(clips: Sequence[bytes], language_model: Path | None = None) -> list[str]:
    """Each stored clip's bytes (FLAC, MP3...) transcribed by one recognizer, in order."""
    recognizer = Recognizer(language_model)
    return [recognizer.transcribe(decode_16k(clip)) for clip in clips]
