"""The two rejections every caption check gives first, under the same reasons wherever a
caption is judged (the text filters, text/filters.py; a released caption,
pipelines/released.py; the speech job's caption, pipelines/speech.py): `empty` and
`too_long`. They bound what the other checks see. Nothing heavy is imported here: the
released captions and the speech job check bounds without loading the text filters.
"""

from __future__ import annotations

from conceptual.records import Rejection

BOUND_REASONS = ("empty", "too_long")


def out_of_bounds(text: str | None, max_chars: int, nothing: str) -> Rejection | None:
    """`empty` (None or blank: `nothing` says what was missing) or `too_long` (more than
    `max_chars` characters), or None."""
    if text is None or not text.strip():
        return Rejection("empty", nothing)
    if len(text) > max_chars:
        return Rejection("too_long", f"{len(text)} characters > {max_chars}")
    return None
