"""Every model family the platform trains, one package each (pipelines/families/<name>/),
listed once in FAMILIES: the family table the jobs, the pipeline job and serving read. What a
family is, and what its methods do, is family.py's `Family`; this table imports each family's
declaration directly, which loads none of its code (its methods do, when called)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from conceptual.pipelines.families import attend, captioner, contrastive, fluency, retriever
from conceptual.pipelines.families.family import Captioning, Family, Search, Serving

if TYPE_CHECKING:
    from conceptual.models.saving import Saved

__all__ = [
    "FAMILIES",
    "Captioning",
    "Family",
    "Search",
    "Serving",
    "captionings",
    "family_of",
    "searches",
]

FAMILIES: dict[str, Family] = {
    family.name: family
    for family in (
        captioner.FAMILY,
        retriever.FAMILY,
        fluency.FAMILY,
        contrastive.FAMILY,
        attend.FAMILY,
    )  # fmt: skip
}


def captionings() -> dict[str, Captioning]:
    """Every captioning key the table declares, with its entry: the captioners a service may
    run. Read when asked: a family added is served."""
    return {c.key: c for family in FAMILIES.values() for c in family.captioning}


def searches() -> dict[str, Search]:
    """Every search key the table declares, with its entry: the retrievers a service may
    run. Read when asked: a family added is served."""
    return {s.key: s for family in FAMILIES.values() for s in family.search}


def saved_form(directory: str | Path, of: type[Saved]) -> type[Saved]:
    """The Saved class that reads the model saved in `directory` (its config.json's kind),
    whichever family's form of `of` it is: what a job that takes any captioner (caption,
    recaption) loads it with. ValueError when it holds no form of `of`."""
    from conceptual.models.saving import CONFIG, KINDS

    kind = json.loads((Path(directory) / CONFIG).read_text()).get("kind", "captioner")
    forms = {**KINDS, **{form.kind: form for form in (f.saved() for f in FAMILIES.values())}}
    if kind not in forms or not issubclass(forms[kind], of):
        raise ValueError(f"{directory} holds a {kind}, not a {of.kind}")
    return forms[kind]


def family_of(serving: Serving) -> Family:
    """The family whose champions the captioning or search entry `serving` serves."""
    return next(f for f in FAMILIES.values() if serving in (*f.captioning, *f.search))
