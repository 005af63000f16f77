"""`coordinations`: coordinated heads that now name the same concept, with no modifiers
left but articles, merge into one plural: "actor and actor" -> "actors" (WordNet's
irregular plurals, or the most frequent of the regular and -men forms). It runs after the
names are replaced, which is what makes "Calista Flockhart and Harrison Ford" "person and
person".
"""

from __future__ import annotations

from conceptual.text.hypernymize.registry import Rule

COORDINATIONS = Rule(
    "coordinations",
    "merges coordinated heads naming the same concept into one plural",
    example=("Calista Flockhart and Harrison Ford at the premiere", "people at the premiere"),
)


@COORDINATIONS.step
def merge_coordinations(doc, edits, know):
    """ "actor and actor" -> "actors": a head and its conjuncts that now name the same
    concept, with no modifiers left but articles, become its plural ("dining room and
    living room" stay)."""
    for head in doc:
        conjuncts = [c for c in head.children if c.dep_ == "conj"]
        concept = edits.concept(head)
        if not conjuncts or concept is None:
            continue
        same = all(edits.concept(c) == concept for c in conjuncts)
        if same and all(edits.is_bare(t) for t in (head, *conjuncts)):
            head_span = edits.span_of(head)
            last = edits.span_of(conjuncts[-1])
            between = range(head_span[-1] + 1, last[-1] + 1)
            edits.remove([doc[i] for i in between])
            articles = [c for c in head.children if c.dep_ == "det" and c.lower_ in ("a", "an")]
            edits.remove(articles)
            edits.pluralize(head, know.lexicon.plural(concept))
