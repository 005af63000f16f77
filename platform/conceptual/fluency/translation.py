"""English -> Chinese translation behind one small interface, and an offline translator that
looks sentences up in Flickr8k-CN's provided machine translations.

    translator = ProvidedTranslations(cn_dir, source="baidu", nearest=True)
    translator.translate(["a dog runs through the grass"])   # ["一只狗跑过草地。"]

The "late translation" baseline of the fluency spec captions in English, then translates the
caption. No translation service is reachable here, but Flickr8k-CN holds Baidu's and Google's
translations of all 40,460 English captions, so a generated caption that repeats a training
caption has its real translation. `nearest=True` answers every other caption with the
translation of the most similar English caption: TF-IDF cosine over word tokens (idf
smoothed as log((1 + N) / (1 + df)) + 1, raw term counts; among equals the earliest in the
file). That is a retrieval stand-in for a translator, and a report of the baseline must say so.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

import numpy as np

from conceptual.fluency.flickr8k_cn import ENGLISH, SOURCES, read_lines
from conceptual.services import ServiceDown, request
from conceptual.uris import redact, redact_text

WORD = re.compile(r"\w+|[^\w\s]")
QUOTES = {'"', "`"}


@runtime_checkable
class Translator(Protocol):
    def translate(self, sentences: list[str]) -> list[str | None]:
        """The translation of each sentence, in order; None where there is none."""
        ...


def english_key(sentence: str) -> str:
    """What lookups compare: lowercase words and punctuation split apart by single spaces,
    double quotes and a final full stop dropped, so that the file's "A dog 's toy ." and a
    caption's "a dog's toy" meet."""
    words = [w for w in WORD.findall(sentence.lower()) if w not in QUOTES]
    if words and words[-1] == ".":
        words.pop()
    return " ".join(words)


class ProvidedTranslations:
    """Translation by lookup in Flickr8k-CN's `flickr8kenc.caption.txt` (English) and the
    source's file (flickr8kzhb: Baidu, flickr8kzhg: Google), paired by IMAGE and N. An English
    sentence written the same way for several photos may have been translated differently; the
    most frequent translation wins (among equals, the first in the file). Translations come as
    the file has them; conceptual.text.chinese normalizes and segments them."""

    def __init__(
        self,
        cn_dir: Path | str,
        source: Literal["baidu", "google"] = "baidu",
        nearest: bool = False,
        min_similarity: float = 0.0,
    ):
        if source not in ("baidu", "google"):
            raise ValueError(
                f"source must be baidu or google (machine translations), not {source!r}"
            )
        cn_dir = Path(cn_dir)
        english = {
            (line.image, line.n): line.text
            for line in read_lines(cn_dir / ENGLISH[0], ENGLISH[1])
            if not line.problem
        }
        file_name, tag = SOURCES[source]
        seen: dict[str, Counter] = defaultdict(Counter)  # English key -> translations, counted
        for line in read_lines(cn_dir / file_name, tag):
            original = english.get((line.image, line.n))
            if not line.problem and original is not None and line.text.strip():
                seen[english_key(original)][line.text.strip()] += 1
        # Counter.most_common keeps first-seen order among equal counts.
        self.translations = {key: counts.most_common(1)[0][0] for key, counts in seen.items()}
        self.nearest, self.min_similarity = nearest, min_similarity
        self._index: _TfIdf | None = None

    def translate(self, sentences: list[str]) -> list[str | None]:
        keys = [english_key(sentence) for sentence in sentences]
        found = [self.translations.get(key) for key in keys]
        if self.nearest:
            for i, key in enumerate(keys):
                if found[i] is None and (match := self.most_similar(key)) is not None:
                    found[i] = self.translations[match[0]]
        return found

    def most_similar(self, sentence: str) -> tuple[str, float] | None:
        """(the English key most similar to the sentence, cosine), or None when no key shares
        a word with it or the best is below `min_similarity`."""
        if self._index is None:  # built on the first miss: exact lookups never pay for it
            self._index = _TfIdf(list(self.translations))
        best = self._index.best(english_key(sentence))
        return best if best is not None and best[1] >= self.min_similarity else None


