"""The saved form of a captioner: a directory nothing needs unpickling to read (docs/design.md).

model.safetensors   the weights (the tied word matrix is one tensor, saved once)
config.json         {"format_version": 2, "config": CaptionerConfig fields}
                    (version 1 named feature_map `features`; it loads the same)
vocab.json          the vocabulary

save_model(model, vocab, "out/model")
model, vocab = load_model("out/model")   # in eval mode
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from conceptual.models.captioner import Captioner, CaptionerConfig
from conceptual.models.vocab import Vocabulary

# Raise it when a saved directory's layout or meaning changes, so old code refuses new models.
FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)
WEIGHTS, CONFIG, VOCAB = "model.safetensors", "config.json", "vocab.json"


def save_model(model: Captioner, vocab: Vocabulary, directory: str | Path) -> Path:
    if model.config.vocab_size != len(vocab):
        raise ValueError(
            f"the model has {model.config.vocab_size} words, the vocabulary {len(vocab)}"
        )
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    weights = {name: tensor.contiguous() for name, tensor in model.state_dict().items()}
    save_file(weights, directory / WEIGHTS, metadata={"format_version": str(FORMAT_VERSION)})
    config = {"format_version": FORMAT_VERSION, "config": model.config.model_dump()}
    (directory / CONFIG).write_text(json.dumps(config, indent=2) + "\n")
    (directory / VOCAB).write_text(vocab.to_json())
    return directory


def load_model(
    directory: str | Path, device: str | torch.device = "cpu"
) -> tuple[Captioner, Vocabulary]:
    directory = Path(directory)
    saved = json.loads((directory / CONFIG).read_text())
    version = saved.get("format_version")
    if version not in READABLE_VERSIONS:
        raise ValueError(
            f"{directory / CONFIG} has format version {version}; this code reads versions "
            f"{', '.join(map(str, READABLE_VERSIONS))} (load it with the version of conceptual "
            "that saved it)"
        )
    model = Captioner(CaptionerConfig.model_validate(saved["config"]))
    model.load_state_dict(load_file(directory / WEIGHTS, device=str(device)))
    vocab = Vocabulary.from_json((directory / VOCAB).read_text())
    return model.to(device).eval(), vocab
