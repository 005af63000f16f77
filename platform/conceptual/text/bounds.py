"""The two rejections every caption check gives first, under the same reasons wherever a
caption is judged (the text filters, text/filters.py; a released caption,
pipelines/curation/released.py; the speech job's caption, pipelines/features/speech.py): `empty` and
`too_long`. They bound what the other checks see. `control_characters` is the check for
captions kept as they came (released ones), which no cleaning passes over. Nothing heavy is
imported here: the released captions and the speech job check bounds without loading the
text filters, and a released caption is judged at the curation's text stage (TEXT_STAGE)
without them too.
"""

from __future__ import annotations

import re

from conceptual.records import Rejection

TEXT_STAGE = "text"  # the curation's first stage after reading, where its bounds reject
BOUND_REASONS = ("empty", "too_long")
CONTROL_REASON = "control_characters"  # the text filters' name for the same refusal
# C0 and C1 controls and DEL: NUL, and the ESC and OSC that start a terminal's control
# sequences, have no place in a caption a person reads or a shard's .txt holds.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def out_of_bounds(text: str | None, max_chars: int, nothing: str) -> Rejection | None:
    """`empty` (None or blank: `nothing` says what was missing) or `too_long` (more than
    `max_chars` characters), or None."""
    if text is None or not text.strip():
        return Rejection("empty", nothing)
    if len(text) > max_chars:
        return Rejection("too_long", f"{len(text)} characters > {max_chars}")
    return None


def control_character(text: str) -> Rejection | None:
    """`control_characters` naming the first C0 or C1 control (a tab and a line break too:
    a caption is one line), or None."""
    if match := _CONTROL.search(text):
        return Rejection(CONTROL_REASON, f"character U+{ord(match.group()):04X}")
    return None
