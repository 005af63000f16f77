"""What a rule is: a name that `disabled_rules` switches off, what it removes or replaces,
the labels it records, the config keys it reads, and an example with its tests; and its
steps, the parts it plays at the hooks of hooks.py.

    DATES = Rule("dates", "dates and times holding a number", labels=("DATE", "TIME"), ...)

    @DATES.step
    def remove_dates(doc, edits, know): ...

A rule may play a part at several hooks (`punctuation` tidies the parse and the output);
a step that belongs to two rules runs only when both are on (`steps_of`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    """One rule of the transformation. `example`: a text and its caption with every rule
    on, which the caption without this rule differs from (tests/unit/curation/test_hypernymize.py
    checks both for every registered rule)."""

    name: str
    does: str  # what it removes or replaces, in a line
    example: tuple[str, str]
    # the labels its removals and replacements record, besides a name's own label
    labels: tuple[str, ...] = ()
    config: tuple[str, ...] = ()  # the HypernymConfig keys it reads

    def step(self, run: Callable) -> RuleStep:
        """Registers a function as this rule's step."""
        return RuleStep((self,), run)


@dataclass(frozen=True)
class RuleStep:
    """A rule's part at one hook: `run` runs when every one of `rules` is on."""

    rules: tuple[Rule, ...]
    run: Callable


def steps_of(*rules: Rule) -> Callable[[Callable], RuleStep]:
    """Registers a function as a step of several rules, run only when all are on."""
    return lambda run: RuleStep(rules, run)


def rules_of(hooks: Iterable[Iterable[RuleStep]]) -> tuple[Rule, ...]:
    """The rules the hooks' steps belong to, each once, in the order they first run."""
    return tuple(dict.fromkeys(rule for hook in hooks for step in hook for rule in step.rules))


def running(steps: Iterable[RuleStep], disabled: Iterable[str]) -> list[Callable]:
    """The functions of the steps whose rules are all on, in their order."""
    off = set(disabled)
    return [step.run for step in steps if not any(rule.name in off for rule in step.rules)]
