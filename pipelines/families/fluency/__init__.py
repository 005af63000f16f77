"""The fluency family: its classifier's recipe and evaluation, and the comparison of the
approaches to captioning in another language."""

from __future__ import annotations

from typing import TYPE_CHECKING

from conceptual.pipelines.families.family import Family

if TYPE_CHECKING:
    from conceptual.models.saving import SavedFluency
    from conceptual.pipelines.training.training import Recipe


class FluencyFamily(Family):
    def recipe(self) -> Recipe:
        from conceptual.pipelines.families.fluency.train_fluency import RECIPE

        return RECIPE

    def saved(self) -> type[SavedFluency]:
        from conceptual.models.saving import SavedFluency

        return SavedFluency


FAMILY = FluencyFamily(
    name="fluency",
    config_file="train_fluency.yaml",
    registers="fluency-zh",
    example="epochs=4 threshold=0.45",
    jobs={"train": "train_fluency", "compare": "compare_fluency"},
)
