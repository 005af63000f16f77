"""Captions for images, from a saved captioner: decode, CNN features, beam search. The
`caption` job and Ray Serve use it: one code path from a file to a caption.

The features must be computed as they were for training: the CNN and input size the
captioner was saved with (saving.SavedCaptioner.features), centre crop, as the features job
computes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from conceptual.models.captioner import features_tensor
from conceptual.models.decoding import for_decoding, n_best
from conceptual.models.saving import SavedCaptioner, load
from conceptual.vision.cnn import CnnConfig, FeatureExtractor, resolve_device
from conceptual.vision.decoding import decode

# A decoded image is at most this many times the model's input a side. JPEGs decode scaled
# down toward the input size (Image.draft, as the features job decodes them), far below
# this; other formats decode whole: at 256 px, 4096x4096, 48 MB as RGB.
MAX_IMAGE_SCALE = 16


class ImageCaptioner:
    def __init__(
        self,
        model_dir: str | Path,
        cnn: CnnConfig | None = None,
        beam: int | None = None,
        length_penalty: float = 0.0,
        compiled: bool = False,
        kind: type[SavedCaptioner] = SavedCaptioner,
    ):
        """`cnn` says how the CNN runs (device, precision, weights, batch size); which CNN,
        and at what input size, the saved captioner says. The captioner decodes on the CNN's
        device (`cnn.device`, by default a GPU when there is one), a Transformer there in
        bf16 (models.decoding.for_decoding). `compiled`: a Transformer decodes over a static
        key/value cache with its step compiled (models.decoding), once per batch size. `kind`:
        the saved form of its family (a family's own captioner form: Family.saved())."""
        saved = load(model_dir, kind=kind)
        self.vocab, features = saved.vocab, saved.features
        cnn = (cnn or CnnConfig()).model_copy(update={"model": features.model})
        self.model = for_decoding(saved.model, resolve_device(cnn.device))
        self.extractor = FeatureExtractor(cnn, image_size=features.image_size)
        # None: the beam the saved model was evaluated at, so its captions are the ones scored
        self.beam = beam or saved.beam
        self.length_penalty, self.compiled = length_penalty, compiled

    @property
    def image_size(self) -> int:
        """The side of the CNN's input, as the captioner's features were made."""
        return self.extractor.image_size

    def caption(self, images: Sequence[Image.Image]) -> list[str]:
        """Each image's best caption at the configured beam."""
        return [best[0] for best in self.captions(images)]

    def captions(
        self, images: Sequence[Image.Image], beam: int | None = None, num_captions: int = 1
    ) -> list[list[str]]:
        """Each image's `num_captions` best captions (at most `beam`), best first."""
        return self.captions_of(self.features(images), beam, num_captions)

    def features(self, images: Sequence[Image.Image]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Each image's (pooled, grid) of its centre crop, as the captioner reads it: a caller
        that needs the same CNN's vectors too (recaptioning's scorer) runs the CNN once."""
        return [crops[0] for crops in self.extractor.extract(list(images))]

    def captions_of(
        self,
        extracted: Sequence[tuple[np.ndarray, np.ndarray]],
        beam: int | None = None,
        num_captions: int = 1,
    ) -> list[list[str]]:
        """`captions` of images whose `features` are `extracted`."""
        features = features_tensor(
            [pooled for pooled, _ in extracted],
            [grid for _, grid in extracted],
            self.model.config.feature_map,
        )
        weights = self.model.embed.weight
        features = features.to(weights.device, weights.dtype)
        with torch.inference_mode():
            ranked = n_best(
                self.model,
                features,
                beam=beam or self.beam,
                n=num_captions,
                length_penalty=self.length_penalty,
                compiled=self.compiled,
            )
        return [[self.vocab.decode(ids) for ids in best] for best in ranked]

    def caption_bytes(self, data: Sequence[bytes]) -> list[str]:
        """Captions of encoded images; ImageError naming the first one that cannot be read."""
        images = []
        for i, item in enumerate(data):
            try:
                images.append(read_image(item, self.image_size))
            except ImageError as error:
                raise ImageError(error.reason, f"image {i}: {error}") from None
        return self.caption(images)


class ImageError(ValueError):
    """An image that cannot be captioned; `reason` is the image filter's stable reason
    (not_an_image, truncated, corrupt, too_many_pixels, implausible_size, too_many_scans)."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason

    def __reduce__(self):  # both arguments, so it survives pickling (Ray, processes)
        return type(self), (self.reason, str(self))


def max_decoded_pixels(image_size: int) -> int:
    """The most pixels an image for a model of `image_size` input may decode to."""
    return (MAX_IMAGE_SCALE * image_size) ** 2


def read_image(data: bytes, image_size: int) -> Image.Image:
    """Decoded RGB pixels of an encoded image, with the curation's decode guards, no larger
    than a model of `image_size` input needs (a JPEG decodes at 1/2, 1/4 or 1/8 scale when
    that keeps both sides >= image_size)."""
    image, rejection = decode(data, max_decoded_pixels(image_size), reduce_to=image_size)
    if rejection:
        raise ImageError(rejection.reason, f"{rejection.reason} ({rejection.detail})")
    return image
