"""`name_modifiers`: names modifying a noun go, whatever their type: "the Paraguay flag",
"Italian cuisine", "London's parks", "Gucci loafers" [their label]. The noun already says
what the thing is. Checked again after the other rules on what is left: a replacement
right before a word WordNet knows only as a noun goes too (never "person loafers"). Where
the noun is a named place after "in", "at" or "near" ("in Bondi beach"), the phrase goes
instead (places.py: a step of both `name_modifiers` and `location_phrases`).
"""

from __future__ import annotations

from conceptual.text.hypernymize.names import Name
from conceptual.text.hypernymize.registry import Rule

NAME_MODIFIERS = Rule(
    "name_modifiers",
    "removes names modifying a noun, and replacements left before a noun",
    example=("The Paraguay flag on a wall", "the flag on a wall"),
)


@NAME_MODIFIERS.step
def remove_modifier(name: Name, edits, know) -> bool:
    if not name.modifies:
        return False
    possessive = [c for c in name.root.children if c.dep_ == "case"]
    edits.remove([*name.span, *possessive], name.label, name.span.text)
    return True


@NAME_MODIFIERS.step
def remove_modifying_replacements(doc, edits, know):
    """Once more on what is left: a replacement right before a noun modifies it, whatever
    the parser said ("Gucci loafers" read as a name and its object; "Milton Abbas usage"
    once "in Dorset" went), and "person loafers" is no caption."""
    for root, tokens in list(edits.spans.items()):
        if tokens[0] in edits.dropped or root in edits.merged:
            continue
        following = next((t for t in doc[tokens[-1] + 1 :] if t.i not in edits.dropped), None)
        if following is not None and following.i not in edits.words_at:
            if know.is_noun_only(following.lower_):
                edits.unreplace(root)
