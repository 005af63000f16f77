"""What the rules decide for one caption (`Edits`), and the caption's words they leave:
lowercase spaCy tokens joined by single spaces, punctuation as separate tokens ("author :
a life in photography"), in the released dataset's style. An indefinite article agrees
with the word after it, as the released captions write it ("a old table" -> "an old
table"); conjunctions and commas left dangling by removals go (the `punctuation` rule
tidies the rest)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from conceptual.text.hypernymize.tokens import MARKS, NOUN_MODIFIER_DEPS

# Doc.user_data key: the mark that ends a caption cut at a sentence boundary no mark showed.
END_MARK = "conceptual.end_mark"
# Words spelled with a vowel but said with a consonant ("a university", "a one-off").
CONSONANT_SOUNDING = ("one", "once", "eu", "uni", "use", "usu", "ura", "ure", "uro", "uti", "uk")


def indefinite_article(word: str, article: str) -> str:
    """The indefinite article the next word takes, as the released captions write it ("a
    aquarium" -> "an aquarium"; "a university"): "an" before a vowel, "a" before a
    consonant, and the text's own choice before "h" and "u" words ("an hour", "a unicorn"),
    which spelling does not settle."""
    if word.startswith(CONSONANT_SOUNDING) or word in ("u", "us"):
        return "a"
    if word[0] in "aeio" or word.startswith(("un", "up", "ug", "um", "ul")):
        return "an"
    return article if word[0] in "hu" else "a"


def is_joiner(token) -> bool:
    """A comma-like punctuation mark or a coordinating conjunction (None: a replacement)."""
    if token is None or token.is_quote or token.is_bracket:
        return False
    return token.is_punct or token.dep_ == "cc"


class Edits:
    """What the rules decided for one doc: the tokens dropped, the words put in place of
    others, the concepts of replaced names, and the record of what was removed or replaced."""

    def __init__(self, doc):
        self.doc = doc
        self.dropped: set[int] = set()
        self.words_at: dict[int, str] = {}  # token index -> the word standing in its place
        self.spans: dict[int, range] = {}  # root index of a replaced name -> its tokens
        self.concepts: dict[int, str] = {}  # root index -> the concept that replaced it
        self.entities: list[dict] = []
        self.unresolved: list[str] = []
        self.replaced_by: dict[int, int] = {}  # token index -> start of the replaced name
        self.records: dict[int, dict] = {}  # root index of a replaced name -> its record
        self.merged: set[int] = set()  # heads pluralized by a merged coordination

    def touches(self, span) -> bool:
        return any(i in self.dropped or i in self.words_at for i in range(span.start, span.end))

    def remove(self, tokens, label: str | None = None, text: str | None = None):
        """Drop tokens; with a label and text, record them as a removed entity."""
        self.dropped.update(t.i for t in tokens)
        if label and text:
            self.entities.append(
                {
                    "text": text,
                    "label": label,
                    "action": "removed",
                    "replacement": None,
                    "source": "rule",
                }
            )

    def replace(self, span, word: str, concept: str, label: str, source: str):
        """Put `word` in place of the span; it stands for `concept` (its singular)."""
        self.dropped.update(range(span.start + 1, span.end))
        self.words_at[span.start] = word
        self.replaced_by.update(dict.fromkeys(range(span.start, span.end), span.start))
        self.spans[span.root.i] = range(span.start, span.end)
        self.concepts[span.root.i] = concept
        self.records[span.root.i] = {
            "text": span.text,
            "label": label,
            "action": "replaced",
            "replacement": word,
            "source": source,
        }
        self.entities.append(self.records[span.root.i])

    def unreplace(self, root: int):
        """Remove a replaced name after all (its record says so)."""
        self.dropped.update(self.spans[root])
        self.concepts.pop(root)
        self.records[root].update(action="removed", replacement=None, source="rule")

    def stand_in(self, span, title):
        """The title stays for the removed name: "of" in "portrait of singer Terri Nunn"
        keeps its object."""
        self.replaced_by.update(dict.fromkeys(range(span.start, span.end), title.i))

    def gone(self, token) -> bool:
        """Whether a token left the caption, not replaced with the name it belongs to."""
        start = self.replaced_by.get(token.i)
        return token.i in self.dropped and (start is None or start in self.dropped)

    def concept(self, token) -> str | None:
        """The concept a token now stands for: a name's replacement, or a kept noun's lemma."""
        if token.i in self.concepts:
            return self.concepts[token.i]
        if token.pos_ == "NOUN" and token.i not in self.dropped and token.i not in self.words_at:
            return token.lemma_.lower()
        return None

    def is_bare(self, token) -> bool:
        """Whether no modifier of the token is left but articles and determiners."""
        span = self.span_of(token)
        return not any(
            c.i not in self.dropped and c.i not in span and c.dep_ in NOUN_MODIFIER_DEPS
            for i in span
            for c in self.doc[i].children
        )

    def span_of(self, token) -> range:
        return self.spans.get(token.i, range(token.i, token.i + 1))

    def pluralize(self, token, plural: str):
        self.merged.add(token.i)
        self.concepts.setdefault(token.i, token.lemma_.lower())
        self.words_at[self.span_of(token)[0]] = plural

    def words(self, tidying: Iterable[Callable[[list], list]] = ()) -> list[str]:
        """The output tokens, lowercase. Where tokens were removed, an article before the
        next word agrees with it, and punctuation or conjunctions left dangling go: doubled
        ("the singer, , on stage" -> "the singer on stage") or at either end. Then the
        OUTPUT hook's steps tidy the (word, token) pairs (`punctuation`: no mark is left
        dangling anywhere)."""
        out: list[tuple[str, object]] = []  # (word, its token; None for a replacement)
        removed_before = False  # tokens were removed since the last word kept
        for token in self.doc:
            if token.i in self.dropped or token.is_space:
                removed_before = True
                continue
            replaced = token.i in self.words_at
            word = self.words_at.get(token.i, token.lower_)
            if removed_before and token.text == "-" and not token.whitespace_:
                continue  # the hyphen of a removed name's compound ("Gucci-style")
            if out and out[-1][0] in ("a", "an") and word.isalpha():
                out[-1] = (indefinite_article(word, out[-1][0]), out[-1][1])
            if removed_before and is_joiner(token) and (not out or is_joiner(out[-1][1])):
                if out and word == out[-1][0] == ",":
                    out.pop()  # the commas around a removed apposition
                elif out and word in ".!?" and out[-1][0] in MARKS:
                    out[-1] = (word, token)  # the sentence still ends: ", on May 15." -> "."
                continue
            out.append((word, None if replaced else token))
            removed_before = False
        if removed_before:  # the caption's end was removed
            while out and is_joiner(out[-1][1]) and out[-1][0] not in ".!?":
                out.pop()
        for tidy in tidying:
            out = tidy(out)
        # the caption's last mark, when the cut to its first sentence took its own
        if (mark := self.doc.user_data.get(END_MARK)) and out and out[-1][0] not in MARKS:
            out.append((mark, None))
        return [word for word, _ in out]

    def types(self, lemma) -> list[str]:
        """The concepts the caption mentions: the lemmas of its kept nouns (by `lemma`) and
        the concepts that replaced names."""
        found = set()
        for token in self.doc:
            if token.i in self.concepts and self.span_of(token)[0] not in self.dropped:
                found.add(self.concepts[token.i])
            elif token.i in self.dropped or token.i in self.words_at:
                continue
            elif token.pos_ in ("NOUN", "PROPN") and token.is_alpha:
                found.add(lemma(token))
        return sorted(found)
