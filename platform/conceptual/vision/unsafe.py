"""The unsafe-content detector the image filters consult (docs/spec/curation.md §1): the paper
screens images for pornography and for other offensive content ("profanity").

None runs by default: the only offline-capable detector found, NudeNet (pornography), is
licensed AGPL-3.0, so it is an optional plug-in a user installs knowingly
(docs/spec/assets.md), and no offline image-profanity classifier exists to ship. Any object
with a `name` and a `scores(images)` method returning one probability-like score in 0..1 per
image serves as a detector; `load_detector` builds the one the config names:

    unsafe.detector=nudenet
    unsafe.detector=my_package.screening:build unsafe.weights=/models/offensive.pt

The second form is the plug-in point for any classifier (an image-profanity model, a CLIP
zero-shot screen): `build(weights)` (or `build()` without weights) returns the detector. Its
module must import in every Ray worker (installed, or on PYTHONPATH).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable, Sequence
from typing import Protocol

import numpy as np
from PIL import Image
from pydantic import Field, field_validator, model_validator

from conceptual.assets import AssetError
from conceptual.config import Config

PLUGIN = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")  # module:factory


class UnsafeConfig(Config):
    # none, nudenet, or a plug-in "module:factory" (the module docstring)
    detector: str = "none"
    # A plug-in's weights (a path or URI its factory reads); a plug-in's own settings belong
    # in that file, so that every key here stays one the jobs can check before they start.
    weights: str | None = None
    threshold: float = Field(0.5, ge=0.0, le=1.0)  # an image scoring >= threshold is rejected

    @field_validator("detector")
    @classmethod
    def _known(cls, detector: str) -> str:
        if detector not in ("none", "nudenet") and not PLUGIN.fullmatch(detector):
            raise ValueError(
                f"unsafe.detector {detector!r}: none, nudenet, or a plug-in as module:factory"
            )
        return detector

    @model_validator(mode="after")
    def _weights_for_a_plugin(self) -> UnsafeConfig:
        if self.weights is not None and not PLUGIN.fullmatch(self.detector):
            raise ValueError(f"unsafe.weights is a plug-in's; {self.detector!r} takes none")
        return self


class UnsafeDetector(Protocol):
    name: str

    def scores(self, images: Sequence[Image.Image]) -> list[float]:
        """One score in 0..1 per RGB image, in order: how likely it is pornographic."""
        ...


# NudeNet's classes that make an image explicit. Faces, covered parts, feet, armpits, bellies
# and bare male chests appear in ordinary photos (beaches, sports), so they do not count.
EXPLICIT_CLASSES = frozenset(
    {
        "FEMALE_GENITALIA_EXPOSED",
        "FEMALE_BREAST_EXPOSED",
        "MALE_GENITALIA_EXPOSED",
        "BUTTOCKS_EXPOSED",
        "ANUS_EXPOSED",
    }
)

NUDENET_INSTALL_HINT = (
    "Install it with: pip install 'conceptual[unsafe]'. Mind the licence: nudenet's package "
    "metadata says MIT but the LICENSE file it ships is AGPL-3.0."
)


def explicit_score(detections: Iterable[dict]) -> float:
    """An image's unsafe score from NudeNet's detections: the best explicit one, else 0."""
    return max(
        (float(found["score"]) for found in detections if found["class"] in EXPLICIT_CLASSES),
        default=0.0,
    )


class NudeNetDetector:
    """Adapter for NudeNet 3.x (`pip install 'conceptual[unsafe]'`), which bundles an ONNX
    body-part detector and runs offline.

    Licence warning: the LICENSE file nudenet ships is AGPL-3.0, although its package metadata
    says MIT. It is therefore never a dependency of the platform; install it knowingly.
    """

    name = "nudenet"

    def __init__(self, batch_size: int = 8):
        try:
            from nudenet import NudeDetector
        except ImportError as exc:
            raise AssetError(
                f"the nudenet unsafe-content detector is not installed ({exc}). "
                f"{NUDENET_INSTALL_HINT}"
            ) from exc
        self.batch_size = batch_size
        self._model = NudeDetector()

    def scores(self, images: Sequence[Image.Image]) -> list[float]:
        if not images:
            return []  # nudenet's detect_batch cannot stack an empty batch
        # NudeNet reads paths with cv2.imread, so arrays must be laid out as that returns them:
        # BGR channel order, contiguous uint8.
        arrays = [
            np.ascontiguousarray(np.asarray(image.convert("RGB"))[:, :, ::-1]) for image in images
        ]
        detections = self._model.detect_batch(arrays, batch_size=self.batch_size)
        return [explicit_score(found) for found in detections]


def load_detector(config: UnsafeConfig) -> UnsafeDetector | None:
    """The detector `config` names, loaded once (its model is heavy); None for "none"."""
    if config.detector == "none":
        return None
    if config.detector == "nudenet":
        return NudeNetDetector()
    return load_plugin(config.detector, config.weights)


def load_plugin(spec: str, weights: str | None) -> UnsafeDetector:
    """`module:factory`'s detector, built from `weights` when given; AssetError saying what
    is wrong."""
    module_name, attribute = spec.split(":")
    try:
        factory = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise AssetError(
            f"the unsafe-content detector {spec!r} cannot be loaded ({exc}): install its "
            "package, or put its module on PYTHONPATH on every node"
        ) from exc
    detector = factory() if weights is None else factory(weights)
    if not callable(getattr(detector, "scores", None)) or not isinstance(
        getattr(detector, "name", None), str
    ):
        raise AssetError(
            f"{spec} returned {type(detector).__name__}, not a detector: it needs a `name` "
            "and a `scores(images)` method giving one score in 0..1 per image"
        )
    return detector
