"""The dual encoder of docs/spec/retrieval.md: an image tower and a query tower (speech or
text), weights not shared, whose embeddings' dot products score every image of a batch
against every query. The masked margin softmax (MMS) and triplet losses over those scores
are in conceptual.models.losses; Recall@k, with its chance level, in conceptual.metrics.

- image:  an MLP over the pooled CNN vector (the features job's `pooled` column); or, with
          `image_backbone="finetune"`, the pretrained CNN itself (EfficientNet-lite0, the
          features job's) over the photo's pixels, its last feature map averaged, then that
          MLP, trained end to end.
- speech: `speech_tower="conv1d"` (the default): 1-D convolutions over time with the
          coefficients as channels (as DAVEnet reads a spectrogram), averaged over time;
          `"cnn"` (the spec's): the MFCC matrix as an image with 3 identical channels,
          through stride-2 conv blocks (each followed by `speech_residual` residual
          blocks), averaged over what is left of time and frequency.
- text:   a pre-norm Transformer encoder (or an LSTM) over the token ids, averaged over the
          tokens that are not padding.

With `normalize` (the default) both embeddings are L2-normalized and their dot product is
multiplied by a learned scale, as in CLIP: cosines alone, within [-1, 1], are too flat for a
softmax over the batch, and a free dot product lets the towers grow their norms instead of
their agreement. `normalize=False` gives the spec's plain dot product.

    model = DualEncoder(RetrieverConfig(modality="speech", image_dim=1280))
    scores = model(features, mfcc)                    # (B, B): image i against query j
    loss = mms_loss(scores, match_mask(image_ids), margin_at(step))  # models.losses
"""

from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import ConfigDict, Field, model_validator
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from conceptual.config import Config
from conceptual.models.vocab import PAD
from conceptual.vision.cnn import CnnConfig, load_backbone, normalize

# The learned scale of normalized scores starts at 10 (CLIP's at 1/0.07, ~14.3) and is capped
# like CLIP's: past 100 the softmax over a batch is nearly one-hot and training becomes unstable.
INITIAL_SCALE, MAX_SCALE = 10.0, 100.0


