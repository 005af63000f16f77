"""The dual-encoder family: its data, its recipe, its evaluation, its comparison."""

from __future__ import annotations

from typing import TYPE_CHECKING

from conceptual.pipelines.families.family import Family, Search

if TYPE_CHECKING:
    from conceptual.models.saving import SavedRetriever
    from conceptual.pipelines.training.training import Recipe


class RetrieverFamily(Family):
    def recipe(self) -> Recipe:
        from conceptual.pipelines.families.retriever.train_retriever import RECIPE

        return RECIPE

    def saved(self) -> type[SavedRetriever]:
        from conceptual.models.saving import SavedRetriever

        return SavedRetriever


FAMILY = RetrieverFamily(
    name="retriever",
    config_file="train_retriever.yaml",
    registers="retriever-<modality>",
    example="modality=text loss=triplet epochs=4",
    jobs={
        "train": "train_retriever",
        "evaluate": "evaluate_retriever",
        "compare": "compare_retrievers",
    },  # fmt: skip
    search=(
        Search("text", "TextRetriever", "retriever-text"),
        Search("speech", "SpeechRetriever", "retriever-speech", modality="speech"),
    ),
    pipeline_step="train_retriever",
)
