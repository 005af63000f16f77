"""The captioner family: its recipe, its evaluation, its comparison of the four variants."""

from __future__ import annotations

from typing import TYPE_CHECKING

from conceptual.pipelines.families.family import Captioning, Family

if TYPE_CHECKING:
    from conceptual.models.saving import SavedCaptioner
    from conceptual.pipelines.training.training import Recipe


class CaptionerFamily(Family):
    def recipe(self) -> Recipe:
        from conceptual.pipelines.families.captioner.train_captioner import RECIPE

        return RECIPE

    def saved(self) -> type[SavedCaptioner]:
        from conceptual.models.saving import SavedCaptioner

        return SavedCaptioner


FAMILY = CaptionerFamily(
    name="captioner",
    config_file="train_captioner.yaml",
    registers="captioner, captioner-zh for language=zh",
    example="model.architecture=rnn epochs=20",
    jobs={
        "train": "train_captioner",
        "evaluate": "evaluate_captioner",
        "compare": "compare_captioners",
    },  # fmt: skip
    captioning=(
        Captioning("en", "Captioner", "captioner"),
        Captioning("zh", "CaptionerZh", "captioner-zh", language="zh"),
    ),
)
