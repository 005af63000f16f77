"""The caption language model the recognizer hears spoken queries with: a proper trigram
model (each context's probabilities sum to one), in a file PocketSphinx reads, and one that
hears a voice it never heard better than the general English model does."""

from __future__ import annotations

import csv
import math
from collections import defaultdict

import pytest

from conceptual.config import load
from conceptual.pipelines.families.retriever.evaluate_retriever import RetrieverEvalConfig
from conceptual.speech.audio import decode_16k
from conceptual.speech.language_model import BEGIN, END, UNKNOWN, arpa
from conceptual.speech.recognizer import Recognizer, word_error_rate, words

SENTENCES = [s.split() for s in (
    "a dog runs on the grass", "a dog sleeps on the sofa", "a cat sleeps on the sofa",
    "two dogs run on the beach", "a man rides a bike on the road", "a dog runs",
)]  # fmt: skip


def parse(text: str) -> tuple[dict, dict]:
    """(log10 probabilities, log10 back-off weights) by n-gram, from ARPA text."""
    probs, backoffs = {}, {}
    for line in text.splitlines():
        fields = line.split("\t")
        if len(fields) >= 2:
            gram = tuple(fields[1].split())
            probs[gram] = float(fields[0])
            if len(fields) == 3:
                backoffs[gram] = float(fields[2])
    return probs, backoffs


def probability(gram: tuple[str, ...], probs: dict, backoffs: dict) -> float:
    if gram in probs:
        return 10 ** probs[gram]
    if len(gram) == 1:
        return 10 ** probs[(UNKNOWN,)]
    return 10 ** backoffs.get(gram[:-1], 0.0) * probability(gram[1:], probs, backoffs)


def test_every_context_distributes_all_its_probability():
    text = arpa(SENTENCES)
    assert text.startswith("\\data\\\nngram 1=") and text.rstrip().endswith("\\end\\")
    probs, backoffs = parse(text)
    vocabulary = [g[0] for g in probs if len(g) == 1 and g[0] != BEGIN]
    assert END in vocabulary and UNKNOWN in vocabulary
    contexts = {(), (BEGIN,), ("a",), ("a", "dog"), ("on", "the"), ("the", "zebra")}
    for context in contexts:
        total = sum(probability((*context, w), probs, backoffs) for w in vocabulary)
        assert math.isclose(total, 1.0, rel_tol=1e-6), (context, total)
    # Seen continuations are likelier than unseen ones.
    assert probability(("a", "dog", "runs"), probs, backoffs) > probability(
        ("a", "dog", "sofa"), probs, backoffs
    )


def test_an_empty_corpus_is_refused():
    with pytest.raises(ValueError, match="at least one word"):
        arpa([[], []])


def test_asr_true_still_reads_as_enabled_with_the_caption_model():
    config = load(RetrieverEvalConfig, None, ["asr=true"])
    assert config.asr.enabled and config.asr.lm == "captions"
    general = load(RetrieverEvalConfig, None, ["asr.enabled=true", "asr.lm=general"])
    assert general.asr.language_model(None) is None


@pytest.mark.realdata
def test_the_caption_model_hears_an_unseen_voice_better_than_the_general_one(real_data, tmp_path):
    """gTTS clips (a voice no part of the project made) of 12 photos, heard with a model of
    the other photos' captions: fewer word errors than PocketSphinx's general English model
    (on 60 photos, 0.26 against 0.55; BENCHMARKS.md)."""
    folder = real_data / "flickr8k_mini"
    captions = defaultdict(list)
    for row in csv.DictReader(open(folder / "captions.csv", encoding="utf-8")):
        captions[row["image"]].append(row["caption"])
    names = sorted(captions)
    heard, built_from = names[:12], names[100:]
    model = tmp_path / "captions.arpa"
    model.write_text(arpa(words(c) for n in built_from for c in captions[n]))
    clips = [decode_16k((folder / "speech_gtts" / f"{n[:-4]}.mp3").read_bytes()) for n in heard]
    references = [captions[n][0] for n in heard]
    rates = {}
    for name, recognizer in (("general", Recognizer()), ("captions", Recognizer(model))):
        rates[name] = word_error_rate(references, [recognizer.transcribe(c) for c in clips])
    assert rates["captions"] < 0.8 * rates["general"], rates
