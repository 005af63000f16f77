"""spaCy's attribute ruler, matched by lookups: the matches its Matcher finds, in its order,
in a fifth of the time.

The English pipeline's `attribute_ruler` gives each token its coarse POS, morphology and
some lemmas from the tagger's fine tag, its word and its dependency (179 patterns). spaCy
finds their matches with its general Matcher, which tries every pattern at every token: 15%
of a caption's parse. Those patterns test a token's LOWER, TAG, DEP or IS_SPACE, each by a
value, IN, NOT_IN or REGEX, over a fixed run of tokens (one or two). `AttributeMatcher`
indexes them by a value their first token requires, so each token is tried against the few
that can match it. `use_attribute_matcher` installs one where every pattern of a ruler is of
that kind; a ruler with any other (an operator, another attribute) keeps spaCy's Matcher.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable

from spacy.attrs import DEP, IS_SPACE, LOWER, TAG
from spacy.strings import get_string_id

# The token attributes the patterns test, as Doc.to_array's columns, in the order the index
# prefers them (the most selective first).
COLUMNS = {"LOWER": 0, "TAG": 1, "DEP": 2, "IS_SPACE": 3}
ARRAY_ATTRS = [LOWER, TAG, DEP, IS_SPACE]

# (a token's attribute row, the doc's strings) -> whether a test holds
Test = Callable[[list, object], bool]


def attribute_test(name: str, value) -> tuple[Test, frozenset | None]:
    """One attribute's test in a token spec, and the keys it admits (None: any, for the
    index). Raises KeyError or ValueError for what the index does not read."""
    column = COLUMNS[name]
    if name == "IS_SPACE":
        if not isinstance(value, bool):
            raise ValueError(f"IS_SPACE by {value!r}")
        return (lambda row, strings: row[column] == value), frozenset({int(value)})
    if isinstance(value, str):
        key = get_string_id(value)
        return (lambda row, strings: row[column] == key), frozenset({key})
    if not isinstance(value, dict) or len(value) != 1:
        raise ValueError(f"{name} by {value!r}")
    ((operator, operand),) = value.items()
    if operator == "IN":
        keys = frozenset(map(get_string_id, operand))
        return (lambda row, strings: row[column] in keys), keys
    if operator == "NOT_IN":
        keys = frozenset(map(get_string_id, operand))
        return (lambda row, strings: row[column] not in keys), None
    if operator == "REGEX":
        pattern = re.compile(operand)
        return (lambda row, strings: pattern.search(strings[row[column]]) is not None), None
    raise ValueError(f"{name} by {operator}")


def conjunction(tests: list[Test]) -> Test:
    """One test that holds where all of them do."""
    if len(tests) <= 1:
        return tests[0] if tests else lambda row, strings: True
    first, rest = tests[0], conjunction(tests[1:])
    return lambda row, strings: first(row, strings) and rest(row, strings)


class AttributeMatcher:
    """The matches of an AttributeRuler's patterns in a doc, as `AttributeRuler.match`
    gives them: (pattern number, its key, start, end), sorted. Each pattern is indexed by
    one attribute value its first token requires (its word, else its tag, dependency or
    whether it is a space), and tested on the rest; one that requires no value (a REGEX)
    is tried everywhere."""

    def __init__(self, ruler):
        self.index: list[dict[int, list]] = [defaultdict(list) for _ in COLUMNS]
        self.anywhere: list = []
        for number, entry in enumerate(ruler.patterns):
            key = get_string_id(str(number))  # the ruler's key for its pattern number
            for pattern in entry["patterns"]:
                self._add(number, key, pattern)

    def _add(self, number: int, key: int, pattern: list) -> None:
        if not pattern:
            raise ValueError("an empty pattern")
        specs = []
        for spec in pattern:
            if not isinstance(spec, dict) or not spec:
                raise ValueError(f"token spec {spec!r}")
            specs.append(
                {COLUMNS[name]: attribute_test(name, value) for name, value in spec.items()}
            )
        indexed = [(column, keys) for column, (_, keys) in sorted(specs[0].items()) if keys]
        column, keys = indexed[0] if indexed else (None, None)
        first = conjunction([test for c, (test, _) in specs[0].items() if c != column])
        rest = [conjunction([test for test, _ in spec.values()]) for spec in specs[1:]]
        entry = (number, key, first, rest)
        if column is None:
            self.anywhere.append(entry)
        for value in keys or ():
            self.index[column][value].append(entry)

    def __call__(self, doc) -> list[tuple[int, int, int, int]]:
        rows = doc.to_array(ARRAY_ATTRS).tolist()
        strings, size, found = doc.vocab.strings, len(rows), set()
        for start, row in enumerate(rows):
            entries = list(self.anywhere)
            for by_value, value in zip(self.index, row):
                entries += by_value.get(value, ())
            for number, key, first, rest in entries:
                end = start + 1 + len(rest)
                if end > size or not first(row, strings):
                    continue
                if not rest or all(t(r, strings) for t, r in zip(rest, rows[start + 1 : end])):
                    found.add((number, key, start, end))
        return sorted(found)


def use_attribute_matcher(nlp) -> None:
    """Match the pipeline's attribute ruler by lookups, where it has one whose patterns
    the index reads."""
    if "attribute_ruler" not in nlp.pipe_names:
        return
    ruler = nlp.get_pipe("attribute_ruler")
    try:
        ruler.match = AttributeMatcher(ruler)
    except (KeyError, ValueError):
        return  # a pattern of another kind: spaCy's Matcher stays
