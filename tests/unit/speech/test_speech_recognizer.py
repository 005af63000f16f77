"""The offline recognizer (spoken search's baseline) on a real recorded clip, and the word error
rate it is scored by."""

from __future__ import annotations

import csv

import pytest

from conceptual.speech.audio import decode_16k
from conceptual.speech.recognizer import Recognizer, word_error_rate, word_errors, words


def test_word_errors_count_substitutions_deletions_and_insertions():
    assert word_errors([], []) == 0
    assert word_errors(["a", "dog"], []) == 2
    assert word_errors([], ["a"]) == 1
    assert word_errors(["a", "dog", "runs"], ["the", "dog", "runs", "fast"]) == 2
    assert word_errors(["a", "b", "c"], ["b", "c"]) == 1


def test_word_error_rate_is_over_the_corpus_words_ignoring_case_and_punctuation():
    assert words("A dog's ball, red.") == ["a", "dog's", "ball", "red"]
    # 1 error of 3 words and 0 of 1: 1/4 over the corpus (a per-clip mean would say 1/6).
    assert word_error_rate(["A dog runs .", "Snow"], ["the dog runs", "snow"]) == 0.25
    with pytest.raises(ValueError, match="no words"):
        word_error_rate(["."], ["a"])
    with pytest.raises(ValueError, match="references for"):
        word_error_rate(["a"], [])


@pytest.mark.realdata
def test_a_recorded_clip_is_transcribed_with_most_of_its_words(real_data):
    """speech_gtts/1000268201_693b08cb0e.mp3 speaks 'A child in a pink dress is climbing up a
    set of stairs in an entry way .' in a voice no part of the project made."""
    folder = real_data / "flickr8k_mini"
    image = "1000268201_693b08cb0e.jpg"
    caption = next(r["caption"] for r in csv.DictReader(open(folder / "captions.csv")))
    samples = decode_16k((folder / "speech_gtts" / f"{image[:-4]}.mp3").read_bytes())
    recognizer = Recognizer()
    heard = recognizer.transcribe(samples)
    assert {"pink", "stairs"} <= set(words(heard))
    assert word_error_rate([caption], [heard]) < 0.6
    assert recognizer.transcribe(samples) == heard  # no state carried between utterances
