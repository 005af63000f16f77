"""The saved form of a model: a directory nothing needs unpickling to read (docs/design.md).

model.safetensors   the weights (a captioner's tied word matrix is one tensor, saved once; a
                    retriever that fine-tuned its CNN holds the CNN's, image.backbone.*)
config.json         {"format_version": 2, "kind": "captioner", "config": CaptionerConfig fields,
                     "features": the CNN and input size its image features were made with}
                    {"format_version": 2, "kind": "retriever", "config": RetrieverConfig
                     fields, "audio": the MFCC settings the model was trained with, or null}
                    {"format_version": 2, "kind": "fluency", "config": FluencyConfig fields}
                    (captioners saved before retrievers existed have no "kind"; version 1
                    named feature_map `features`; both load the same. A captioner without
                    "features", saved before it was recorded, was trained on the features
                    job's defaults of then: it reads as LEGACY_FEATURES, efficientnet-lite0
                    at 256 px. The entry is an addition to version 2, not a version 3: code
                    from before it still loads a captioner that has one, at 256 px whatever
                    it says)
vocab.json          the vocabulary (captioners and text retrievers)
vocab.<view>.json   a fluency classifier's vocabulary of each view (zh_words, zh_pos, ...)

save_model(model, vocab, "out/model", features)   # FeatureSettings, from features.json
model, vocab = load_model("out/model")   # in eval mode
features = load_feature_settings("out/model")   # how to compute its image features
save_retriever(model, "out/retriever", audio=features_config.model_dump())
model, vocab, audio = load_retriever("out/retriever")   # vocab None for speech
save_fluency(model, vocabs, "out/fluency")
model, vocabs = load_fluency("out/fluency")   # vocabs: view -> Vocabulary
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

import torch
from pydantic import ConfigDict, Field
from safetensors.torch import load_file, save_file
from torch import nn

from conceptual.config import Config
from conceptual.fluency.model import VIEWS, FluencyConfig, FluencyModel
from conceptual.models.captioner import Captioner, CaptionerConfig
from conceptual.models.retriever import DualEncoder, RetrieverConfig
from conceptual.models.vocab import Vocabulary
from conceptual.vision.cnn import CNN_MODELS, CnnModel

# Raise it when a saved directory's layout or meaning changes, so old code refuses new models.
FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)
WEIGHTS, CONFIG, VOCAB = "model.safetensors", "config.json", "vocab.json"
LOADERS = {"captioner": "load_model", "retriever": "load_retriever", "fluency": "load_fluency"}

M = TypeVar("M", bound=nn.Module)


class FeatureSettings(Config):
    """How a captioner's image features were made (the features job's `cnn.model` and
    `image_size`, from its features.json): captioning an image must compute the same grid."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: CnnModel
    image_size: int = Field(gt=0)


# What a captioner saved without "features" was trained on: the features job's defaults then.
LEGACY_FEATURES = FeatureSettings(model="efficientnet-lite0", image_size=256)


def save_model(
    model: Captioner,
    vocab: Vocabulary,
    directory: str | Path,
    features: FeatureSettings | None = None,
) -> Path:
    """`features`: how the image features it was trained on were made; None (made-up
    features) saves none, and the model then reads as LEGACY_FEATURES."""
    _check_vocabulary(model.config.vocab_size, vocab)
    extra = {} if features is None else {"features": features.model_dump()}
    return _save(model, "captioner", extra, vocab, directory)


def load_model(
    directory: str | Path, device: str | torch.device = "cpu"
) -> tuple[Captioner, Vocabulary]:
    saved = _read(directory, "captioner")
    model = Captioner(CaptionerConfig.model_validate(saved["config"]))
    vocab = Vocabulary.from_json((Path(directory) / VOCAB).read_text())
    return _load_weights(model, directory, device), vocab


def load_feature_settings(directory: str | Path) -> FeatureSettings:
    """How to compute a saved captioner's image features (LEGACY_FEATURES when it saved
    none); ValueError naming the CNN when it is not one this code loads."""
    saved = _read(directory, "captioner").get("features")
    if saved is None:
        return LEGACY_FEATURES
    if saved.get("model") not in CNN_MODELS:
        raise ValueError(
            f"the captioner at {directory} was trained on features of the CNN "
            f"{saved.get('model')!r}, which this code cannot load (it loads "
            f"{', '.join(CNN_MODELS)}): caption with the version of conceptual that trained it"
        )
    return FeatureSettings.model_validate(saved)


