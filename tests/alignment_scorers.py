"""A small alignment scorer for the tests (conceptual.vision.alignment): a text dual encoder
fitted to a few (image vector, caption) pairs in seconds, saved in the platform's format, so
the tests load it by path as a user loads a trained one."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from conceptual.models.losses import match_mask, mms_loss
from conceptual.models.retriever import DualEncoder, RetrieverConfig
from conceptual.models.saving import save_retriever
from conceptual.models.vocab import Vocabulary
from conceptual.vision.alignment import VISION_FEATURES
from conceptual.vision.cnn import FEATURE_CHANNELS

TINY = dict(embed_dim=16, image_hidden=32, text_d_model=16, text_heads=2, text_layers=1)


def fitted(
    captions: Sequence[str], images: np.ndarray, steps: int = 30
) -> tuple[DualEncoder, Vocabulary]:
    """A small text dual encoder trained on the pairs (images[i], captions[i])."""
    torch.manual_seed(0)
    vocab = Vocabulary.build(captions, min_count=1)
    config = RetrieverConfig(
        modality="text", image_dim=FEATURE_CHANNELS, vocab_size=len(vocab), dropout=0.0, **TINY
    )
    model = DualEncoder(config)
    vectors = torch.as_tensor(np.asarray(images, np.float32))
    tokens = torch.as_tensor(vocab.encode_array(captions, config.max_tokens))
    mask = match_mask(torch.arange(len(captions)))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(steps):
        optimizer.zero_grad()
        mms_loss(model(vectors, tokens), mask, 0.1).backward()
        optimizer.step()
    return model.eval(), vocab


def saved_scorer(
    directory: Path, captions: Sequence[str], images: np.ndarray, steps: int = 30
) -> Path:
    """`fitted`'s model saved at `directory` as the features job's CNN vectors' model."""
    model, vocab = fitted(captions, images, steps)
    return save_retriever(model, directory, vocab, features=VISION_FEATURES)
