"""What the platform may show of a URI: never the credentials in it.

Tracking URIs (`http://user:pass@host/`), storage URIs and image URLs can carry userinfo;
everything the platform prints, logs, stores in a rejection or returns over HTTP goes
through `redact` first.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

# scheme://userinfo@ anywhere in a text (an error message, a config value can quote a URI):
# the userinfo runs to the authority's last `@`, so a password holding an `@` goes whole. A
# scheme starts only where a word does: tried inside a run of letters, the pattern took time
# quadratic in its length (1.7 s for a 20,000-letter word in a log line).
_USERINFO_IN_TEXT = re.compile(
    r"(?<![A-Za-z0-9+.\-])(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)[^/?#\s]*@"
)


def redact(uri: str) -> str:
    """`uri` without its userinfo (`http://user:pass@host/x` -> `http://***@host/x`)."""
    try:
        parts = urlsplit(uri)
    except ValueError:
        return redact_text(uri)
    if "@" not in parts.netloc:
        return uri
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"***@{host}"))


def redact_text(text: str) -> str:
    """Every `scheme://userinfo@` in free text (an exception message) with the userinfo hidden."""
    return _USERINFO_IN_TEXT.sub(lambda m: f"{m.group('scheme')}***@", text)
