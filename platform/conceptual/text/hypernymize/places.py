"""Places, which no image shows by name.

- `location_phrases`: a preposition whose object is a place or organization (GPE, LOC,
  FAC, ORG; an unlabelled name after "in", "at", "near") goes with its phrase and the
  places in apposition to it, "in Los Angeles", "at Wembley Stadium", "in Pilton,
  England," [LOCATION_PP], while "at a concert" stays. So does a name with the place noun
  it modifies ("in Bondi beach", "at Luton airport"; not "in a London park", which is a
  park). When the phrase has another common noun ("at sunset UK") the name alone goes. Not
  after the end of a multiword preposition ("in front of Tower Bridge": the name becomes
  its hypernym). In caseless text, a "person" after "in" or "near" whom the census lists do
  not name is a place the small model mislabelled ("tourists at the palace in agra
  uttar"). An event is no place: `class_heads` takes "at the London Marathon" first.
- `stray_places`: a place no other word needs goes: an apposition or a tag ("boats on the
  river Varanasi"), a dateline heading the text ("Rabat, Morocco - people at ..."); so
  does an unlabelled name nothing knows there, rather than becoming "person".
"""

from __future__ import annotations

from conceptual.text.hypernymize.modifiers import NAME_MODIFIERS
from conceptual.text.hypernymize.names import Name
from conceptual.text.hypernymize.registry import Rule, steps_of
from conceptual.text.hypernymize.tokens import (
    PLACE_LABELS,
    PLACE_PREPOSITIONS,
    prepositional_phrase,
    remove_phrase,
)

LOCATION_PHRASES = Rule(
    "location_phrases",
    "removes a preposition whose object is a place, with its phrase",
    example=("Crowd at a concert in Los Angeles", "crowd at a concert"),
    labels=("LOCATION_PP",),
)
STRAY_PLACES = Rule(
    "stray_places",
    "removes a place no other word needs: an apposition, a tag, a dateline",
    example=(
        "Rabat, Morocco - people at a market in the old town.",
        "people at a market in the old town .",
    ),
)

# The last words of multiword prepositions ("in front of", "next to", "away from").
COMPLEX_PREPOSITION_ENDS = {"of", "to", "from"}
# Dependencies of a place name that no other word of the sentence needs: a dateline
# ("Rabat, Morocco - people at a market"), an apposition, a trailing tag.
STRAY_DEPS = {"ROOT", "appos", "npadvmod", "dep"}
# How a common noun attaches to the name it classes ("the river Itchen", "Luton airport").
NAME_NOUN_DEPS = {"compound", "nmod", "appos"}


@steps_of(NAME_MODIFIERS, LOCATION_PHRASES)
def remove_named_place(name: Name, edits, know) -> bool:
    """ "in Bondi beach", "at Laney college": the named place goes with its phrase."""
    head = name.head
    if not name.modifies or name.label == "NORP" or not is_named_place(head, name.span, know):
        return False
    phrase = prepositional_phrase(head.head, name.span.doc[head.i : head.i + 1])
    remove_phrase(edits, phrase, "LOCATION_PP")
    return True


@LOCATION_PHRASES.step
def remove_location_phrase(name: Name, edits, know) -> bool:
    span, head = name.span, name.head
    if not (
        is_place(span, name.label, head, know)
        and name.prepositional
        and not ends_complex_preposition(head)
    ):
        return False
    phrase = prepositional_phrase(head, span)
    # "at sunset UK": the place alone goes; other names ("in Pilton, England") go along
    if any(t.pos_ == "NOUN" and t not in span for t in phrase):
        edits.remove(span, name.label, span.text)
        # "on the river Itchen": the name's own noun is the object "on" keeps
        if own := [t for t in phrase if t.head == name.root and t.dep_ in NAME_NOUN_DEPS]:
            edits.stand_in(span, own[-1])
    else:
        remove_phrase(edits, phrase, "LOCATION_PP")
    return True


@STRAY_PLACES.step
def remove_stray_place(name: Name, edits, know) -> bool:
    if not is_stray_place(name.span, name.label):
        return False
    edits.remove(name.span, name.label, name.span.text)
    return True


def is_named_place(noun, name, know) -> bool:
    """Whether a name and the noun it modifies name a place after "in", "at" or "near":
    one of the noun's two first senses is a place ("in Bondi beach", "at Laney college"),
    and nothing else modifies it ("in a London park" is a park)."""
    others = [c for c in noun.children if not name.start <= c.i < name.end]
    return (
        noun.pos_ == "NOUN"
        and noun.dep_ == "pobj"
        and noun.head.lower_ in PLACE_PREPOSITIONS
        and not any(c.dep_ in ("det", "amod", "nummod", "poss") for c in others)
        and any(know.lexicon.place_senses(noun.lemma_.lower()))
    )


def is_place(span, label: str, preposition, know) -> bool:
    """Whether a name after this preposition is a place: a place or organization label,
    an unlabelled name after "in", "at", "near", or, in caseless text, a "person" after
    "in" or "near" whom the census lists do not name: nothing happens in a person, and
    the small model calls many caseless places people ("in agra uttar")."""
    if label in PLACE_LABELS:
        return True
    if label == "PROPN":
        return preposition.lower_ in PLACE_PREPOSITIONS
    return preposition.lower_ in ("in", "near") and know.is_guessed_person(span, label)


def is_stray_place(span, label: str) -> bool:
    """A place name (or an unlabelled name) that no other word needs: an apposition or
    loose tag ("Kericho, Kenya", "boats on the river Varanasi") or a dateline heading the
    text with the caption hanging off it ("Rabat, Morocco - people at a market")."""
    if label not in ("GPE", "LOC", "PROPN"):
        return False
    root = span.root
    if root.dep_ != "ROOT":
        return root.dep_ in STRAY_DEPS
    return span.start == 0 and any(
        c.dep_ in STRAY_DEPS and c.pos_ in ("NOUN", "PROPN") and c.i >= span.end
        for c in root.children
    )


def ends_complex_preposition(preposition) -> bool:
    """Whether a preposition ends a multiword one ("in front of", "on top of", "next to"),
    which cannot lose its object: removing "of Tower Bridge" would leave "in front". Those
    end in "of", "to" or "from"; "in Tokyo" after "a subway train" is no such thing."""
    if preposition.lower_ not in COMPLEX_PREPOSITION_ENDS:
        return False
    head = preposition.head
    if head.pos_ in ("ADV", "ADJ"):
        return True
    bare = not any(c.dep_ in ("det", "poss") for c in head.children)
    return head.pos_ == "NOUN" and head.dep_ == "pobj" and bare