class RetrieverSettings(Config):
    """The model's shape and regularization: the `model.*` keys of the training config."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    embed_dim: int = 512  # the paper's 1536; smaller by default for training on CPUs
    normalize: bool = True  # cosine scores times a learned scale; False: plain dot product
    # "features": the image tower reads the features job's pooled vectors (the CNN frozen);
    # "finetune": it holds the pretrained CNN and reads the photos, trained end to end.
    image_backbone: Literal["features", "finetune"] = "features"
    image_size: int = Field(default=224, ge=32)  # finetune: the CNN's input, pixels a side
    # finetune: where the CNN starts, "imagenet" (its pretrained weights) or "random" (from
    # scratch: the paper's "not pretrained" rows of Table 2).
    image_init: Literal["imagenet", "random"] = "imagenet"
    # finetune: the CNN's share of the learning rate (pretrained weights move less than the
    # new layers on top; training.parameter_groups)
    backbone_lr_scale: float = Field(default=0.1, gt=0, le=1)
    image_hidden: int = 1024  # the image MLP's hidden width
    # "conv1d": 1-D convolutions over time, which learned fastest (BENCHMARKS.md, "Spoken
    # search at our scale"); "cnn": the spec's 2-D ones over the MFCC matrix, with
    # speech_channels=[32, 64, 128, 256].
    speech_tower: Literal["cnn", "conv1d"] = "conv1d"
    speech_channels: list[int] = [256, 256, 512, 512]  # one stride-2 conv block each
    # Residual blocks (two 3x3 convolutions and a skip) after each stride-2 block: 0 is the
    # spec's plain CNN; 1 doubles its depth (a deeper residual tower over the MFCCs).
    speech_residual: int = Field(default=0, ge=0)
    text_architecture: Literal["transformer", "lstm"] = "transformer"
    text_d_model: int = 256
    text_layers: int = 2
    text_heads: int = 4  # transformer only
    max_tokens: int = 32  # the longest token sequence the text tower reads
    dropout: float = 0.1

    @property
    def photo_size(self) -> int | None:
        """The side of the photos the image tower reads; None when it reads pooled vectors."""
        return self.image_size if self.image_backbone == "finetune" else None

    @model_validator(mode="after")
    def _random_init_needs_the_cnn(self) -> RetrieverSettings:
        # The features job's vectors come from the pretrained CNN: only a CNN trained here
        # can start from scratch.
        if self.image_init == "random" and self.image_backbone != "finetune":
            raise ValueError("model.image_init=random needs model.image_backbone=finetune")
        return self


# What a retriever's queries are: spoken or written captions.
Modality = Literal["speech", "text"]


class RetrieverConfig(RetrieverSettings):
    """The settings and what the data decides: the query modality and the input sizes."""

    modality: Modality
    image_dim: int  # the pooled CNN vector's size (1280 for EfficientNet-Lite0, finetune too)
    n_mfcc: int = 128  # speech: MFCC rows
    frames: int = 351  # speech: MFCC columns, 1 + seconds * 100
    vocab_size: int = 0  # text: len(Vocabulary)

    @model_validator(mode="after")
    def _text_needs_a_vocabulary(self) -> RetrieverConfig:
        if self.modality == "text" and self.vocab_size <= PAD:
            raise ValueError("a text retriever needs vocab_size (the vocabulary's length)")
        return self


class ImageTower(nn.Module):
    """features (B, image_dim) float -> (B, embed_dim): the CNN's features are precomputed, so
    this MLP is all the image side learns. With image_backbone="finetune": pixels
    (B, 3, image_size, image_size) uint8 -> the pretrained CNN (its weights saved with the
    model's), its last feature map averaged as the features job pools it -> the same MLP."""

    def __init__(self, config: RetrieverConfig):
        super().__init__()
        self.backbone: nn.Module | None = None
        if config.image_backbone == "finetune":
            pretrained = config.image_init == "imagenet"
            self.backbone = load_backbone(CnnConfig(device="cpu"), pretrained)
            # The ImageNet classifier: unused here, and DDP refuses parameters left without
            # gradients.
            del self.backbone._fc
        self.mlp = nn.Sequential(
            nn.Linear(config.image_dim, config.image_hidden),
            nn.ReLU(),
            nn.Dropout(config.dropout),
            nn.Linear(config.image_hidden, config.embed_dim),
        )

    def forward(self, images: Tensor) -> Tensor:
        if self.backbone is not None:
            images = self.backbone.extract_features(normalize(images)).mean(dim=(2, 3))
        return self.mlp(images)


class ResidualBlock(nn.Module):
    """x + (conv, BN, ReLU, conv, BN)(x), then ReLU: depth without a longer gradient path."""

    def __init__(self, width: int):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(width, width, 3, padding=1, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(),
            nn.Conv2d(width, width, 3, padding=1, bias=False),
            nn.BatchNorm2d(width),
        )

    def forward(self, x: Tensor) -> Tensor:
        return F.relu(x + self.body(x))


class SpeechTower(nn.Module):
    """mfcc (B, n_mfcc, frames) -> (B, embed_dim).

    Each matrix is first standardized by its own mean and standard deviation, taken over the
    whole matrix. MFCC scales differ by coefficient (the 0th, the log energy, is tens of times
    the others), yet per-coefficient standardization would erase what each coefficient's
    level says (loudness, the average spectral envelope) and would turn the SpecAugment masks,
    filled with the matrix mean (conceptual.speech.features), into a different value in every
    row; with one mean for the matrix they become exactly 0. The first BatchNorm rescales
    what the convolutions make of the rows. Standardizing per example, rather than with the
    training set's statistics, also keeps clips of different loudness and speakers alike."""

    def __init__(self, config: RetrieverConfig):
        super().__init__()
        blocks: list[nn.Module] = []
        channels = 3  # the spec's 3 stacked copies, so an image CNN's layout fits unchanged
        for width in config.speech_channels:
            blocks += [
                nn.Conv2d(channels, width, 3, stride=2, padding=1, bias=False),  # BN has the bias
                nn.BatchNorm2d(width),
                nn.ReLU(),
                *(ResidualBlock(width) for _ in range(config.speech_residual)),
            ]
            channels = width
        self.convs = nn.Sequential(*blocks)
        self.dropout = nn.Dropout(config.dropout)
        self.out = nn.Linear(channels, config.embed_dim)

    def forward(self, mfcc: Tensor) -> Tensor:
        var, mean = torch.var_mean(mfcc, dim=(1, 2), correction=0, keepdim=True)
        x = (mfcc - mean) * torch.rsqrt(var + 1e-5)  # a constant matrix (silence) becomes 0
        x = self.convs(x.unsqueeze(1).expand(-1, 3, -1, -1))
        return self.out(self.dropout(x.mean(dim=(2, 3))))


class SpeechConv1d(nn.Module):
    """mfcc (B, n_mfcc, frames) -> (B, embed_dim), every coefficient an input channel: a
    width-5 convolution over time at the first width, then one stride-2 width-5 block per
    `speech_channels` entry, averaged over time. A filter spans every coefficient at once,
    so the first layer already sees a whole spectral envelope (a phone), where the 2-D
    tower needs several layers to; its input is the audio features' normalized MFCCs
    (`cmvn`), taken as they come."""

    def __init__(self, config: RetrieverConfig):
        super().__init__()
        channels = config.speech_channels[0]
        blocks: list[nn.Module] = [*self.block(config.n_mfcc, channels, stride=1)]
        for width in config.speech_channels:
            blocks += self.block(channels, width, stride=2)
            channels = width
        self.convs = nn.Sequential(*blocks)
        self.dropout = nn.Dropout(config.dropout)
        self.out = nn.Linear(channels, config.embed_dim)

    @staticmethod
    def block(channels: int, width: int, stride: int) -> list[nn.Module]:
        conv = nn.Conv1d(channels, width, 5, stride=stride, padding=2, bias=False)
        return [conv, nn.BatchNorm1d(width), nn.ReLU()]

    def forward(self, mfcc: Tensor) -> Tensor:
        return self.out(self.dropout(self.convs(mfcc).mean(dim=2)))


class TextTower(nn.Module):
    """tokens (B, T) int64, T <= max_tokens, padded at the end with PAD -> (B, embed_dim)."""

    def __init__(self, config: RetrieverConfig):
        super().__init__()
        d = config.text_d_model
        self.max_tokens = config.max_tokens
        self.embed = nn.Embedding(config.vocab_size, d, padding_idx=PAD)
        self.dropout = nn.Dropout(config.dropout)
        self.encoder: nn.TransformerEncoder | nn.LSTM
        if config.text_architecture == "transformer":
            self.positions = nn.Parameter(torch.randn(config.max_tokens, d) * 0.02)
            layer = nn.TransformerEncoderLayer(
                d, config.text_heads, 4 * d, config.dropout, batch_first=True, norm_first=True
            )
            # Pre-norm layers leave their output unnormalized: the last LayerNorm does it.
            # Nested tensors (which skip padding) are unavailable with norm_first anyway.
            self.encoder = nn.TransformerEncoder(
                layer, config.text_layers, norm=nn.LayerNorm(d), enable_nested_tensor=False
            )
        else:
            between = config.dropout if config.text_layers > 1 else 0.0
            self.encoder = nn.LSTM(d, d, config.text_layers, batch_first=True, dropout=between)
        self.out = nn.Linear(d, config.embed_dim)

    def forward(self, tokens: Tensor) -> Tensor:
        length = tokens.shape[1]
        if length > self.max_tokens:
            raise ValueError(f"{length} tokens; the text tower reads at most {self.max_tokens}")
        keep = tokens != PAD
        x = self.embed(tokens)
        if isinstance(self.encoder, nn.LSTM):
            # Packed, so the padding never enters the recurrent state.
            lengths = keep.sum(dim=1).clamp(min=1).cpu()
            packed = pack_padded_sequence(
                self.dropout(x), lengths, batch_first=True, enforce_sorted=False
            )
            x, _ = pad_packed_sequence(
                self.encoder(packed)[0], batch_first=True, total_length=length
            )
        else:
            x = self.encoder(self.dropout(x + self.positions[:length]), src_key_padding_mask=~keep)
        pooled = (x * keep.unsqueeze(-1)).sum(dim=1) / keep.sum(dim=1, keepdim=True).clamp(min=1)
        return self.out(self.dropout(pooled))


class DualEncoder(nn.Module):
    def __init__(self, config: RetrieverConfig):
        super().__init__()
        self.config = config
        self.image = ImageTower(config)
        self.query: SpeechTower | SpeechConv1d | TextTower
        if config.modality == "speech":
            tower = SpeechConv1d if config.speech_tower == "conv1d" else SpeechTower
            self.query, self.query_input = tower(config), "mfcc"
        else:
            self.query, self.query_input = TextTower(config), "tokens"
        if config.normalize:
            # The log, as in CLIP, so the scale stays positive and moves by ratios.
            self.log_scale = nn.Parameter(torch.tensor(math.log(INITIAL_SCALE)))

    def optimizer_groups(self) -> list[dict]:
        """The pretrained CNN (finetune) at `backbone_lr_scale` of the learning rate, the rest
        at the whole of it (the training core's parameter groups)."""
        backbone = self.image.backbone
        if backbone is None:
            return [{"params": list(self.parameters())}]
        ids = {id(p) for p in backbone.parameters()}
        return [
            {"params": [p for p in self.parameters() if id(p) not in ids]},
            {"params": list(backbone.parameters()), "lr_scale": self.config.backbone_lr_scale},
        ]

    def forward(self, images: Tensor, queries: Tensor) -> Tensor:
        """The batch's (B, B) scores. Training goes through here so that a DistributedDataParallel
        wrapper sees the step; evaluation embeds each side on its own."""
        return self.scores(self.embed_images(images), self.embed_queries(queries))

    def embed_images(self, images: Tensor) -> Tensor:
        """Pooled CNN vectors (B, image_dim); finetune: uint8 pixels (B, 3, size, size)."""
        return self._finish(self.image(images))

    def embed_queries(self, queries: Tensor) -> Tensor:
        """Speech: MFCCs (B, n_mfcc, frames); text: token ids (B, T)."""
        return self._finish(self.query(queries))

    def _finish(self, embeddings: Tensor) -> Tensor:
        return F.normalize(embeddings, dim=-1) if self.config.normalize else embeddings

    def scores(self, images: Tensor, queries: Tensor) -> Tensor:
        """Z (B_img, B_query) from embeddings: Z_ij = image i . query j (times the scale)."""
        z = images @ queries.T
        return z * self.scale() if self.config.normalize else z

    def scale(self) -> Tensor:
        """A normalized model's learned scale of its cosines, capped at MAX_SCALE (in the
        forward pass: past the cap the scale gets no gradient and stays), as it scores."""
        return self.log_scale.clamp(max=math.log(MAX_SCALE)).exp()
