"""Spoken search's baseline: an offline recognizer turns a clip into text, and a text retriever
searches with the text (the route a user would take instead of an end-to-end speech tower).

The recognizer is CMU PocketSphinx (the `pocketsphinx` wheel, BSD-style licence): its
US-English acoustic model, pronunciation dictionary and trigram language model ship inside
the wheel, so it runs without a network and without weights fetched at run time. On the
shared `speech_gtts` clips (a voice none of our models heard) it gets roughly half the words
wrong yet keeps most content words ("dog", "snow", "bench"), which is what a retriever needs.

    recognizer = Recognizer()
    recognizer.transcribe(samples_16k)            # "a man lays on a bench ..."
    word_error_rate(["a dog runs"], ["the dog runs"])   # 1/3
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
from pocketsphinx import Decoder

from conceptual.speech.audio import SAMPLE_RATE, decode_16k

WORD = re.compile(r"[a-z0-9']+")


class Recognizer:
    """One PocketSphinx decoder with the wheel's US-English model, 16 kHz mono in, lower-case
    words out. A decoder holds state between utterances, so one object serves one thread."""

    def __init__(self) -> None:
        self.decoder = Decoder(samprate=SAMPLE_RATE, loglevel="ERROR")

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


def transcribe_clips(clips: Sequence[bytes]) -> list[str]:
    """Each stored clip's bytes (FLAC, MP3...) transcribed by one recognizer, in order."""
    recognizer = Recognizer()
    return [recognizer.transcribe(decode_16k(clip)) for clip in clips]
