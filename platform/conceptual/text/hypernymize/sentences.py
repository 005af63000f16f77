"""Where the caption starts and ends in the alt-text, decided on the first parse; the
caption's sentence is then parsed again alone, so the other rules see its own parse.

- `first_sentence`: the caption is the alt-text's first sentence, as in the released
  captions (14 of the 11,520 released validation captions hold a mark inside): "Old tyres
  in an empty field. The end of the road for tires." -> "old tyres in an empty field .". A
  stock-photo description's tags open a second sentence even where no mark shows it
  (slugs lost theirs): "vector", "illustration", "eps", "concept" or "photo by" after a
  description of at least `min_tokens` words ("a barn in the snow vector illustration" ->
  "a barn in the snow ."; "vector illustration of a barn" stays), and so do words that go
  on after "on a white background" with no preposition or conjunction ("a black cat on a
  black background winks").
- `datelines`: a news photo's dateline goes: "LOS ANGELES, CA - JANUARY 10: Actress ..."
  (a date before a colon early in the text), or a slug's places around a date ("march 10
  2012 las vegas nevada us the big crowd ..." -> "the big crowd ..."; places are entities,
  the gazetteer's, WordNet's, and state and country codes). A date that follows a clause
  with a verb, with no preposition before it, ends the first sentence ("a car pinned to a
  tree in moore okla may 22 2013 a tornado ..." -> "a car pinned to a tree ."). Dates
  inside a sentence are the `dates` rule's.

A sentence break step (token, the token before it, Knowledge) returns the mark the caption
then ends with, OWN_MARK where the sentence's own mark stays, or None for no break there.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from spacy.attrs import LOWER
from spacy.strings import get_string_id

from conceptual.text.hypernymize.registry import Rule, steps_of

FIRST_SENTENCE = Rule(
    "first_sentence",
    "cuts the caption to the alt-text's first sentence, stock-photo tags included",
    example=(
        "A red fox crossing a snowy meadow at dawn. The fox population has grown since 2010.",
        "a red fox crossing a snowy meadow at dawn .",
    ),
    config=("min_tokens",),
)
DATELINES = Rule(
    "datelines",
    "removes a news photo's or a slug's dateline, and ends the sentence at a later date",
    example=(
        "june 4 2015 denver colorado usa a cyclist rides past a mural",
        "a cyclist rides past a mural",
    ),
    config=("min_tokens",),
)

# The words that open the tag sentence of a stock-photo description ("A barn in the snow.
# Vector illustration."), and the word pairs that open a credit ("photo by").
STOCK_TAGS = frozenset({"vector", "illustration", "eps", "concept"})
CREDIT_OPENINGS = frozenset({("photo", "by")})
BACKGROUNDS = frozenset({"background", "backgrounds", "backdrop"})
BACKGROUND_PREPOSITIONS = frozenset({"on", "against", "over"})
# A dateline's months, its days and years, and how far into a text it may reach.
MONTHS = frozenset(
    "january february march april may june july august september october november december"
    " jan feb mar apr jun jul aug sep sept oct nov dec".split()
)
# ... as spaCy keys its words' lowercase forms: a doc's words are read without a Token.
MONTH_KEYS = frozenset(map(get_string_id, MONTHS))
DAY_OR_YEAR = re.compile(r"\d{1,2}(?:st|nd|rd|th)?|\d{4}")
MAX_DATELINE = 16
SENTENCE_ENDS = frozenset({".", "!", "?"})
OWN_MARK = ""  # a break after the sentence's own end mark: the caption keeps it


def second_sentence(
    doc, start: int, breaks: Sequence[Callable], know
) -> tuple[int, str | None] | None:
    """Where the text's second sentence starts, and the mark the caption then ends with
    (None when its own mark stays): at the first break a step finds after a description of
    at least `min_tokens` words with a noun. None for a single sentence."""
    words, noun = 0, False
    for token in doc[start + 1 :]:
        before = doc[token.i - 1]
        words += before.is_alpha
        noun = noun or before.pos_ in ("NOUN", "PROPN")
        if words < know.config.min_tokens or not noun:
            continue
        for found in breaks:
            if (mark := found(token, before, know)) is not None:
                return token.i, mark or None
    return None


@FIRST_SENTENCE.step
def after_end_mark(token, before, know) -> str | None:
    """After a sentence's end mark."""
    return OWN_MARK if before.text in SENTENCE_ENDS else None


@steps_of(FIRST_SENTENCE, DATELINES)
def after_dated_clause(token, before, know) -> str | None:
    """At a date after a clause: "a tree in Moore, Okla., May 22, 2013. A tornado ..."."""
    return "." if date_run_end(token) and ends_clause(before) else None


