"""Manners toward what a server asks of crawlers: the X-Robots-Tag directives an image
response opts out with, for every agent or for ours (vision/fetch.py rejects such an image
as `opted_out` before reading its body, as img2dataset does).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# X-Robots-Tag directives that carry a value after a colon ("max-snippet: 20"): the name
# before their colon is no user agent.
VALUED_DIRECTIVES = frozenset(
    {"max-snippet", "max-image-preview", "max-video-preview", "unavailable_after"}
)


def agent_token(user_agent: str) -> str:
    """The product token of a User-Agent, lowercased: "conceptual/0.1 (...)" -> "conceptual"."""
    product = user_agent.split(maxsplit=1)[0] if user_agent.strip() else ""
    return product.split("/", 1)[0].lower()


def opt_out_directive(
    header_values: Sequence[str], agent: str, directives: Sequence[str]
) -> str | None:
    """The first of `directives` that the X-Robots-Tag header values (one per header) give
    every agent or `agent` (a lowercased product token), as "noai" or "agent: noai"; None
    when there is none. In a value, directives are separated by commas or semicolons, and
    "name: d1, d2" gives the directives after the name to that agent only, up to the next
    name ("otherbot: noindex, conceptual: noai"). `none` is Google's `noindex, nofollow`,
    so it opts out wherever `noindex` does."""
    wanted = {directive.strip().lower() for directive in directives}
    for value in header_values:
        scope: str | None = None  # a bare directive is for every agent
        for item in re.split(r"[,;]", value):
            name, colon, rest = item.partition(":")
            name = name.strip().lower()
            if colon and name not in VALUED_DIRECTIVES:
                scope, item = name, rest
            directive = item.strip().lower()
            meant = {"noindex", "nofollow"} if directive == "none" else {directive}
            if meant & wanted and scope in (None, agent):
                return directive if scope is None else f"{scope}: {directive}"
    return None
