"""Cleaning an alt-text before the text filters judge it (text/filters.py): HTML entities
decoded once, NFC, whitespace collapsed, and stock-photo boilerplate cropped at either end
("Stock Photo - A man riding a horse" -> "A man riding a horse"), repeatedly.
"""

from __future__ import annotations

import html
import re
import unicodedata

_STOCK = r"(?:photo(?:graph)?|image|picture|footage|illustration|vector)s?"
# Phrases cropped at either end, with the separators around them.
_CROP_PHRASES = "|".join(
    [
        r"click (?:here )?to enlarge(?: (?:picture|image|photo))?",
        rf"(?:(?:free|hd|high[- ]res(?:olution)?) )?(?:royalty[- ]free )?stock {_STOCK}"
        r"(?:,? (?:and|&) (?:images|pictures|photos))?",
        rf"royalty[- ]free(?: {_STOCK})?",
        r"(?:getty ?images|shutterstock|alamy|istock(?:photo)?|dreamstime|depositphotos|123rf"
        rf"|adobe stock|bigstock(?:photo)?|pexels|unsplash|pixabay)(?: (?:stock )?{_STOCK})?",
    ]
)
_SEPARATORS = r"[\s\-\u2013\u2014:|,.(\[/]"
_CROP_PREFIX = re.compile(
    rf"^(?:(?:{_CROP_PHRASES})(?:{_SEPARATORS}+|$)|(?:photo|image|picture|pic|img)\s*:\s*)",
    re.IGNORECASE,
)
_CROP_SUFFIX = re.compile(
    # Each (?<!...) starts a match only at the first character of a run of separators or
    # whitespace: without it a long run ("- - - ...", or form feeds, which cleaning does not
    # collapse) is rescanned from every position in it, quadratic time.
    rf"(?:^|(?<!{_SEPARATORS}){_SEPARATORS}+)(?:{_CROP_PHRASES})[\s.)\]]*$"
    # a credit in brackets at the end: "(Photo: Reuters)", "(Image courtesy of NASA)"
    r"|(?<!\s)\s*[(\[](?:photo|image|picture|credit|source|courtesy)\b[^()\[\]]{0,80}[)\]]\.?$"
    # a bare label after a dash or pipe: "A duck on a branch - photo"
    r"|(?<!\s)\s*[-\u2013\u2014|]\s*(?:photo|image|picture|pic)s?\.?$",
    re.IGNORECASE,
)


# Space, tab, CR, LF and Unicode spaces. Other separators (form feed, U+2028...) are left
# for the control_characters filter.
_WHITESPACE = re.compile(r"[ \t\n\r\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]+")

# Each round crops one prefix and one suffix; real alt-text needs one or two rounds, and a
# bound keeps text made of nothing but boilerplate from costing quadratic time.
_MAX_CROP_ROUNDS = 4


def clean_alt_text(text: str, crop_boilerplate: bool) -> str:
    """Decode HTML entities once, NFC-normalize, collapse whitespace and crop boilerplate
    prefixes and suffixes, repeatedly ("Stock Photo - A barn - Getty Images" crops twice).
    Callers bound the length first; TextFilters.check does."""
    if "&" in text:
        text = html.unescape(text)
    if not unicodedata.is_normalized("NFC", text):
        text = unicodedata.normalize("NFC", text)
    text = _WHITESPACE.sub(" ", text).strip(" ")
    for _ in range(_MAX_CROP_ROUNDS if crop_boilerplate else 0):
        cropped = _CROP_SUFFIX.sub("", _CROP_PREFIX.sub("", text, count=1), count=1).strip()
        if cropped == text:
            break
        text = cropped
    return text
