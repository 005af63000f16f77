"""Captions for images, from a saved captioner: decode, CNN features, beam search. The
`caption` job uses it, and Ray Serve will: one code path from a file to a caption.

The features must be computed as they were for training: conceptual.jobs.features'
defaults (EfficientNet-lite0 at 256 px, centre crop), which is what this does.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
from PIL import Image

from conceptual.models.captioner import features_tensor
from conceptual.models.decoding import n_best
from conceptual.models.saving import load_model
from conceptual.vision.cnn import CnnConfig, FeatureExtractor
from conceptual.vision.images import decode

FEATURE_SIZE = 256  # the features job's default image_size: an 8x8 grid
# The most pixels a served image may decode to. JPEGs decode scaled down toward FEATURE_SIZE
# (Image.draft, as the features job decodes them), far below this; other formats decode
# whole: 4096x4096 is 16x the model's input a side, 48 MB as RGB.
MAX_DECODED_PIXELS = (16 * FEATURE_SIZE) ** 2


class ImageCaptioner:
    def __init__(
        self,
        model_dir: str | Path,
        cnn: CnnConfig | None = None,
        beam: int = 4,
        length_penalty: float = 0.0,
    ):
        self.model, self.vocab = load_model(model_dir)
        self.extractor = FeatureExtractor(cnn, image_size=FEATURE_SIZE)
        self.beam, self.length_penalty = beam, length_penalty

    def caption(self, images: Sequence[Image.Image]) -> list[str]:
        """Each image's best caption at the configured beam."""
        return [best[0] for best in self.captions(images)]

    def captions(
        self, images: Sequence[Image.Image], beam: int | None = None, num_captions: int = 1
    ) -> list[list[str]]:
        """Each image's `num_captions` best captions (at most `beam`), best first."""
        extracted = [crops[0] for crops in self.extractor.extract(list(images))]
        features = features_tensor(
            [pooled for pooled, _ in extracted],
            [grid for _, grid in extracted],
            self.model.config.feature_map,
        )
        with torch.inference_mode():
            ranked = n_best(
                self.model,
                features,
                beam=beam or self.beam,
                n=num_captions,
                length_penalty=self.length_penalty,
            )
        return [[self.vocab.decode(ids) for ids in best] for best in ranked]

    def caption_bytes(self, data: Sequence[bytes]) -> list[str]:
        """Captions of encoded images; ImageError naming the first one that cannot be read."""
        images = []
        for i, item in enumerate(data):
            try:
                images.append(read_image(item))
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


def read_image(data: bytes) -> Image.Image:
    """Decoded RGB pixels of an encoded image, with the curation's decode guards, no larger
    than the features need (a JPEG decodes at 1/2, 1/4 or 1/8 scale when that keeps both
    sides >= FEATURE_SIZE)."""
    image, rejection = decode(data, MAX_DECODED_PIXELS, reduce_to=FEATURE_SIZE)
    if rejection:
        raise ImageError(rejection.reason, f"{rejection.reason} ({rejection.detail})")
    return image
