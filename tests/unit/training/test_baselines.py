import numpy as np
import pytest

from conceptual.models import baselines
from conceptual.models.baselines import (
    consensus_caption,
    nearest_neighbour_captions,
    nearest_neighbours,
)


def test_each_query_gets_the_caption_of_its_most_similar_training_image():
    train = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    queries = np.array([[0.1, 5.0], [9.0, 1.0], [-2.0, -0.1]])  # scale does not matter
    captions = ["a red car", "a green tree", "a blue sky"]
    assert nearest_neighbour_captions(train, captions, queries) == [
        "a green tree",
        "a red car",
        "a blue sky",
    ]


def test_ties_go_to_the_first_training_image_and_zero_vectors_do_not_crash():
    train = np.array([[1.0, 1.0], [2.0, 2.0], [0.0, 0.0]])
    queries = np.array([[3.0, 3.0], [0.0, 0.0]])
    assert nearest_neighbours(train, queries).tolist() == [0, 0]


def test_chunked_search_agrees_with_the_full_similarity_matrix(monkeypatch):
    rng = np.random.default_rng(0)
    train, queries = rng.normal(size=(50, 8)), rng.normal(size=(37, 8))
    unit = lambda x: x / np.linalg.norm(x, axis=1, keepdims=True)  # noqa: E731
    expected = np.argmax(unit(queries) @ unit(train).T, axis=1)
    monkeypatch.setattr(baselines, "_SIMILARITY_BUDGET", 50 * 4)  # 4 queries per chunk
    assert nearest_neighbours(train, queries).tolist() == expected.tolist()


def test_an_image_with_several_captions_contributes_its_consensus_caption():
    captions = ["a dog on grass", "a brown dog runs on the grass", "animal", "a dog runs on grass"]
    assert consensus_caption(captions) == "a dog runs on grass"
    train = np.eye(2)
    picked = nearest_neighbour_captions(train, [captions, "a cat"], np.array([[1.0, 0.1]]))
    assert picked == ["a dog runs on grass"]


def test_mismatched_shapes_are_errors():
    with pytest.raises(ValueError, match="captions"):
        nearest_neighbour_captions(np.eye(2), ["one"], np.eye(2))
    with pytest.raises(ValueError, match="channels"):
        nearest_neighbours(np.eye(2), np.eye(3))
    with pytest.raises(ValueError, match="no training"):
        nearest_neighbours(np.empty((0, 2)), np.eye(2))
