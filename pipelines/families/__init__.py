"""Every model family the platform trains, one package each (pipelines/families/<name>/),
listed once in FAMILIES: the family table the jobs, the pipeline job and serving read. What a
family is, and what its methods do, is family.py's `Family`. The table imports each family's
folder directly, which loads none of its code (a folder's __init__.py is its docstring; the
methods import the code when called)."""

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

# The two families whose code others reuse (Family.runs_as).
CAPTIONER = Family(
    captioner,
    ("train_captioner", "evaluate_captioner", "compare_captioners"),
    registers="captioner, captioner-zh for language=zh",
    example="model.architecture=rnn epochs=20",
    captioning=(
        Captioning("en", "Captioner", "captioner"),
        Captioning("zh", "CaptionerZh", "captioner-zh", language="zh"),
    ),
)
RETRIEVER = Family(
    retriever,
    ("train_retriever", "evaluate_retriever", "compare_retrievers"),
    registers="retriever-<modality>",
    example="modality=text loss=triplet epochs=4",
    search=(
        Search("text", "TextRetriever", "retriever-text"),
        Search("speech", "SpeechRetriever", "retriever-speech", modality="speech"),
    ),
    pipeline_step="train_retriever",
)

FAMILIES: dict[str, Family] = {
    family.name: family
    for family in (
        CAPTIONER,
        RETRIEVER,
        Family(
            fluency,
            ("train_fluency", "compare_fluency"),
            registers="fluency-zh",
            example="epochs=4 threshold=0.45",
        ),
        Family(
            contrastive,
            ("train_contrastive", "evaluate_contrastive", "compare_contrastive"),
            registers="contrastive",
            example="batch_size=128 epochs=10 model.embed_dim=256",
            runs_as=RETRIEVER,
            search=(Search("contrastive", "ContrastiveRetriever", "contrastive"),),
            pipeline_step="train_contrastive",
        ),
        Family(
            attend,
            ("train_attend", "evaluate_attend"),
            registers="captioner-attend, captioner-attend-zh for language=zh",
            example="model.d_model=256 epochs=20",
            runs_as=CAPTIONER,
            captioning=(Captioning("attend", "CaptionerAttend", "captioner-attend"),),
        ),
    )
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