def save_retriever(
    model: DualEncoder,
    directory: str | Path,
    vocab: Vocabulary | None = None,
    audio: dict[str, Any] | None = None,
) -> Path:
    """`vocab` for a text retriever (and only then); `audio`, for a speech retriever, the
    feature settings (conceptual.speech.features.AudioFeatureConfig) its MFCCs were made with,
    so that whoever loads it computes the same."""
    if model.config.modality == "text":
        if vocab is None:
            raise ValueError("a text retriever is saved with its vocabulary")
        _check_vocabulary(model.config.vocab_size, vocab)
    elif vocab is not None:
        raise ValueError("a speech retriever has no vocabulary to save")
    return _save(model, "retriever", {"audio": audio}, vocab, directory)


def load_retriever(
    directory: str | Path, device: str | torch.device = "cpu"
) -> tuple[DualEncoder, Vocabulary | None, dict[str, Any] | None]:
    """The model in eval mode, its vocabulary (None for speech) and the audio settings saved
    with it. A model that fine-tuned its CNN (model.image_backbone=finetune) loads whole from
    here too: its config says so, and its weights hold the CNN's."""
    saved = _read(directory, "retriever")
    model = DualEncoder(RetrieverConfig.model_validate(saved["config"]))
    vocab_file = Path(directory) / VOCAB
    vocab = Vocabulary.from_json(vocab_file.read_text()) if vocab_file.exists() else None
    return _load_weights(model, directory, device), vocab, saved.get("audio")


def save_fluency(model: FluencyModel, vocabs: dict[str, Vocabulary], directory: str | Path) -> Path:
    for view in VIEWS:
        _check_vocabulary(model.config.vocab_sizes[view], vocabs[view])
    directory = _save(model, "fluency", {}, None, directory)
    for view in VIEWS:
        (directory / f"vocab.{view}.json").write_text(vocabs[view].to_json())
    return directory


def load_fluency(
    directory: str | Path, device: str | torch.device = "cpu"
) -> tuple[FluencyModel, dict[str, Vocabulary]]:
    """The model in eval mode and each view's vocabulary."""
    saved = _read(directory, "fluency")
    model = FluencyModel(FluencyConfig.model_validate(saved["config"]))
    vocabs = {
        view: Vocabulary.from_json((Path(directory) / f"vocab.{view}.json").read_text())
        for view in VIEWS
    }
    return _load_weights(model, directory, device), vocabs


def _check_vocabulary(vocab_size: int, vocab: Vocabulary) -> None:
    if vocab_size != len(vocab):
        raise ValueError(f"the model has {vocab_size} words, the vocabulary {len(vocab)}")


def _save(
    model: nn.Module,
    kind: str,
    extra: dict[str, Any],
    vocab: Vocabulary | None,
    directory: str | Path,
) -> Path:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    weights = {name: tensor.contiguous() for name, tensor in model.state_dict().items()}
    save_file(weights, directory / WEIGHTS, metadata={"format_version": str(FORMAT_VERSION)})
    config = {
        "format_version": FORMAT_VERSION,
        "kind": kind,
        "config": model.config.model_dump(),
        **extra,
    }
    (directory / CONFIG).write_text(json.dumps(config, indent=2) + "\n")
    if vocab is not None:
        (directory / VOCAB).write_text(vocab.to_json())
    return directory


def _read(directory: str | Path, kind: str) -> dict[str, Any]:
    """config.json, once its version is one this code reads and it holds a `kind`."""
    path = Path(directory) / CONFIG
    saved = json.loads(path.read_text())
    version = saved.get("format_version")
    if version not in READABLE_VERSIONS:
        raise ValueError(
            f"{path} has format version {version}; this code reads versions "
            f"{', '.join(map(str, READABLE_VERSIONS))} (load it with the version of conceptual "
            "that saved it)"
        )
    saved_kind = saved.get("kind", "captioner")  # captioners were saved before kinds
    if saved_kind != kind:
        loader = LOADERS.get(saved_kind)
        raise ValueError(
            f"{directory} holds a {saved_kind}, not a {kind}"
            + (f" (load it with {loader})" if loader else "")
        )
    return saved


def _load_weights(model: M, directory: str | Path, device: str | torch.device) -> M:
    model.load_state_dict(load_file(Path(directory) / WEIGHTS, device=str(device)))
    return model.to(device).eval()
