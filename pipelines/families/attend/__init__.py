"""The attend family: a Show, Attend and Tell captioner (model.py), trained, evaluated and
served through the captioner family's code and command lines, saved as its own kind."""

from __future__ import annotations

from typing import TYPE_CHECKING

from conceptual.pipelines.families.captioner import CaptionerFamily
from conceptual.pipelines.families.family import Captioning

if TYPE_CHECKING:
    from conceptual.models.saving import SavedCaptioner
    from conceptual.pipelines.training.training import Recipe


class AttendFamily(CaptionerFamily):
    def recipe(self) -> Recipe:
        from conceptual.pipelines.families.attend.model import RECIPE

        return RECIPE

    def saved(self) -> type[SavedCaptioner]:
        from conceptual.pipelines.families.attend.model import SavedAttend

        return SavedAttend


FAMILY = AttendFamily(
    name="attend",
    config_file="train_attend.yaml",
    registers="captioner-attend, captioner-attend-zh for language=zh",
    example="model.d_model=256 epochs=20",
    jobs={"train": "train_attend", "evaluate": "evaluate_attend"},
    runs_as="captioner",
    captioning=(Captioning("attend", "CaptionerAttend", "captioner-attend"),),
)
