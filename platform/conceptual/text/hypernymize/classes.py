"""Names the text already classes: by a common noun beside them, or by their own head.

- `titles`: a name beside a common noun of its kind goes and the noun stays: "actor Colin
  Farrell" -> "actor", "the singer, Adele," and "Jamie Foxx, the singer," -> "the
  singer", "the village Manang" -> "the village", "her book 'The Long Road'" -> "her
  book" (any noun names a quoted work's kind), "the river itchen" (caseless, tagged
  PERSON, no census name, after a place noun) -> "the river"; a plural title takes its
  coordinated names along ("actors Tommy Lee Jones and Faye Dunaway" -> "actors"). People
  without a WordNet entry are mostly named by such a role when the text gives one; a
  female form is named by its role, as the released captions do ("actress" -> "actor":
  WordNet's hypernym of the same stem) [ROLE]. A name right after an animal noun is the
  animal's ("our cat Chelsea" -> "our cat", however the small model parsed it), not a
  person: a pet is named as people are, and spaCy labels it so.
- `class_heads`: a name of a thing that ends in a common noun becomes that noun, which
  says what it is: "the 2016 Glastonbury Festival" -> "the festival", "the Grammy Awards"
  -> "the awards", "Worthy Farm" -> "farm". An event is no place, so this comes before
  `location_phrases` for event nouns (WordNet: under event.n.01): "at the London Marathon"
  -> "at the marathon". A quoted title after a preposition goes with it ('the premiere of
  "Sully"' -> "the premiere"). In caseless text nothing sets a name apart from a
  description, but awards are always some ceremony's and the released captions write
  festivals bare, so what modifies "awards" or "festival" goes: "the mtv video music
  awards" -> "the awards" [EVENT].
"""

from __future__ import annotations

from conceptual.text.hypernymize.names import Name
from conceptual.text.hypernymize.registry import Rule
from conceptual.text.hypernymize.tokens import (
    NOUN_MODIFIER_DEPS,
    is_caseless,
    prepositional_phrase,
    quotes_around,
    remove_phrase,
    wordnet_key,
)

TITLES = Rule(
    "titles",
    "removes a name beside a common noun of its kind, which stays (a female form as its role)",
    example=("Actor Colin Farrell attends a screening", "actor attends a screening"),
    labels=("ROLE",),
)
CLASS_HEADS = Rule(
    "class_heads",
    "replaces a name ending in a common noun by that noun; removes a titled work's phrase",
    example=("Crowds gather for the Festival of Lights.", "crowds gather for the festival ."),
    labels=("EVENT",),
)

TITLE_DEPS = {"compound", "nmod", "amod", "appos"}
# Labels of the same kind for the title rule: a place name goes after any place noun, and
# people and groups of people are one kind (the small model confuses them: "the band
# Coldplay" tagged PERSON).
KINDS = {"GPE": "place", "LOC": "place", "FAC": "place", "PERSON": "agent", "ORG": "agent"}
# Events whose modifiers, in caseless text, are their name ("the peoples choice awards"):
# awards are always some ceremony's, and the released captions write festivals bare ("at
# festival"), not as a kind ("a music festival"); "concert", "race" or "party" are as often
# kinds ("a rock concert", "a birthday party").
NAMED_EVENTS = frozenset({"awards", "festival"})


@CLASS_HEADS.step
def replace_by_event(name: Name, edits, know) -> bool:
    """Before the place rule: "at Glastonbury Festival" is an event, not a place."""
    noun = class_noun(name.span, name.label, know)
    if noun is None or not know.lexicon.is_event(noun.lemma_.lower()):
        return False
    edits.replace(name.span, noun.lower_, noun.lemma_.lower(), name.label, "rule")
    return True


@CLASS_HEADS.step
def remove_titled_work(name: Name, edits, know) -> bool:
    """'the premiere of "Sully"': the title goes with its preposition and quotes."""
    if name.label != "WORK_OF_ART" or not name.prepositional:
        return False
    phrase = [*prepositional_phrase(name.head, name.span), *quotes_around(name.span)]
    remove_phrase(edits, sorted(phrase, key=lambda t: t.i), name.label)
    return True


@TITLES.step
def keep_title(name: Name, edits, know) -> bool:
    span, label, root = name.span, name.label, name.root
    if not (title := title_noun(span, label, know)):
        return False
    # the name's own article goes with it ("her book 'The Long Road'", "the Jardin
    # Majorelle, the garden")
    own_articles = [
        c for c in root.children if c.dep_ == "det" and (title.i < c.i or title.i > root.i)
    ]
    edits.remove([*span, *own_articles, *quotes_around(span)], label, span.text)
    edits.stand_in(span, title)
    if role := know.lexicon.common_role(know.lemma(title)):
        # "actress Meryl Streep" -> "actor": the released captions name the role
        # (200 "actor" to 8 "actress" in the released validation captions)
        plural = know.is_plural(title)
        word = know.lexicon.plural(role) if plural else role
        edits.replace(span.doc[title.i : title.i + 1], word, role, "ROLE", "wordnet")
    if title.i >= span.end:  # "Jamie Foxx, the singer, poses": the commas go too
        closing = span.doc[title.right_edge.i + 1 : title.right_edge.i + 2]
        edits.remove([t for t in (*span.doc[span.end : title.i], *closing) if t.is_punct])
    elif know.is_plural(title):  # "actors Tommy Lee Jones and Faye Dunaway": all
        for conjunct in (c for c in root.children if c.dep_ == "conj"):
            other = span.doc[conjunct.left_edge.i : conjunct.right_edge.i + 1]
            edits.remove(span.doc[span.end : other.end], label, other.text)
    return True


