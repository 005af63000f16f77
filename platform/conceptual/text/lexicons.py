"""The word lists the text filters read (text/filters.py), shipped with the package
(conceptual/text/data) or with better_profanity, lowercase; and WORD, what a word of a text
is to them.
"""

from __future__ import annotations

import re
from importlib import resources

WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*")


def read_lines(package: str, *path: str) -> list[str]:
    """Lowercase lines of a list shipped in a package, without `#` comments and blanks."""
    text = resources.files(package).joinpath(*path).read_text(encoding="utf-8")
    lines = (line.split("#")[0].strip().lower() for line in text.splitlines())
    return [line for line in lines if line]


def read_words(name: str) -> list[str]:
    """Whitespace-separated entries of a list in conceptual/text/data."""
    return [word for line in read_lines("conceptual.text", "data", name) for word in line.split()]


def profanity() -> tuple[frozenset[str], dict[str, list[tuple[str, ...]]]]:
    """better_profanity's word list, less our allowlist, split into single words and
    phrases keyed by their first word ("blow job", "ass-fucker" -> ass, fucker). Its own
    matcher takes milliseconds per text; set lookups take microseconds."""
    allowed = {entry.replace("_", " ") for entry in read_words("profanity_allowlist.txt")}
    entries = {
        tuple(WORD.findall(entry))
        for entry in read_lines("better_profanity", "profanity_wordlist.txt")
        if entry not in allowed
    }
    words = frozenset(entry[0] for entry in entries if len(entry) == 1)
    phrases: dict[str, list[tuple[str, ...]]] = {}
    for entry in sorted(entry for entry in entries if len(entry) > 1):
        phrases.setdefault(entry[0], []).append(entry)
    return words, phrases
