"""What the rules share about spaCy's tokens and spans: labels and dependencies they test,
the punctuation they tidy, and small readings of a parse (a name's span without its
article, the quotes around it, its prepositional phrase)."""

from __future__ import annotations

from collections.abc import Iterator

from spacy.attrs import IS_QUOTE

PLACE_LABELS = {"GPE", "LOC", "FAC", "ORG"}
PLACE_PREPOSITIONS = {"in", "at", "near"}
TIME_LABELS = {"DATE", "TIME"}
MEASURE_LABELS = {"QUANTITY", "MONEY", "PERCENT"}
NUMBER_LABELS = {"CARDINAL", "ORDINAL", *MEASURE_LABELS}
MODIFIER_DEPS = {"compound", "nmod", "amod", "poss", "npadvmod"}
# ... and numbers: everything before a noun that says which or how many of it.
NOUN_MODIFIER_DEPS = MODIFIER_DEPS | {"nummod"}
# A quoted title is a few words; longer quotes are speech.
MAX_TITLE_WORDS = 8
# Doc.user_data key marking a doc parsed from restore_case's output.
CASE_RESTORED = "conceptual.case_restored"

# Punctuation marks that separate (quotes and brackets pair instead), weakest first: of
# two left in a row by removals, the stronger stays ("in Kericho, Kenya." -> ".").
MARKS = (",", "-", "--", ";", ":", "...", "?", "!", ".")
# Articles and prepositions that need an object after them (a closed class; not those that
# are also particles or adverbs: "looks on.", "walked past.").
DANGLING_BEFORE_MARK = frozenset(
    "a an the among at between during for from in into near of onto to toward towards upon"
    " via with".split()
)
ARTICLES = frozenset({"a", "an", "the"})
QUOTES = frozenset({'"', "'", "`", "``", "''", "\u2018", "\u2019", "\u201c", "\u201d"})
BRACKETS = {"(": ")", "[": "]", "{": "}"}
OPENING_BRACKETS = {closing: opening for opening, closing in BRACKETS.items()}


def enclosure(word: str) -> str:
    return "quotes" if word in QUOTES else "brackets"


def openers(word: str) -> frozenset:
    """The words that open what `word` closes: quotes for a quote, its bracket for a
    closing bracket, none for other words."""
    if word in QUOTES:
        return QUOTES
    return frozenset(OPENING_BRACKETS.get(word, ""))


def remove_phrase(edits, phrase: list, label: str):
    """Remove a prepositional phrase, recorded under `label` with its text; an apposition
    inside it takes its closing comma along ("of Chicago, Illinois, from a boat")."""
    doc, end = phrase[0].doc, phrase[-1].i + 1
    closing = doc[end : end + 1] if any(t.text == "," for t in phrase[1:-1]) else []
    words = [t for t in phrase if not t.is_punct]
    text = doc[words[0].i : words[-1].i + 1].text
    edits.remove([*phrase, *(t for t in closing if t.text == ",")], label, text)


def trim(span):
    """The span without leading determiners, numbers or punctuation and trailing
    possessives: "the Jardin Majorelle" -> "Jardin Majorelle", "the 2016 Glastonbury
    Festival" -> "Glastonbury Festival" (its number is a count or date of its own); empty
    when nothing else is in it ("747")."""
    start, end = span.start, span.end
    while start < end and (span.doc[start].pos_ in ("DET", "PUNCT", "NUM")):
        start += 1
    while end > start and (span.doc[end - 1].tag_ == "POS" or span.doc[end - 1].is_punct):
        end -= 1
    return span.doc[start:end]


def is_caseless(doc) -> bool:
    """Whether the text came without capitals (`restore_case` may have added guesses)."""
    return bool(doc.user_data.get(CASE_RESTORED)) or (text := doc.text) == text.lower()


def capitals_mark_names(doc) -> bool:
    """Whether capitals in the text single out names: most words inside its sentences and
    outside spaCy's entities are lowercase (not a Title Case Headline, not all lowercase;
    a text dense with names still is no headline), and `restore_case` did not put them
    there."""
    if doc.user_data.get(CASE_RESTORED):
        return False
    inner = [t for t in doc if t.is_alpha and not t.is_sent_start]
    if not any(t.is_title or t.is_upper for t in inner):
        return False
    outside = [t for t in inner if not t.ent_type_]
    return sum(t.is_title or t.is_upper for t in outside) < len(outside) / 2


def quoted_titles(doc) -> Iterator:
    """Spans between a pair of quotes that start with a capital, a few words long: the
    titles of works ('the premiere of "Sully"', "her book 'The Long Road'")."""
    quotes = doc.to_array(IS_QUOTE).nonzero()[0].tolist()  # no Token object per word
    for opening, closing in zip(quotes[::2], quotes[1::2]):
        inner = doc[opening + 1 : closing]
        if 0 < len(inner) <= MAX_TITLE_WORDS and inner[0].is_title:
            yield inner


def quotes_around(span) -> list:
    """The quotes right around the span (an article may stand inside: "'The Long Road'"),
    or none."""
    doc, start = span.doc, span.start - 1
    if start >= 0 and doc[start].pos_ == "DET":
        start -= 1
    if start < 0 or span.end >= len(doc) or not doc[start].is_quote or not doc[span.end].is_quote:
        return []
    return [doc[start], doc[span.end]]


def conjuncts(token) -> set[int]:
    """Indices of the tokens coordinated with token ("A and B": each other's)."""
    linked = {c.i for c in token.children if c.dep_ == "conj"}
    if token.dep_ == "conj":
        linked.add(token.head.i)
    return linked


def span_with_dets(span) -> list:
    return [*(c for c in span.root.children if c.dep_ == "det" and c.i < span.start), *span]


def prepositional_phrase(preposition, name) -> list:
    """The preposition and its object's phrase, the whole name included ("at the University
    of Oxford"), without the clauses and phrases hanging off the name ("in Paris with
    friends" -> "in Paris")."""
    obj = name.root
    hanging = {
        t.i
        for c in obj.children
        if c.dep_ in ("prep", "acl", "relcl") and not name.start <= c.i < name.end
        for t in c.subtree
    }
    return [preposition, *(t for t in obj.subtree if t.i not in hanging)]


def wordnet_key(span) -> str:
    """How WordNet spells a multiword name: "Albert Einstein" -> "albert_einstein"."""
    return "_".join(token.lower_ for token in span if not token.is_punct)
