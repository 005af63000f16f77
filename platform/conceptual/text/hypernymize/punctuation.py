"""`punctuation`: removals leave nothing dangling: a preposition whose objects went, an
article of a removed noun, a mark after a mark (the stronger stays) or at the start, an
article before another ("the the"), quotes or brackets around nothing or a lone
replacement. `artifacts` finds any that remain (the quality tests require none).
"""

from __future__ import annotations

from conceptual.text.hypernymize.registry import Rule
from conceptual.text.hypernymize.tokens import (
    ARTICLES,
    DANGLING_BEFORE_MARK,
    MARKS,
    enclosure,
    openers,
)

PUNCTUATION = Rule(
    "punctuation",
    "removes the prepositions, articles, marks, quotes and brackets removals left dangling",
    example=(
        'The cast of "Hamilton" performs at the Tony Awards at Radio City Music Hall.',
        "the cast performs at the awards .",
    ),
)


@PUNCTUATION.step
def remove_orphans(doc, edits, know):
    """On the parse: words that served only removed words go with them: a preposition whose
    objects all went ("during" of "during the 2016 festival" when the festival went), an
    article or possessive ending of a removed noun."""
    changed = True
    while changed:
        changed = False
        for token in doc:
            if token.i in edits.dropped or token.i in edits.words_at:
                continue
            objects = [c for c in token.children if c.dep_ in ("pobj", "pcomp")]
            served_removed = token.dep_ in ("det", "case", "predet") and edits.gone(token.head)
            lost_objects = (
                token.dep_ in ("prep", "agent") and objects and all(map(edits.gone, objects))
            )
            if served_removed or lost_objects:
                edits.dropped.add(token.i)
                changed = True


@PUNCTUATION.step
def tidy_punctuation(out: list) -> list:
    """On the output words ((word, token or None for a replacement)): what
    removals leave dangling goes: a mark after another (the stronger stays), at the start,
    or after a preposition or article that lost its object ("in , country ." -> "."); quotes
    around nothing or around a lone replacement ("' person '" -> "person")."""
    tidy: list = []
    for word, token in out:
        if word in ARTICLES and tidy and tidy[-1][0] in ARTICLES:
            tidy.pop()  # "the Jardin Majorelle, the gardens" -> "the gardens", never "the the"
        if word in MARKS:
            while tidy and tidy[-1][1] is not None and tidy[-1][1].pos_ in ("ADP", "DET"):
                if tidy[-1][1].dep_ == "prt":
                    break  # "looking up." keeps its particle
                tidy.pop()
            if not tidy:
                continue
            if tidy[-1][0] in MARKS:
                if MARKS.index(word) > MARKS.index(tidy[-1][0]):
                    tidy[-1] = (word, token)
                continue
        tidy.append((word, token))
    unquoted: list = []
    for word, token in tidy:
        unquoted.append((word, token))
        if not (opening := openers(word)):
            continue
        if len(unquoted) >= 2 and unquoted[-2][0] in opening:
            del unquoted[-2:]  # '" "', "( )": quotes or brackets around nothing
        elif len(unquoted) >= 3 and unquoted[-3][0] in opening and unquoted[-2][1] is None:
            unquoted[-3:] = [unquoted[-2]]  # "' person '": around a lone replacement
    return unquoted


def artifacts(caption: str, know) -> list[str]:
    """What removals can leave dangling, found in a caption's tokens; the released
    captions never have it, and `punctuation` should leave none: a mark at the start or after
    another mark, a preposition or article before a mark ("in , country"), quotes around
    nothing or a lone word ("' person '"), "person" modifying a noun ("person loafers":
    a word WordNet knows only as a noun follows)."""
    words = caption.split()
    found = []
    for i, word in enumerate(words):
        before = words[i - 1] if i else None
        if word in MARKS and (before is None or before in MARKS):
            found.append(f"mark {word!r} at the start or after a mark")
        elif word in MARKS and before in DANGLING_BEFORE_MARK:
            found.append(f"{before!r} before {word!r}")
        elif word in ARTICLES and before in ARTICLES:
            found.append(f"{before!r} before {word!r}")
        elif i >= 1 and before in openers(word):
            found.append(f"{enclosure(word)} around nothing")
        elif i >= 2 and words[i - 2] in openers(word):
            found.append(f"{enclosure(word)} around a lone {before!r}")
        elif before == "person" and know.is_noun_only(word):
            found.append(f"'person' modifying {word!r}")
    return found
