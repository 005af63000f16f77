"""Captioning baselines that need no training, the floor a trained captioner must beat."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from conceptual.metrics import token_f1

# Similarity entries computed at once: 2^24 float32 values is 64 MiB, whatever N and M are.
_SIMILARITY_BUDGET = 1 << 24


def consensus_caption(captions: Sequence[str]) -> str:
    """The caption that agrees most with the image's other captions (highest mean token F1
    with them; the first on ties). Picking the consensus caption instead of an arbitrary
    one is a known boost for nearest-neighbour captioning (Devlin et al., 2015)."""
    if len(captions) == 1:
        return captions[0]

    def agreement(index: int) -> float:
        others = (c for j, c in enumerate(captions) if j != index)
        return sum(token_f1(captions[index], other) for other in others)

    return captions[max(range(len(captions)), key=agreement)]


def _unit_rows(features: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length, so dot products are cosine similarities; all-zero rows
    stay zero (similarity 0 to everything)."""
    features = features.astype(np.float32, copy=False)
    norms = np.linalg.norm(features, axis=1, keepdims=True)
    return features / np.maximum(norms, np.finfo(np.float32).tiny)


def nearest_neighbours(train_features: np.ndarray, query_features: np.ndarray) -> np.ndarray:
    """For each query row, the index of the training row with the highest cosine similarity
    (the lowest index on ties). Queries go in chunks so memory stays bounded."""
    train, queries = np.asarray(train_features), np.asarray(query_features)
    if train.ndim != 2 or queries.ndim != 2:
        raise ValueError("features must be 2-D arrays (rows, channels)")
    if train.shape[1] != queries.shape[1]:
        raise ValueError(
            f"train features have {train.shape[1]} channels, queries {queries.shape[1]}"
        )
    if len(train) == 0:
        raise ValueError("no training features to search")
    train, queries = _unit_rows(train), _unit_rows(queries)
    chunk = max(1, _SIMILARITY_BUDGET // len(train))
    nearest = [
        np.argmax(queries[start : start + chunk] @ train.T, axis=1)  # argmax: first of ties
        for start in range(0, len(queries), chunk)
    ]
    return np.concatenate(nearest) if nearest else np.empty(0, dtype=np.int64)


def nearest_neighbour_captions(
    train_features: np.ndarray,
    train_captions: Sequence[str | Sequence[str]],
    query_features: np.ndarray,
) -> list[str]:
    """Caption each query image with the caption of its most similar training image, by
    cosine similarity of pooled features (N x C training, M x C queries). A training image
    may have several captions (a list); its consensus caption is used."""
    if len(train_captions) != len(train_features):
        raise ValueError(
            f"{len(train_features)} training feature rows but {len(train_captions)} captions"
        )
    nearest = nearest_neighbours(train_features, query_features)
    chosen: dict[int, str] = {}  # each neighbour's consensus caption, computed once
    for index in map(int, nearest):
        if index not in chosen:
            captions = train_captions[index]
            chosen[index] = consensus_caption([captions] if isinstance(captions, str) else captions)
    return [chosen[int(index)] for index in nearest]
