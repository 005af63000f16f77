"""The names in a caption, and the hypernym a name gets when no rule of the NAMES hook
takes it.

Names are spaCy's entities, capitalized titles in quotes [WORK_OF_ART], and the runs of
proper nouns it left unlabelled [PROPN]. A name needs a word that is one: WordNet knows it
only capitalized as a named instance ("London"), or not at all ("Priyanka"); for NORP and
longer labelled names also a capitalized class ("Italian", "the New York Yankees"). Common
words are no name ("Fireworks", "piggy bank"), unless capitalized inside a sentence of a
cased text ("made in China"), or WordNet knows the whole span as a named instance ("Cayman
Islands"). The small model mislabels, so WordNet's kind of a name it knows overrides
spaCy's label (and the gazetteer's, a label other than PERSON), and a name coordinated with
a person is a person; so do the census lists (`census_names`). A title word spaCy put in a
person's name stays out of it ("Musician Bruce Springsteen").

The hypernym, from WordNet first: the name's most frequent sense must be a named instance
(a person by full name only: a lone "Jones" or "Thomas" is mostly someone else), and it is
named by the nearest single common word among its instance hypernyms and their hypernyms
(`max_wordnet_depth` levels, at least `min_head_zipf` frequent, ties to the most frequent),
the short heads the released captions prefer: Einstein -> physicist, Paris -> national
capital -> "city", Spain -> European country -> "country". Then the gazetteer's kind of
place (`gazetteer`); else the entity type gives it (TYPE_HEADS): PERSON -> "person", GPE ->
"city", ORG -> "organization", a plural NORP -> "people"... An unlabelled name nothing
knows becomes "person" (captions are mostly of people). WordNet knows few living people
and this is no knowledge graph: "Former Miss World Priyanka Chopra on the red carpet" gives
"former person on the red carpet", where Google's pipeline said "actor"; and the small
model's mistakes pass through ("Calista Flockhart" tagged ORG becomes "organization").
"""

from __future__ import annotations

from dataclasses import dataclass

from conceptual.text.hypernymize.tokens import (
    MODIFIER_DEPS,
    NUMBER_LABELS,
    TIME_LABELS,
    capitals_mark_names,
    conjuncts,
    quoted_titles,
    quotes_around,
    trim,
    wordnet_key,
)

# Fallback heads by spaCy entity label, when WordNet does not know the name.
TYPE_HEADS = {
    "PERSON": "person",
    "NORP": "person",  # "an American"; "Americans" -> "people"
    "FAC": "building",
    "ORG": "organization",
    "GPE": "city",
    "LOC": "location",
    "PRODUCT": "product",
    "EVENT": "event",
    "WORK_OF_ART": "work",
    "LAW": "law",
    "LANGUAGE": "language",
    "PROPN": "person",  # a name neither spaCy nor WordNet could type: captions are mostly of people
}


@dataclass(frozen=True)
class Name:
    """A name the rules of the NAMES hook decide about: its span and label, and where it
    hangs in the parse."""

    span: object  # a spaCy Span
    label: str

    @property
    def root(self):
        return self.span.root

    @property
    def head(self):
        return self.span.root.head

    @property
    def modifies(self) -> bool:
        """Whether the name modifies a noun outside it ("the Paraguay flag")."""
        span, root, head = self.span, self.span.root, self.span.root.head
        outside = head.i < span.start or head.i >= span.end
        return root.dep_ in MODIFIER_DEPS and outside and head.pos_ in ("NOUN", "PROPN")

    @property
    def prepositional(self) -> bool:
        """Whether the name is a preposition's object ("in Paris")."""
        return self.root.dep_ == "pobj" and self.head.dep_ == "prep"