@FIRST_SENTENCE.step
def at_stock_tag(token, before, know) -> str | None:
    """At a stock-photo tag ("vector illustration", "concept", "photo by") after the
    description (no mark: slugs lost it)."""
    doc = token.doc
    following = doc[token.i + 1].lower_ if token.i + 1 < len(doc) else ""
    tag = token.lower_ in STOCK_TAGS or (token.lower_, following) in CREDIT_OPENINGS
    described = before.pos_ in ("NOUN", "PROPN", "ADJ", "NUM")
    inside_tag = before.lower_ in STOCK_TAGS  # "vector illustration" is one tag
    if tag and described and not inside_tag and before.lower_ not in know.stop_words:
        return "."
    return None


@FIRST_SENTENCE.step
def after_background(token, before, know) -> str | None:
    """After the description's closing "on a white background" where no preposition or
    conjunction goes on: "black cat on a black background winks"."""
    joined = token.is_punct or token.pos_ in ("ADP", "CCONJ", "PART")
    return "." if closes_on_background(before) and not joined else None


def closes_on_background(token) -> bool:
    """Whether the token ends "on a white background" (or against, over): where a
    stock-photo description ends."""
    if token.lower_ not in BACKGROUNDS:
        return False
    doc = token.doc
    for i in range(token.i - 1, max(token.i - 5, -1), -1):
        if doc[i].lower_ in BACKGROUND_PREPOSITIONS:
            return True
        if doc[i].pos_ not in ("DET", "ADJ", "NOUN", "PROPN"):
            return False
    return False


@DATELINES.step
def after_dateline(doc, know) -> int:
    """Where the text starts after its dateline, else 0. A news photo's dateline ends in a
    colon after a date ("LOS ANGELES, CA - JANUARY 10: Actress ..."); a slug's is places
    around a date ("washington dc may 3 2017 usa members of ...")."""
    if not has_month(doc):
        return 0  # a date needs a month (most captions have none)
    for colon in (t for t in doc[:MAX_DATELINE] if t.text == ":"):
        if any(date_run_end(t) for t in doc[: colon.i]):
            return colon.i + 1
    i = skip_places(doc, 0, know)
    if not (end := date_run_end(doc[i]) if i < len(doc) else None):
        return 0
    start = skip_places(doc, end, know)
    rest = sum(t.is_alpha for t in doc[start:])
    return start if rest >= know.config.min_tokens else 0


def has_month(doc) -> bool:
    """Whether a word of the doc is a month's name."""
    return not MONTH_KEYS.isdisjoint(doc.to_array(LOWER).tolist())


def bounds_read_entities(doc) -> bool:
    """Whether finding the caption's bounds reads the doc's entities: only a dateline's
    places do (`skip_places`), and a dateline has a date, which has a month."""
    return has_month(doc)


def skip_places(doc, i: int, know) -> int:
    """The index after the place names and codes from i on ("Las Vegas Nevada US")."""
    codes = know.gazetteer.codes if know.gazetteer else frozenset()
    for token in doc[i : i + MAX_DATELINE]:
        place = token.ent_type_ in ("GPE", "LOC") or know.place_kind(token.text)
        known = know.lexicon.instance(token.lower_)
        if not (token.is_punct or token.lower_ in codes or place or known):
            return token.i
    return min(i + MAX_DATELINE, len(doc))


def ends_clause(token) -> bool:
    """Whether a clause can end at the token: it is no article, adjective, number or
    preposition waiting for its noun ("during the February 2012 snowstorm"), and a verb
    came before it (a run of place names is a dateline, not a sentence)."""
    if token.pos_ in ("ADP", "DET", "ADJ", "NUM"):
        return False
    return any(t.pos_ in ("VERB", "AUX") for t in token.doc[: token.i])


def date_run_end(token) -> int | None:
    """Where a date that starts at the token ends: a month and a day or year beside it
    ("may 3 2017", "1st december", "March 1971", "JANUARY 10, 2017"); None if no date
    starts there (a lone "may" is a verb)."""
    doc, end, month, number = token.doc, token.i, False, False
    while end < len(doc) and end - token.i < 5:
        word = doc[end].lower_
        if word in MONTHS and not month:
            month = True
        elif DAY_OR_YEAR.fullmatch(word):
            number = True
        elif word != "," or not (month or number):
            break
        end += 1
    while end > token.i and doc[end - 1].text == ",":
        end -= 1
    return end if month and number and doc[token.i].text != "," else None
