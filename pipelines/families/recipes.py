"""Each family's recipe (pipelines/training/training.py's Recipe), by its name in the family
table (conceptual.families), imported directly: what trains a family, for the training jobs,
the pipeline job's family steps and the ablation."""

from __future__ import annotations

from conceptual.families import Family
from conceptual.pipelines.families.captioner.train_captioner import RECIPE as CAPTIONER
from conceptual.pipelines.families.contrastive.train_contrastive import RECIPE as CONTRASTIVE
from conceptual.pipelines.families.fluency.train_fluency import RECIPE as FLUENCY
from conceptual.pipelines.families.retriever.train_retriever import RECIPE as RETRIEVER
from conceptual.pipelines.training.training import Recipe

RECIPES: dict[str, Recipe] = {
    "captioner": CAPTIONER,
    "retriever": RETRIEVER,
    "fluency": FLUENCY,
    "contrastive": CONTRASTIVE,
}


def recipe(family: Family) -> Recipe:
    """What trains `family`."""
    return RECIPES[family.name]