def find_names(doc, know) -> list:
    """(span, label) for the names in doc: spaCy's entities other than numbers and
    times, capitalized titles in quotes (WORK_OF_ART: 'the premiere of "Sully"'), then
    runs of proper nouns it left unlabelled (label "PROPN"). The small model mislabels,
    so WordNet's kind of a name it knows overrides spaCy's label, and a name coordinated
    with a person is a person ("Ronan Farrow and Rina Amiri")."""
    covered = set()
    candidates = []
    for ent in doc.ents:
        covered.update(range(ent.start, ent.end))
        # a name needs a word: numbers alone ("747" labelled PRODUCT) are counts or
        # model codes (`numbers`, `models`), and trim leaves nothing of them
        if ent.label_ not in TIME_LABELS | NUMBER_LABELS and len(name := trim(ent)):
            candidates.append((name, ent.label_))
    for title in quoted_titles(doc):
        if not covered.intersection(range(title.start, title.end)):
            covered.update(range(title.start, title.end))
            candidates.append((title, "WORK_OF_ART"))
    run = []
    for token in [*doc, None]:
        if token is not None and token.pos_ == "PROPN" and token.i not in covered:
            run.append(token)
        elif run:
            candidates.append((doc[run[0].i : run[-1].i + 1], "PROPN"))
            run = []
    names = []
    cased = capitals_mark_names(doc)
    for span, label in candidates:
        if label == "PROPN" and all(token.lower_ in know.stop_words for token in span):
            continue  # "US", "IT" tagged as proper nouns: words first
        # A title word heading a name stays out of it, for `titles`; a run of proper nouns
        # keeps it ("Miss World Priyanka Chopra": "Miss" is part of a name there).
        name = without_titles(span, know)
        if name is None:
            continue  # "German Chancellor Angela Merkel": a title, no name
        if label == "PERSON":
            span = name  # "Musician Bruce Springsteen"
        elif label == "ORG" and name != span and not any(map(know.is_common, name)):
            span, label = name, "PERSON"  # "Actress Priyanka Chopra", tagged ORG
        quoted = bool(quotes_around(span))
        if quoted:
            label = "WORK_OF_ART"  # 'the cast of "Hamilton"': a title, whatever it names
        known = know.lexicon.instance(wordnet_key(span))
        if not known and label != "WORK_OF_ART":
            label = know.census_label(span, label) or label
        # a town WordNet lacks, tagged ORG or not at all ("Kericho"); people are often
        # named like towns ("Florence", "Jackson"), so spaCy's PERSON stands
        place = not known and label != "PERSON" and know.place_kind(span.text)
        # capitalized classes are names in nationalities and in long labelled names
        capitalized_names = label == "NORP" or (label not in ("PERSON", "PROPN") and len(span) > 1)
        if (
            known
            or place
            or quoted
            or any(is_name_word(t, cased, capitalized_names, know) for t in span)
        ):
            names.append((span, known[0] if known else "GPE" if place else label))
    people = {span.root.i for span, label in names if label == "PERSON"}
    return [
        (
            span,
            "PERSON" if label in ("ORG", "PROPN") and conjuncts(span.root) & people else label,
        )
        for span, label in names
    ]


def without_titles(span, know):
    """A person's name without the title before it, which `titles` keeps ("Musician" in
    "Musician Bruce Springsteen", a run "Chancellor" before "Angela Merkel"), capitalized
    as titles are. One title: a first name can be a word for a person too ("Tom"). None
    if no name is left."""
    if not know.is_title_word(span[0]):
        return span
    return span[1:] if len(span) > 1 else None


def is_name_word(token, cased: bool, capitalized_names: bool, know) -> bool:
    """Whether a word is a name: WordNet knows it only as a name, or not at all
    ("Priyanka"); for nationalities and groups (NORP) also a capitalized class word
    ("Italian"). A common word is a name only where capitals mark names and it has one
    inside a sentence ("made in China", "President Bush"); otherwise it is a word
    ("Fireworks", "piggy bank", "Marines", whose lemma "marine" is common), and so are
    capitalized classes ("Christmas"), unless spaCy labelled a longer name they are in
    ("the New York Yankees")."""
    if not token.is_alpha or token.lower_ in know.stop_words:
        return False
    kinds = ("name", "unknown", "capitalized") if capitalized_names else ("name", "unknown")
    kind, lemma_kind = (know.lexicon.word_kind(w)[0] for w in (token.lower_, token.lemma_.lower()))
    if kind in kinds and lemma_kind != "common":
        return True
    return cased and token.is_title and not token.is_sent_start and kind != "unknown"


def replace_by_hypernym(name: Name, edits, know):
    """The name becomes its hypernym, recorded with where it came from."""
    span, label = name.span, name.label
    concept, source = hypernym(span, label, know)
    if label == "PROPN" and source == "entity_type":
        edits.unresolved.append(span.text)  # neither spaCy nor WordNet could type it
    # "Cubans" -> "people"; WordNet's names are singular ("Leeds", "Athens")
    plural = name.root.tag_ in ("NNS", "NNPS") and source == "entity_type"
    word = know.lexicon.plural(concept) if plural else concept
    edits.replace(span, word, concept, label, source)


def hypernym(span, label, know) -> tuple[str, str]:
    """(concept, source) for a name: WordNet first, then the gazetteer's kind of place
    ("Kericho" -> "city"), then the entity type."""
    if known := know.lexicon.instance(wordnet_key(span)):
        return known[1], "wordnet"
    if label == "GPE" and (kind := know.place_kind(span.text)):
        return kind, "gazetteer"
    return TYPE_HEADS[label], "entity_type"
