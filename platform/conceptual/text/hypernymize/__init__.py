"""Hypernymization: the text transformation of spec §4.

Proper names cannot be learned from pixels, so a caption's named entities become the
concepts they stand for, and what no image shows (dates, places, counts) goes:

    "Crowd at a concert in Los Angeles"  -> "crowd at a concert"
    "Albert Einstein giving a lecture"   -> "physicist giving a lecture"
    "artist and artist"                  -> "artists"

    hypernymizer = Hypernymizer(HypernymConfig())
    [result] = hypernymizer.transform(["Italian cuisine"])   # result.caption == "cuisine"

One caption, parsed by spaCy (POS, dependencies, entities), goes through the rules. Each
rule is a `Rule` (registry.py: its name, what it removes or replaces, the labels it
records in `Transformed.entities`, its config keys and an example) with its steps, the
parts it plays at the hooks of hooks.py, which lists them in the order they run. Each
can be switched off by its name in `disabled_rules` (for ablations; all on by default;
BENCHMARKS.md's ablation table scores the dev pairs with each one off). In the order they
first run:

- sources.py: `census_names`, `gazetteer` (offline sources of people's and places' names);
- sentences.py: `datelines`, `first_sentence` (where the caption starts and ends);
- removals.py: `asides`, `dates`, `work_titles` (before the names), `numbers` (after);
- models.py: `models` (a maker's model is what they make: "a Boeing 747" -> "an aircraft");
- the NAMES hook, where the first step that takes a name decides: modifiers.py
  (`name_modifiers`), classes.py (`class_heads`, `titles`), places.py
  (`location_phrases`, `stray_places`); a name none takes becomes its hypernym, from
  WordNet, the gazetteer or its entity type (names.py, which also finds the names);
- coordinations.py: `coordinations` ("person and person" -> "people");
- punctuation.py: `punctuation` (nothing left dangling).

Output is in the released dataset's style (edits.py): lowercase spaCy tokens joined by
single spaces, punctuation as separate tokens, an indefinite article that agrees with the
word after it.

Lowercase input (the dev set's URL slugs) defeats spaCy's NER, so `parse` (and with it
`transform`) restores capitals in caseless texts first (`restore_case`): words and
multiword names WordNet spells with capitals ("new york" -> "New York"), a given name and
a surname ("drew barrymore", not two common words as "will power"), unknown words
rarer than `name_max_zipf` ("dacosta"), but not derivations of common words ("biker").
Texts with capitals are parsed as they are.

Rejections (`Transformed.rejection.reason`, stable metric names):
- "unresolved_entity": with `reject_unresolved`, a name neither spaCy nor WordNet could
  type (the "person" guess for an unlabelled name), for precision over recall as the
  paper's pipeline;
- "too_short": fewer than `min_tokens` words left (released captions have at least 3);
- "no_noun_left": no noun left, so nothing for the entity-type frequency rule to count.
"""

from conceptual.text.hypernymize.config import HypernymConfig
from conceptual.text.hypernymize.hooks import RULE_NAMES, RULES
from conceptual.text.hypernymize.hypernymizer import Hypernymizer, Transformed, parseable
from conceptual.text.hypernymize.names import TYPE_HEADS
from conceptual.text.hypernymize.registry import Rule

__all__ = [
    "RULES",
    "RULE_NAMES",
    "TYPE_HEADS",
    "HypernymConfig",
    "Hypernymizer",
    "Rule",
    "Transformed",
    "parseable",
]