class _TfIdf:
    """Cosine similarity of TF-IDF vectors, by an inverted index: a query touches only the
    documents that share one of its words, a numpy array of them per word."""

    def __init__(self, documents: list[str]):
        self.documents = documents
        counts = [Counter(doc.split()) for doc in documents]
        df = Counter(word for doc in counts for word in doc)
        n = len(documents)
        self.idf = {word: math.log((1 + n) / (1 + d)) + 1 for word, d in df.items()}
        self.unseen_idf = math.log(1 + n) + 1  # df = 0
        postings: dict[str, list[tuple[int, float]]] = defaultdict(list)
        norms = np.zeros(n)
        for i, doc in enumerate(counts):
            for word, tf in doc.items():
                weight = tf * self.idf[word]
                postings[word].append((i, weight))
                norms[i] += weight * weight
        norms = np.sqrt(norms)
        self.postings = {}  # word -> (its documents, their unit-length weights of it)
        for word, entries in postings.items():
            ids = np.array([i for i, _ in entries], dtype=np.int64)
            self.postings[word] = (ids, np.array([w for _, w in entries]) / norms[ids])

    def best(self, query: str) -> tuple[str, float] | None:
        # A word no document has matches nothing, but it counts in the query's norm.
        weights = {
            word: tf * self.idf.get(word, self.unseen_idf)
            for word, tf in Counter(query.split()).items()
        }
        norm = math.sqrt(sum(weight * weight for weight in weights.values()))
        shared = [(word, weight) for word, weight in weights.items() if word in self.postings]
        if not shared:
            return None
        scores = np.zeros(len(self.documents))
        for word, weight in shared:
            ids, doc_weights = self.postings[word]
            scores[ids] += weight * doc_weights  # a word's documents are distinct: no add.at
        best = int(np.argmax(scores))  # the first of equal scores
        return self.documents[best], min(1.0, float(scores[best] / norm))  # rounding


class ServiceTranslator:
    """Translation by a LibreTranslate-compatible HTTP service (POST URL/translate with
    `q` a list of sentences, `source`, `target`, `api_key`; `translatedText` the list back),
    the key read from an environment variable so that it never lands in a config or a log.

    It is checked as it is built: one word translated within CHECK_S, so that a service
    that is down, or does not take the key, fails the job before any work. A batch's whole
    request (connect, answer, body) has `timeout_s`; a batch that did not get its answer
    then raises ServiceDown, which fails the job rather than being tried again row by row
    (a 256-row batch against a service that hangs took two hours that way)."""

    CHECK_S = 10.0
    ANSWER_BYTES = 1 << 16  # at most, per sentence (and one more: an empty batch's answer)

    def __init__(self, url: str, key: str, target: str, timeout_s: float):
        self.url, self.key, self.target, self.timeout_s = url.rstrip("/"), key, target, timeout_s
        self.call(["a dog"], min(self.CHECK_S, timeout_s))

    def translate(self, sentences: list[str]) -> list[str | None]:
        translated = self.call(sentences, self.timeout_s)
        if len(translated) != len(sentences):
            raise ValueError(f"{len(translated)} translations of {len(sentences)} sentences")
        return [t or None for t in translated]

    def call(self, sentences: list[str], total_s: float) -> list:
        """The service's `translatedText` for `sentences`, within `total_s`."""
        body = {"q": sentences, "source": "en", "target": self.target, "format": "text"}
        data = json.dumps({**body, "api_key": self.key}).encode()
        headers = {"Content-Type": "application/json"}
        most = self.ANSWER_BYTES * (len(sentences) + 1)
        try:
            status, answer = request(f"{self.url}/translate", total_s, most, data, headers)
        except ServiceDown as exc:
            raise ServiceDown(
                f"the translation service {redact(self.url)} did not answer within "
                f"{total_s:g} s ({exc}): start it, or point service.url at one that answers"
            ) from exc
        if status != 200:  # a refused key, or a sentence the service fails on: not down
            said = redact_text(answer[:200].decode("utf-8", "replace"))
            raise ValueError(
                f"the translation service {redact(self.url)} answered {status}: {said}"
            )
        return json.loads(answer)["translatedText"]
