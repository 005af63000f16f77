"""Harvesting candidates from web archives, the paper's first step, without Ray: WARC and WAT
records read as they stream (archives.py, with fastwarc), HTML pages parsed as a browser
parses them (html.py, with resiliparse) under a budget of memory and time (budget.py), WAT
link lists read as Common Crawl writes them (wat.py), and the rules that make an `<img>` a
candidate, with the reasons that count the rest (pages.py). pipelines/curation/harvest.py runs it over
many files on Ray Data."""

from importlib import import_module

# Each name is imported from its module when first used, not here: the parser's process
# runs html.py alone (`python -m conceptual.harvest.html`), and needs neither Arrow nor
# pydantic, which the other modules load.
_MODULES = {"harvest_archive": "archives"} | dict.fromkeys(
    ("FILE_REASONS", "IMAGE_REASONS", "RECORD_REASONS", "HarvestRules", "Image", "Page", "judge"),
    "pages",
)
__all__ = list(_MODULES)


def __getattr__(name: str):
    if name not in _MODULES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{_MODULES[name]}"), name)
