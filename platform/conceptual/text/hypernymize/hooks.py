"""The hooks of the transformation, the points of a caption's run where the rules' steps run,
and the steps at each, in the order they run: the registry of rules. A rule runs where its
steps are listed; `disabled_rules` takes its steps out of every hook (RULES: the rules, in
the order they first run).

- KNOWLEDGE (Knowledge): load the offline sources of the rules that are on.
- CAPTION_START (doc, Knowledge) -> the token the caption starts at: past a dateline.
- SENTENCE_BREAKS (token, the token before, Knowledge) -> the mark the caption ends with
  when its sentence ends before the token (sentences.py), or None.
- BEFORE_NAMES, AFTER_NAMES (doc, Edits, Knowledge): passes over the caption's parse,
  before and after its names are decided.
- NAMES (Name, Edits, Knowledge) -> whether the step took the name: each name goes to the
  first step that takes it, else it becomes its hypernym (names.py).
- OUTPUT ([(word, token)]) -> [(word, token)]: the caption's words, tidied.

Adding a rule: a module with its `Rule` and steps, and its steps in the lists below.
"""

from __future__ import annotations

from conceptual.text.hypernymize import (
    classes,
    coordinations,
    models,
    modifiers,
    places,
    punctuation,
    removals,
    sentences,
    sources,
)
from conceptual.text.hypernymize.registry import rules_of

KNOWLEDGE = (sources.load_census_names, sources.load_gazetteer)
CAPTION_START = (sentences.after_dateline,)
SENTENCE_BREAKS = (
    sentences.after_end_mark,
    sentences.after_dated_clause,
    sentences.at_stock_tag,
    sentences.after_background,
)
BEFORE_NAMES = (
    removals.remove_asides,
    removals.remove_dates,
    removals.remove_work_titles,
    models.replace_models,
)
NAMES = (
    places.remove_named_place,
    modifiers.remove_modifier,
    classes.replace_by_event,  # an event is no place: before location_phrases
    classes.remove_titled_work,
    places.remove_location_phrase,
    places.remove_stray_place,
    classes.keep_title,
    classes.replace_by_class,
)
AFTER_NAMES = (
    classes.remove_event_names,
    removals.remove_numbers,
    coordinations.merge_coordinations,
    modifiers.remove_modifying_replacements,
    punctuation.remove_orphans,
)
OUTPUT = (punctuation.tidy_punctuation,)

HOOKS = (KNOWLEDGE, CAPTION_START, SENTENCE_BREAKS, BEFORE_NAMES, NAMES, AFTER_NAMES, OUTPUT)
RULES = rules_of(HOOKS)
RULE_NAMES = tuple(rule.name for rule in RULES)
