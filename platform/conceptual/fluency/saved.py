"""The fluency classifier's saved form: models/saving.py's directory (weights and
config.json of kind "fluency", its FluencyConfig) and a vocabulary per view,
vocab.<view>.json. `saving.load` reads it as any kind (families.py names SavedFluency).

    save_fluency(model, vocabs, "out/fluency")
    saved = load("out/fluency", kind=SavedFluency)   # saved.model, saved.vocabs
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch

from conceptual.fluency.model import VIEWS, FluencyConfig, FluencyModel
from conceptual.models.saving import Saved, check_vocabulary, load_weights, save
from conceptual.models.vocab import Vocabulary


def save_fluency(model: FluencyModel, vocabs: dict[str, Vocabulary], directory: str | Path) -> Path:
    for view in VIEWS:
        check_vocabulary(model.config.vocab_sizes[view], vocabs[view])
    directory = save(model, SavedFluency.kind, {}, None, directory)
    for view in VIEWS:
        (directory / f"vocab.{view}.json").write_text(vocabs[view].to_json())
    return directory


@dataclass(frozen=True)
class SavedFluency(Saved):
    kind: ClassVar[str] = "fluency"
    model: FluencyModel
    vocabs: dict[str, Vocabulary]  # view -> its vocabulary

    @classmethod
    def read(
        cls, directory: Path, settings: dict[str, Any], device: str | torch.device
    ) -> SavedFluency:
        model = FluencyModel(FluencyConfig.model_validate(settings["config"]))
        vocabs = {
            view: Vocabulary.from_json((directory / f"vocab.{view}.json").read_text())
            for view in VIEWS
        }
        return cls(load_weights(model, directory, device), directory, settings, vocabs)
