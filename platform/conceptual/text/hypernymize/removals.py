"""Rules that remove what no image shows, each a pass over the doc (doc, Edits, Knowledge):

- `asides`: what is in brackets goes with them, as no released caption keeps any: "Actor
  Michael Shannon (L) and his wife" -> "actor and his wife", "a bowl of pho (Vietnamese
  noodle soup)" -> "a bowl of pho" [ASIDE]; so does a bracket nothing closes.
- `dates`: dates and times holding a cardinal number go ("on July 4, 2015", "in 1976")
  [DATE, TIME], with their preposition when they were its only object; "a summer day",
  "the 18th century" and "Saturday" are things an image can show and stay.
- `work_titles`: a showing's title goes with its "of" ("the premiere of Night Falls on
  Manhattan at the theatre" -> "the premiere at the theatre") [WORK_OF_ART]: caseless text
  gives no capitals or quotes to find the title by, and its words may all be common. It
  runs to a mark, a preposition or the end; an article with common words is a description
  ("the premiere of the film" stays).
- `numbers`: numbers and units modifying nouns go: counts, "two sculptures" ->
  "sculptures", "a dozen roses" -> "roses" [CARDINAL]; measures, "a 2 litre bottle" -> "a
  bottle" [QUANTITY, MONEY, PERCENT]. It runs after the names are resolved: a name's
  numbers are the name's ("the 2016 Glastonbury Festival").
"""

from __future__ import annotations

from collections.abc import Iterator

from conceptual.text.hypernymize.registry import Rule
from conceptual.text.hypernymize.tokens import (
    BRACKETS,
    MEASURE_LABELS,
    MODIFIER_DEPS,
    NOUN_MODIFIER_DEPS,
    OPENING_BRACKETS,
    TIME_LABELS,
    span_with_dets,
)

ASIDES = Rule(
    "asides",
    "removes what is in brackets, and brackets nothing closes",
    example=("A bowl of pho (noodle soup) on a table.", "a bowl of pho on a table ."),
    labels=("ASIDE",),
)
DATES = Rule(
    "dates",
    "removes dates and times holding a number, and a preposition they leave without object",
    example=("Fireworks over the city on July 4, 2015", "fireworks over the city"),
    labels=("DATE", "TIME"),
)
WORK_TITLES = Rule(
    "work_titles",
    'removes the title after a premiere\'s or screening\'s "of", with the "of"',
    example=(
        "the actor attends the premiere of night falls on manhattan at the theatre",
        "the actor attends the premiere at the theatre",
    ),
    labels=("WORK_OF_ART",),
)
NUMBERS = Rule(
    "numbers",
    "removes counts, measures and their units modifying nouns",
    example=("Two sculptures in a park", "sculptures in a park"),
    labels=("CARDINAL", "QUANTITY", "MONEY", "PERCENT"),
)

# Brackets are single characters: a text without one has no bracket token.
BRACKET_MARKS = frozenset({*BRACKETS, *OPENING_BRACKETS})
# Showings of a work, whose "of" takes the work's title ("the premiere of Speed Racer"),
# and the words that end a title left unmarked in caseless text.
SHOWINGS = frozenset({"premiere", "screening"})
TITLE_ENDS = frozenset({"at", "in", "during", "on", "for", "with", "near", "held", "and"})


@ASIDES.step
def remove_asides(doc, edits, know):
    if BRACKET_MARKS.isdisjoint(doc.text):
        return  # most captions: no Token object is made (each costs more than this test)
    for aside in bracketed(doc):
        edits.remove(aside, "ASIDE", aside.text)
    # and a bracket nothing closes or opened ("a barn (built in 1890")
    edits.remove([t for t in doc if t.text in BRACKET_MARKS])


def bracketed(doc) -> Iterator:
    """The spans in brackets, brackets included, outermost only; an unclosed bracket
    opens none."""
    depth = start = 0
    for token in doc:
        if depth == 0 and token.text in BRACKETS:
            start, opener, depth = token.i, token.text, 1
        elif depth and token.text == opener:
            depth += 1
        elif depth and token.text == BRACKETS[opener]:
            depth -= 1
            if depth == 0:
                yield doc[start : token.i + 1]


@DATES.step
def remove_dates(doc, edits, know):
    for span in doc.ents:
        if span.label_ in TIME_LABELS and any(t.pos_ == "NUM" or t.is_digit for t in span):
            edits.remove(span_with_dets(span), span.label_, span.text)
            prep = span.root.head
            if span.root.dep_ == "pobj" and [c.dep_ for c in prep.children] == ["pobj"]:
                edits.remove([prep])


@WORK_TITLES.step
def remove_work_titles(doc, edits, know):
    """The title after a showing's "of" goes with it ("the premiere of Speed Racer at" ->
    "the premiere at"): a title is a name whatever its words, and caseless text gives
    neither capitals nor quotes to find it by. It runs to a punctuation mark, a preposition
    or the end; an article and common lowercase words are a description, not a title ("the
    premiere of the film")."""
    for of in doc[1:]:
        if of.lower_ != "of" or doc[of.i - 1].lemma_.lower() not in SHOWINGS:
            continue
        end = of.i + 1
        while end < len(doc) and not doc[end].is_punct:
            if end > of.i + 1 and doc[end].lower_ in TITLE_ENDS:
                break
            end += 1
        title = doc[of.i + 1 : end]
        if not len(title) or edits.touches(title):
            continue
        described = title[0].pos_ in ("DET", "PRON") and all(
            t.is_lower and (t.pos_ in ("DET", "PRON", "ADJ") or know.is_common(t)) for t in title
        )
        if not described:
            edits.remove([of, *title], "WORK_OF_ART", title.text)


@NUMBERS.step
def remove_numbers(doc, edits, know):
    """Numbers and units modifying nouns: measures ("a 2 litre bottle", QUANTITY, MONEY,
    PERCENT spans; "a 15 m circle") and counts ("two sculptures", "a dozen roses")."""
    for span in doc.ents:
        head = span.root.head
        is_modifier = span.root.dep_ in NOUN_MODIFIER_DEPS and head.i >= span.end
        if span.label_ in MEASURE_LABELS and is_modifier and head.pos_ == "NOUN":
            edits.remove(span, span.label_, span.text)
    for token in doc:
        is_count = token.dep_ == "nummod" and (token.like_num or token.ent_type_ == "CARDINAL")
        replaced = token.i in edits.dropped or token.i in edits.words_at
        if not is_count or replaced or token.ent_type_ in TIME_LABELS:
            continue  # not "almost no yellow", "a few paces", nor a replaced name
        removed = list(token.subtree)
        unit = token.head  # "a 15 m circle": the number measures a unit modifying a noun
        if unit.dep_ in MODIFIER_DEPS and know.lexicon.is_unit(unit.lemma_.lower()):
            removed.append(unit)
        edits.remove(removed, "CARDINAL", " ".join(t.text for t in removed))
