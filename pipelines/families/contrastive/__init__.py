"""The contrastive family: the retriever's code under a CLIP-style objective, saved,
evaluated, indexed and served as a dual encoder (its jobs run the retriever's command lines)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from conceptual.pipelines.families.family import Search
from conceptual.pipelines.families.retriever import RetrieverFamily

if TYPE_CHECKING:
    from conceptual.pipelines.training.training import Recipe


class ContrastiveFamily(RetrieverFamily):
    def recipe(self) -> Recipe:
        from conceptual.pipelines.families.contrastive.train_contrastive import RECIPE

        return RECIPE


FAMILY = ContrastiveFamily(
    name="contrastive",
    config_file="train_contrastive.yaml",
    registers="contrastive",
    example="batch_size=128 epochs=10 model.embed_dim=256",
    jobs={
        "train": "train_contrastive",
        "evaluate": "evaluate_contrastive",
        "compare": "compare_contrastive",
    },  # fmt: skip
    runs_as="retriever",
    search=(Search("contrastive", "ContrastiveRetriever", "contrastive"),),
    pipeline_step="train_contrastive",
)
