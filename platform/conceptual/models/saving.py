"""The saved form of a model: a directory nothing needs unpickling to read (docs/design.md).

model.safetensors   the weights (a captioner's tied word matrix is one tensor, saved once; a
                    retriever that fine-tuned its CNN holds the CNN's, image.backbone.*)
config.json         {"format_version": 2, "kind": "captioner", "config": CaptionerConfig fields,
                     "features": the CNN and input size its image features were made with}
                    (a captioner also saves "decoding": {"beam": B}, the beam its dev scores
                    were decoded at: what serving and the caption job decode at by default;
                    one saved without it reads as DEFAULT_BEAM, the evaluation's default)
                    {"format_version": 2, "kind": "retriever", "config": RetrieverConfig
                     fields, "audio": the MFCC settings the model was trained with, or null,
                     "features": as a captioner's}
                    {"format_version": 2, "kind": "fluency", "config": FluencyConfig fields}
                    (captioners saved before retrievers existed have no "kind"; version 1
                    named feature_map `features`; both load the same. A captioner without
                    "features", saved before it was recorded, was trained on the features
                    job's defaults of then: it reads as LEGACY_FEATURES, efficientnet-lite0
                    at 256 px; a retriever without it reads as None, and whoever embeds an
                    image with it takes the settings of the index it serves. The entry is an
                    addition to version 2, not a version 3: code from before it still loads a
                    model that has one, a captioner at 256 px whatever it says)
vocab.json          the vocabulary (captioners and text retrievers)
captions.arpa       a text retriever's trigram model of its training captions, which the
                    recognizer hears spoken queries with (speech/language_model.py; absent
                    from retrievers trained before it)
vocab.<view>.json   a fluency classifier's vocabulary of each view (zh_words, zh_pos, ...)

save_model(model, vocab, "out/model", features, beam=4)   # FeatureSettings, from features.json
save_retriever(model, "out/retriever", audio=features_config.model_dump(), features=features)
save_fluency(model, vocabs, "out/fluency")   # a fluency classifier: a vocabulary per view
saved = load("out/model")   # whatever kind: saved.model in eval mode, with its preprocessing
saved = load("out/retriever", kind=SavedRetriever)   # ValueError when it holds another kind
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

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
LANGUAGE_MODEL = "captions.arpa"
M = TypeVar("M", bound=nn.Module)


class FeatureSettings(Config):
    """How a model's image features were made (the features job's `cnn.model` and
    `image_size`, from its features.json): captioning or embedding an image must compute the
    same ones."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: CnnModel
    image_size: int = Field(gt=0)


# What a captioner saved without "features" was trained on: the features job's defaults then.
LEGACY_FEATURES = FeatureSettings(model="efficientnet-lite0", image_size=256)
# What a speech retriever's settings were before their defaults moved off the spec's.
LEGACY_AUDIO = {"n_mfcc": 128, "cmvn": False}
LEGACY_RETRIEVER = {"speech_tower": "cnn"}
# The beam a captioner saved without one was chosen at (the training and evaluation default).
DEFAULT_BEAM = 4


def save_model(
    model: Captioner,
    vocab: Vocabulary,
    directory: str | Path,
    features: FeatureSettings | None = None,
    beam: int = DEFAULT_BEAM,
    saved: type[SavedCaptioner] | None = None,
) -> Path:
    """`features`: how the image features it was trained on were made; None (made-up
    features) saves none, and the model then reads as LEGACY_FEATURES. `beam`: the beam its
    scores were decoded at, so that whoever captions with it decodes as it was judged.
    `saved`: the form it is read back as (a family's own SavedCaptioner; by default this)."""
    check_vocabulary(model.config.vocab_size, vocab)
    extra = {**_features_entry(features), "decoding": {"beam": beam}}
    return save(model, (saved or SavedCaptioner).kind, extra, vocab, directory)


def save_retriever(
    model: DualEncoder,
    directory: str | Path,
    vocab: Vocabulary | None = None,
    audio: dict[str, Any] | None = None,
    features: FeatureSettings | None = None,
) -> Path:
    """`vocab` for a text retriever (and only then); `audio`, for a speech retriever, the
    feature settings (conceptual.speech.features.AudioFeatureConfig) its MFCCs were made with,
    so that whoever loads it computes the same; `features`, as save_model's."""
    if model.config.modality == "text":
        if vocab is None:
            raise ValueError("a text retriever is saved with its vocabulary")
        check_vocabulary(model.config.vocab_size, vocab)
    elif vocab is not None:
        raise ValueError("a speech retriever has no vocabulary to save")
    extra = {"audio": audio, **_features_entry(features)}
    return save(model, SavedRetriever.kind, extra, vocab, directory)


@dataclass(frozen=True)
class Saved:
    """A saved model (in eval mode) and what turns a raw input into its input."""

    kind: ClassVar[str]
    model: nn.Module
    directory: Path
    settings: dict[str, Any]  # its config.json

    def _saved_features(self) -> FeatureSettings | None:
        """The CNN settings saved with it, checked only when asked for: evaluating a model
        on features already computed needs no CNN."""
        saved = self.settings.get("features")
        if saved is None:
            return None
        if saved.get("model") not in CNN_MODELS:
            raise ValueError(
                f"the {self.kind} at {self.directory} was trained on features of the CNN "
                f"{saved.get('model')!r}, which this code cannot load (it loads "
                f"{', '.join(CNN_MODELS)}): use the version of conceptual that trained it"
            )
        return FeatureSettings.model_validate(saved)


