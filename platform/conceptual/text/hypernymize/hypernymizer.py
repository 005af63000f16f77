"""The Hypernymizer: parses captions and runs the rules' steps over them, hook by hook
(hooks.py), then words the result and decides whether it is rejected."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from conceptual.records import Rejection
from conceptual.text.hypernymize import hooks, punctuation, sentences
from conceptual.text.hypernymize.config import HypernymConfig
from conceptual.text.hypernymize.edits import END_MARK, Edits
from conceptual.text.hypernymize.knowledge import Knowledge
from conceptual.text.hypernymize.names import Name, find_names, replace_by_hypernym
from conceptual.text.hypernymize.registry import running
from conceptual.text.hypernymize.tokens import CASE_RESTORED

if TYPE_CHECKING:
    from spacy.tokens import Doc

# Code points that are no characters: surrogates outside a pair.
LONE_SURROGATE = re.compile("[\ud800-\udfff]")
# The most of a text `parse` reads (spaCy's max_length is 1,000,000): 20 times the longest
# alt-text the filters let through (TextFilterConfig.max_chars); the caption is its first
# sentence.
MAX_PARSE_CHARS = 10_000
# The components that find what the rules read beyond the syntax (lemmas, entities): nearly
# half a parse, which a caption the syntax filters reject never needs (`parse`'s `keep`).
NAME_PIPES = ("lemmatizer", "ner")


@dataclass
class Transformed:
    """One caption's result. `caption`: lowercase and tokenized, None when rejected.
    `entities`: what was removed or replaced, {"text", "label", "action": "removed" |
    "replaced", "replacement", "source": "wordnet" | "gazetteer" | "entity_type" | "rule"}.
    `types`: the sorted concepts the caption mentions (its nouns' lemmas and the
    replacements), for the entity-type frequency rule. `rejection`: why it was rejected,
    else None."""

    caption: str | None
    entities: list[dict] = field(default_factory=list)
    types: list[str] = field(default_factory=list)
    rejection: Rejection | None = None


class Hypernymizer:
    """Applies the rules that are on to parsed captions. Heavy loads happen once, here."""

    def __init__(self, config: HypernymConfig | None = None, nlp=None):
        from conceptual import assets

        self.config = config or HypernymConfig()
        self.nlp = nlp if nlp is not None else assets.load_spacy(self.config.spacy_pipeline)
        stop_words = frozenset(self.nlp.Defaults.stop_words)
        self.knowledge = Knowledge(
            self.config, assets.wordnet(self.config.wordnet_path), stop_words
        )
        self.lexicon = self.knowledge.lexicon
        off = self.config.disabled_rules
        for load in running(hooks.KNOWLEDGE, off):
            load(self.knowledge)
        self.caption_start = running(hooks.CAPTION_START, off)
        self.sentence_breaks = running(hooks.SENTENCE_BREAKS, off)
        self.before_names = running(hooks.BEFORE_NAMES, off)
        self.name_steps = running(hooks.NAMES, off)
        self.after_names = running(hooks.AFTER_NAMES, off)
        self.output = running(hooks.OUTPUT, off)
        self._names = [name for name in NAME_PIPES if name in self.nlp.pipe_names]

    def transform(self, texts: Sequence[str]) -> list[Transformed]:
        return [self.transform_doc(doc) for doc in self.parse(texts)]

    def parse(self, texts: Sequence[str], keep: Callable[[Doc], bool] | None = None) -> list:
        """spaCy docs of the texts, batched, caseless ones with capitals restored first
        (`restore_case`), each cut to its first sentence without its dateline
        (`first_sentence`, `datelines`): the docs `transform_doc` expects, for a caller who
        also reads them.

        Each text is parsed in two passes: its syntax (tags, dependencies), then its names
        (NAME_PIPES), which the caption's bounds read only where a dateline can be
        (`sentences.bounds_read_entities`). `keep`, given, tests a caption's syntax (the
        syntax filters): a doc it fails comes back without the second pass.

        What spaCy cannot take is made parseable first (`parseable`): lone surrogates, which
        UTF-8 cannot encode (JSON can escape them), and text past `MAX_PARSE_CHARS`, cut at
        a space: spaCy refuses texts past its `max_length` and wants a gigabyte of memory
        per 100,000 characters, and the caption is the first sentence."""
        texts = [parseable(text) for text in texts]
        cased = [self.restore_case(t) for t in texts] if self.config.restore_case else texts
        docs = list(self.nlp.pipe(cased, batch_size=self.config.batch_size, disable=self._names))
        early = [i for i, doc in enumerate(docs) if sentences.bounds_read_entities(doc)]
        self._name([docs[i] for i in early])
        cuts = {i: cut for i, doc in enumerate(docs) if (cut := self._caption_bounds(doc))}
        # the captions' sentences parsed again alone (both passes), so the rules see their
        # own parse
        captions = [docs[i][start:end].text for i, (start, end, _) in cuts.items()]
        for (i, (_, _, mark)), doc in zip(cuts.items(), self.nlp.pipe(captions)):
            doc.user_data[END_MARK] = mark
            docs[i] = doc
        named = {*early, *cuts}
        self._name([d for i, d in enumerate(docs) if i not in named and (not keep or keep(d))])
        for text, source, doc in zip(texts, cased, docs):
            if source != text:
                doc.user_data[CASE_RESTORED] = True  # its capitals are guesses, not evidence
        return docs

    def _name(self, docs: list) -> None:
        """The second pass of `parse` over docs parsed without it."""
        for name in self._names:
            docs = list(self.nlp.get_pipe(name).pipe(docs, batch_size=self.config.batch_size))

    def _caption_bounds(self, doc) -> tuple[int, int, str | None] | None:
        """(start, end, mark): the tokens of the caption's sentence and the mark it then ends
        with, when that is not the whole doc."""
        start = max((step(doc, self.knowledge) for step in self.caption_start), default=0)
        cut = None
        if self.sentence_breaks:
            cut = sentences.second_sentence(doc, start, self.sentence_breaks, self.knowledge)
        if not start and cut is None:
            return None
        end, mark = cut or (len(doc), None)
        return start, end, mark

    def restore_case(self, text: str) -> str:
        """A caseless text with likely names capitalized, so spaCy can see them: names
        WordNet spells with capitals ("new york" -> "New York", "christmas"), a given name
        and a surname ("drew barrymore", not two common words as "will power"), places of
        the gazetteer, and unknown words rarer than `name_max_zipf` ("dacosta"), but not
        derivations of common words ("biker"). Any text with a capital letter stays as it
        is: its capitals are evidence."""
        if text != text.lower():
            return text
        words = text.split(" ")
        out = []
        while words:
            for size in (3, 2, 1):
                spelling = self._cased(words[:size])
                if spelling:
                    out.extend(spelling)
                    del words[:size]
                    break
            else:
                out.append(words.pop(0))
        return " ".join(out)

    def _cased(self, words: list[str]) -> list[str] | None:
        """The words as WordNet capitalizes them, or capitalized as an unknown rare word;
        None when they are not a name."""
        know = self.knowledge
        if not all(word.isalpha() for word in words) or words[0] in know.stop_words:
            return None
        kind, spelling = know.lexicon.word_kind("_".join(words))
        if kind in ("name", "capitalized"):
            return spelling.split("_")
        if len(words) == 2 and know.is_full_name(*words):
            return [word.capitalize() for word in words]
        if know.place_kind(" ".join(words)):
            return [word.capitalize() for word in words]
        if len(words) == 1 and kind == "unknown":
            if know.lexicon.zipf(words[0]) < self.config.name_max_zipf:
                return [words[0].capitalize()]
        return None

    def place_kind(self, name: str) -> str | None:
        """The gazetteer's kind of a place name ("country", "state", "city"), None for
        names it lacks and for common words that name towns too ("bath", "reading")."""
        return self.knowledge.place_kind(name)

    def artifacts(self, caption: str) -> list[str]:
        """What removals can leave dangling in a caption (`punctuation.artifacts`)."""
        return punctuation.artifacts(caption, self.knowledge)

    def transform_doc(self, doc) -> Transformed:
        """The rules applied to a doc parsed by `self.nlp` (by `parse` for caseless texts):
        the passes before the names, each name to the first step that takes it (else its
        hypernym), the passes after the names."""
        know, edits = self.knowledge, Edits(doc)
        for step in self.before_names:
            step(doc, edits, know)
        for span, label in find_names(doc, know):
            if edits.touches(span):
                continue
            name = Name(span, label)
            if not any(take(name, edits, know) for take in self.name_steps):
                replace_by_hypernym(name, edits, know)
        for step in self.after_names:
            step(doc, edits, know)
        return self._finish(edits)

    def styled(self, doc) -> str:
        """The doc's words in the captions' style (lowercase tokens, tidied punctuation),
        nothing replaced or removed: the alt-text as a caption, beside the transformed one."""
        return " ".join(Edits(doc).words(self.output))

    def _finish(self, edits) -> Transformed:
        words = edits.words(self.output)
        word_count = sum(1 for w in words if any(c.isalnum() for c in w))
        types = edits.types(self.knowledge.lemma)
        rejection = None
        if edits.unresolved and self.config.reject_unresolved:
            rejection = Rejection("unresolved_entity", ", ".join(edits.unresolved))
        elif word_count < self.config.min_tokens:
            rejection = Rejection("too_short", f"{word_count} words left: {' '.join(words)!r}")
        elif not types:
            rejection = Rejection("no_noun_left", " ".join(words))
        caption = None if rejection else " ".join(words)
        return Transformed(caption, edits.entities, types, rejection)


def parseable(text: str, max_chars: int = MAX_PARSE_CHARS) -> str:
    """The text as spaCy can parse it: lone surrogates (no character; UTF-8 cannot encode
    them) replaced as a decoder replaces bytes it cannot read, and cut to at most
    `max_chars` characters, at the last space before them if there is one."""
    text = LONE_SURROGATE.sub("\ufffd", text)
    if len(text) <= max_chars:
        return text
    cut = text.rfind(" ", 0, max_chars + 1)
    return text[: cut if cut > 0 else max_chars]
