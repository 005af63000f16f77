"""Harvesting candidates from web archives, the paper's first step, without Ray: WARC and WAT
records read as they stream (archives.py, with fastwarc), HTML pages parsed as a browser
parses them (html.py, with resiliparse), WAT link lists read as Common Crawl writes them
(wat.py), and the rules that make an `<img>` a candidate, with the reasons that count the
rest (pages.py). pipelines/harvest.py runs it over many files on Ray Data."""

from conceptual.harvest.archives import harvest_archive
from conceptual.harvest.pages import (
    FILE_REASONS,
    IMAGE_REASONS,
    RECORD_REASONS,
    HarvestRules,
    Image,
    Page,
    judge,
)

__all__ = [
    "FILE_REASONS",
    "IMAGE_REASONS",
    "RECORD_REASONS",
    "HarvestRules",
    "Image",
    "Page",
    "harvest_archive",
    "judge",
]