@CLASS_HEADS.step
def replace_by_class(name: Name, edits, know) -> bool:
    """After the place and title rules: "at Worthy Farm" is a location phrase."""
    if (noun := class_noun(name.span, name.label, know)) is None:
        return False
    edits.replace(name.span, noun.lower_, noun.lemma_.lower(), name.label, "rule")
    return True


@CLASS_HEADS.step
def remove_event_names(doc, edits, know):
    """In caseless text, a ceremony's awards and a festival are named by what modifies them
    ("the mtv video music awards", "the subway picnic rocks festival"), and with no capitals
    to tell the name apart, all of it goes: "the awards" [EVENT]. Not where the noun itself
    modifies ("a music festival logo")."""
    if not is_caseless(doc):
        return
    for head in doc:
        if head.lower_ not in NAMED_EVENTS or head.dep_ in NOUN_MODIFIER_DEPS:
            continue
        name = [t for c in head.lefts if c.dep_ in NOUN_MODIFIER_DEPS for t in c.subtree]
        if name and not all(t.i in edits.dropped for t in name):
            edits.remove(name, "EVENT", " ".join(t.text for t in [*name, head]))
            for root in {t.i for t in name} & edits.concepts.keys():
                edits.unreplace(root)  # "the grammy awards": no "person" counted


def class_noun(span, label: str, know):
    """The common noun heading the name of a thing, which says what it is: "Glastonbury
    Festival" -> "festival", "Grammy Awards" -> "awards", "Worthy Farm" -> "farm", "the
    Museum of Modern Art" -> "museum" (its head, not its last word). None for people, whose
    surnames can be words ("Tom Hope"), and for names WordNet knows as a whole ("Eiffel
    Tower": its own hypernym)."""
    of = next((t for t in span[1:] if t.lower_ == "of"), None)
    last = span[of.i - span.start - 1] if of is not None else span[-1]
    if label in ("PERSON", "WORK_OF_ART") or len(span) < 2 or not last.is_alpha:
        return None
    if know.lexicon.instance(wordnet_key(span)):
        return None
    return last if know.is_common(last) and know.lexicon.is_noun(last.lower_) else None


def title_noun(span, label: str, know):
    """A common noun before or around the name that already says what it is: "actor" in
    "actor Colin Farrell", "singer" in "the singer, Adele" and "Jamie Foxx, the singer,",
    "village" in "the village Manang"; then the name alone goes. The noun must have a sense
    of the name's kind (a person or group noun for a person or group, a place noun for a
    place; either for an unlabelled name), or an animal right before a person's name ("our
    cat Chelsea", which the small model parses as two subjects)."""
    kind = KINDS.get(label, label)
    before = span.doc[span.start - 1] if span.start else None
    if kind in ("agent", "PROPN") and before is not None and before.pos_ == "NOUN":
        if know.lexicon.is_animal(before.lemma_.lower()):
            return before
    nouns = [c for t in span for c in t.children if c.dep_ in TITLE_DEPS and c.i < span.start]
    if span.root.dep_ == "appos":
        nouns.append(span.root.head)
    nouns += [c for c in span.root.children if c.dep_ == "appos" and c.i >= span.end]
    for noun in nouns:
        if label == "WORK_OF_ART" and noun.pos_ == "NOUN":
            return noun  # any noun before a title says what the work is: "the film 'Up'"
        common = noun.pos_ == "NOUN" or know.is_common(noun)
        # The small tagger calls some titles verbs ("actress Meryl Streep" -> VERB
        # compound); a compound before a name is a noun all the same.
        if noun.pos_ not in ("NOUN", "PROPN") and noun.dep_ != "compound" or not common:
            continue
        if noun.pos_ == "PROPN" and kind != "place" and not know.is_title_word(noun):
            continue  # a capitalized word of a name's phrase ("Miss World Priyanka Chopra")
        kinds = {KINDS.get(lb, lb) for lb in know.lexicon.noun_labels(noun.lemma_.lower())}
        if kind in kinds or (kind == "PROPN" and kinds & {"agent", "place"}):
            return noun
        if kinds == {"place"} and noun.i < span.start and know.is_guessed_person(span, label):
            return noun  # "loch lomond", "the river itchen" tagged PERSON
    return None