@dataclass(frozen=True)
class SavedCaptioner(Saved):
    kind: ClassVar[str] = "captioner"
    model: Captioner
    vocab: Vocabulary

    @classmethod
    def build(cls, config: dict[str, Any]) -> Captioner:
        """A new model of this form from its saved config (untrained: what training starts
        from, and what the saved weights load into)."""
        return Captioner(CaptionerConfig.model_validate(config))

    @classmethod
    def read(
        cls, directory: Path, settings: dict[str, Any], device: str | torch.device
    ) -> SavedCaptioner:
        model = cls.build(settings["config"])
        vocab = Vocabulary.from_json((directory / VOCAB).read_text())
        return cls(load_weights(model, directory, device), directory, settings, vocab)

    @property
    def features(self) -> FeatureSettings:
        """How to compute its image features (LEGACY_FEATURES when it saved none);
        ValueError naming the CNN when it is not one this code loads."""
        return self._saved_features() or LEGACY_FEATURES

    @property
    def beam(self) -> int:
        """The beam it was evaluated at (DEFAULT_BEAM for a model saved without one)."""
        return int(self.settings.get("decoding", {}).get("beam", DEFAULT_BEAM))


@dataclass(frozen=True)
class SavedRetriever(Saved):
    """A model that fine-tuned its CNN (model.image_backbone=finetune) loads whole too: its
    config says so, and its weights hold the CNN's; its image input is the photo at
    model.config.photo_size."""

    kind: ClassVar[str] = "retriever"
    model: DualEncoder
    vocab: Vocabulary | None  # None for speech

    @classmethod
    def read(
        cls, directory: Path, settings: dict[str, Any], device: str | torch.device
    ) -> SavedRetriever:
        model = DualEncoder(RetrieverConfig.model_validate(LEGACY_RETRIEVER | settings["config"]))
        vocab_file = directory / VOCAB
        vocab = Vocabulary.from_json(vocab_file.read_text()) if vocab_file.exists() else None
        return cls(load_weights(model, directory, device), directory, settings, vocab)

    @property
    def audio(self) -> dict[str, Any] | None:
        """The MFCC settings (AudioFeatureConfig fields) of a speech retriever; a key it was
        saved without reads as LEGACY_AUDIO has it."""
        audio = self.settings.get("audio")
        return None if audio is None else LEGACY_AUDIO | audio

    @property
    def features(self) -> FeatureSettings | None:
        """How its pooled image vectors were made; None for a retriever saved before they
        were recorded."""
        return self._saved_features()

    @property
    def language_model(self) -> Path | None:
        """A text retriever's caption language model (ARPA), or None."""
        path = self.directory / LANGUAGE_MODEL
        return path if path.is_file() else None


@dataclass(frozen=True)
class SavedFluency(Saved):
    """The fluency classifier (conceptual.fluency.model) and a vocabulary per view."""

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


# The kinds the core reads (its config.json's "kind"), by the class that reads it; a family
# whose models take a form of their own (a Saved subclass in its folder) is loaded with it:
# load(directory, kind=ThatClass), which its Family.load does.
KINDS: dict[str, type[Saved]] = {c.kind: c for c in (SavedCaptioner, SavedRetriever, SavedFluency)}

S = TypeVar("S", bound=Saved)


def load(directory: str | Path, device: str | torch.device = "cpu", kind: type[S] = Saved) -> S:
    """The saved model with its preprocessing, whatever its kind (one of KINDS, or `kind`'s
    own); `kind` (a Saved class) refuses the others."""
    directory = Path(directory)
    settings = _read(directory)
    saved_kind = settings.get("kind", "captioner")  # captioners were saved before kinds
    found = kind if kind is not Saved and saved_kind == kind.kind else KINDS.get(saved_kind)
    if found is None or not issubclass(found, kind):
        wanted = "" if kind is Saved else f", not a {kind.kind}"
        raise ValueError(f"{directory} holds a {saved_kind}{wanted}")
    return found.read(directory, settings, device)


def _features_entry(features: FeatureSettings | None) -> dict[str, Any]:
    return {} if features is None else {"features": features.model_dump()}


def check_vocabulary(vocab_size: int, vocab: Vocabulary) -> None:
    if vocab_size != len(vocab):
        raise ValueError(f"the model has {vocab_size} words, the vocabulary {len(vocab)}")


def save_fluency(model: FluencyModel, vocabs: dict[str, Vocabulary], directory: str | Path) -> Path:
    """A fluency classifier, with the vocabulary of each view (vocab.<view>.json)."""
    for view in VIEWS:
        check_vocabulary(model.config.vocab_sizes[view], vocabs[view])
    directory = save(model, SavedFluency.kind, {}, None, directory)
    for view in VIEWS:
        (directory / f"vocab.{view}.json").write_text(vocabs[view].to_json())
    return directory


def save(
    model: nn.Module,
    kind: str,
    extra: dict[str, Any],
    vocab: Vocabulary | None,
    directory: str | Path,
) -> Path:
    """What every kind saves: the weights, config.json (its `kind`, the model's config and
    `extra`) and the vocabulary, when it has one."""
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


def _read(directory: Path) -> dict[str, Any]:
    """config.json, once its version is one this code reads."""
    path = directory / CONFIG
    saved = json.loads(path.read_text())
    version = saved.get("format_version")
    if version not in READABLE_VERSIONS:
        raise ValueError(
            f"{path} has format version {version}; this code reads versions "
            f"{', '.join(map(str, READABLE_VERSIONS))} (load it with the version of conceptual "
            "that saved it)"
        )
    return saved


def load_weights(model: M, directory: Path, device: str | torch.device) -> M:
    """`model` with the saved weights, on `device`, in eval mode."""
    model.load_state_dict(load_file(directory / WEIGHTS, device=str(device)))
    return model.to(device).eval()
