"""The retrieval index (conceptual.retrieval_index): exact search on constructed embeddings,
FAISS against exact search, the index files' round trip; and the build_index pipeline's
`build` over a tiny features output with a tiny local model (no Ray, no MLflow)."""

from __future__ import annotations

import io
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from conceptual import retrieval_index, storage
from conceptual.models.retriever import DualEncoder, RetrieverConfig
from conceptual.models.saving import save_retriever
from conceptual.models.vocab import Vocabulary
from conceptual.pipelines.retrieval.build_index import BuildIndexConfig, build
from conceptual.records import CLIP, FEATURES
from conceptual.retrieval_index import (
    ApproximateSettings,
    RetrievalIndex,
    approximate_recall,
    build_faiss,
    exact_search,
    faiss_search,
    write_index,
)
from conceptual.speech.audio import encode_flac


def normalized(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    x = rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def clustered(rng: np.random.Generator, n: int, dim: int, clusters: int) -> np.ndarray:
    """Normalized points around `clusters` centres: embeddings have structure, unlike noise."""
    centres = normalized(rng, clusters, dim)
    x = centres[rng.integers(clusters, size=n)] + 0.3 * normalized(rng, n, dim)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


# ---------------------------------------------------------------- exact search


def test_exact_search_ranks_by_inner_product_best_first():
    vectors = np.array([[1, 0], [0, 1], [0.8, 0.6], [-1, 0], [0.6, 0.8]], dtype=np.float32)
    found = exact_search(vectors, np.array([1, 0], dtype=np.float32), k=3)
    assert found.rows.tolist() == [[0, 2, 4]]
    np.testing.assert_allclose(found.scores, [[1.0, 0.8, 0.6]], rtol=1e-6)
    both = exact_search(vectors, np.array([[1, 0], [0, 1]], dtype=np.float32), k=2)
    assert both.rows.tolist() == [[0, 2], [1, 4]]
    assert both.found(1) == [(1, pytest.approx(1.0)), (4, pytest.approx(0.8))]


def test_exact_search_breaks_ties_by_row_and_clips_k():
    vectors = np.ones((4, 3), dtype=np.float32)
    found = exact_search(vectors, np.ones(3, dtype=np.float32), k=10)
    assert found.rows.tolist() == [[0, 1, 2, 3]]  # k > items: every item, ties by row
    assert exact_search(vectors, np.ones(3, dtype=np.float32), k=2).rows.tolist() == [[0, 1]]


def test_exact_search_in_chunks_matches_one_product(monkeypatch):
    rng = np.random.default_rng(0)
    vectors, queries = normalized(rng, 500, 16), normalized(rng, 37, 16)
    whole = exact_search(vectors, queries, k=7)
    monkeypatch.setattr(retrieval_index, "MAX_SCORES", 1000)  # 2 queries per chunk
    chunked = exact_search(vectors, queries, k=7)
    np.testing.assert_array_equal(whole.rows, chunked.rows)
    expected = np.argsort(-(queries @ vectors.T), axis=1, kind="stable")[:, :7]
    np.testing.assert_array_equal(whole.rows, expected)


def test_queries_of_the_wrong_size_are_refused():
    with pytest.raises(ValueError, match="8-d"):
        exact_search(np.zeros((3, 8), np.float32), np.zeros((1, 4), np.float32), k=1)


# ---------------------------------------------------------------- FAISS against exact


def test_an_ivf_probing_every_list_finds_the_exact_top_k():
    rng = np.random.default_rng(1)
    vectors, queries = normalized(rng, 2000, 32), normalized(rng, 50, 32)
    index, params = build_faiss(vectors, ApproximateSettings(nlist=16, nprobe=16))
    assert params == {
        "kind": "ivf",
        "metric": "inner_product",
        "faiss_version": params["faiss_version"],
        "nlist": 16,
        "nprobe": 16,
        "train_points": 1024,
    }
    assert approximate_recall(vectors, index, queries, k=10) == 1.0
    exact, approximate = exact_search(vectors, queries, 10), faiss_search(index, queries, 10)
    np.testing.assert_allclose(approximate.scores, exact.scores, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["ivf", "hnsw"])
def test_the_approximate_index_keeps_most_of_the_exact_top_10(kind):
    """On embeddings with structure (clusters), default settings miss little."""
    rng = np.random.default_rng(2)
    vectors = clustered(rng, 5000, 32, clusters=50)
    queries = clustered(rng, 200, 32, clusters=50)
    index, params = build_faiss(vectors, ApproximateSettings(kind=kind, nprobe=8))
    assert params["kind"] == kind and params["metric"] == "inner_product"
    assert approximate_recall(vectors, index, queries, k=10) >= 0.9


def test_an_ivf_probing_few_lists_misses_some_and_pads_missing_hits():
    rng = np.random.default_rng(3)
    vectors, queries = normalized(rng, 3000, 32), normalized(rng, 100, 32)
    index, _ = build_faiss(vectors, ApproximateSettings(nlist=64, nprobe=1))
    recall = approximate_recall(vectors, index, queries, k=10)
    assert 0.0 < recall < 0.9  # random vectors: the worst case for an inverted file
    tiny, _ = build_faiss(vectors[:3], ApproximateSettings())
    found = faiss_search(tiny, queries[:1], k=10)
    assert found.rows.shape == (1, 3) and (found.rows >= 0).all()


# ---------------------------------------------------------------- files


def small_index(rng: np.random.Generator) -> tuple[dict, dict, dict]:
    images = pa.table(
        {
            "image_id": [f"img{i}" for i in range(50)],
            "id": [f"rec{i}" for i in range(50)],
            "caption": [f"caption {i}" for i in range(50)],
            "split": ["test"] * 50,
            "image_url": [f"http://127.0.0.1/{i}.jpg" for i in range(50)],
        }
    )
    captions = pa.table(
        {
            "id": [f"rec{i}" for i in range(100)],
            "image_id": [f"img{i % 50}" for i in range(100)],
            "caption": [f"caption {i}" for i in range(100)],
            "split": ["test"] * 100,
        }
    )
    vectors = {"images": normalized(rng, 50, 8), "captions": normalized(rng, 100, 8)}
    return {"images": images, "captions": captions}, vectors, {"modality": "text", "embed_dim": 8}


def test_an_index_round_trips_through_its_files(tmp_path):
    rng = np.random.default_rng(4)
    tables, vectors, manifest = small_index(rng)
    faiss_index, params = build_faiss(vectors["images"], ApproximateSettings(nlist=4, nprobe=4))
    manifest["approximate"] = {"targets": {"images": params}}
    uri = str(tmp_path / "index")
    written = write_index(uri, manifest, tables, vectors, {"images": faiss_index})
    assert written["targets"]["images"] == {
        "rows": 50,
        "table": "images.parquet",
        "vectors": "images.npy",
        "approximate": "images.faiss",
    }
    assert written["targets"]["captions"]["approximate"] is None
    names = sorted(path.name for path in (tmp_path / "index").iterdir())
    assert names == [
        "_SUCCESS",
        "captions.npy",
        "captions.parquet",
        "images.faiss",
        "images.npy",
        "images.parquet",
        "index.json",
    ]
    # Plain .npy arrays: readable without unpickling anything.
    np.testing.assert_array_equal(np.load(tmp_path / "index/images.npy"), vectors["images"])

    index = RetrievalIndex.load(uri)
    assert index.manifest == json.loads((tmp_path / "index/index.json").read_text())
    assert index.tables["captions"].equals(tables["captions"])
    queries = vectors["captions"][:5]
    exact = index.search(queries, k=3, target="images")
    np.testing.assert_array_equal(exact.rows, exact_search(vectors["images"], queries, 3).rows)
    approximate = index.search(queries, k=3, target="images", approximate=True)
    np.testing.assert_array_equal(approximate.rows, exact.rows)  # nprobe = nlist: exact
    assert index.approximate["images"].nprobe == 4
    [record] = index.records("images", [exact.rows[0, 0]])
    assert record["image_id"] == f"img{exact.rows[0, 0]}"
    # The caption search falls back to exact search: no FAISS index for captions.
    assert index.search(vectors["images"][:1], 2, "captions", approximate=True).rows.shape == (1, 2)
    mapped = RetrievalIndex.load(uri, approximate=False, mmap=True)
    assert isinstance(mapped.vectors["images"], np.memmap) and not mapped.approximate


def test_an_unfinished_or_mismatched_index_is_refused(tmp_path):
    rng = np.random.default_rng(5)
    tables, vectors, manifest = small_index(rng)
    with pytest.raises(storage.StorageError, match="build_index"):
        RetrievalIndex.load(str(tmp_path / "nothing"))
    with pytest.raises(ValueError, match="49 vectors for 50 rows"):
        write_index(str(tmp_path / "bad"), manifest, tables, {"images": vectors["images"][:49]})
    uri = str(tmp_path / "index")
    write_index(uri, manifest, tables, {"images": vectors["images"]})
    index = RetrievalIndex.load(uri)
    with pytest.raises(ValueError, match="no 'captions' vectors"):
        index.search(vectors["images"][:1], 1, "captions")
    with pytest.raises(ValueError, match="k must be"):
        index.search(vectors["images"][:1], 0)


# ---------------------------------------------------------------- build_index's build

TINY = {
    "embed_dim": 8,
    "image_hidden": 16,
    "speech_channels": [4, 8],
    "text_d_model": 16,
    "text_layers": 1,
    "text_heads": 2,
    "max_tokens": 8,
    "image_dim": 12,
    "n_mfcc": 20,
    "frames": 51,
    "dropout": 0.0,
}
AUDIO = {"n_mfcc": 20, "n_mels": 40, "seconds": 0.5, "freq_mask": 5, "time_mask": 5, "cmvn": True}
# (image, split, captions): img-a has two caption records.
IMAGES = [
    ("img-a", "train", ["a dog on grass", "a brown dog"]),
    ("img-b", "train", ["a cat asleep"]),
    ("img-c", "test", ["a boat at sea"]),
]


def pooled_of(image: str) -> list[float]:
    return list(np.random.default_rng(sum(map(ord, image))).standard_normal(12))


@pytest.fixture
def features(tmp_path) -> str:
    """A features output (one augmented crop each) and the curated data it names."""
    rows = []
    for image, split, captions in IMAGES:
        for n, caption in enumerate(captions):
            for crop in (0, 1):
                pooled = pooled_of(image) if crop == 0 else [9.0] * 12
                rows.append(
                    {"id": f"{image}-{n}", "image_id": image, "split": split, "caption": caption,
                     "crop": crop, "pooled": pooled, "grid": pooled, "grid_shape": [1, 1, 12]}
                )  # fmt: skip
    out = tmp_path / "features"
    (out / "features").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows, FEATURES), out / "features" / "part-0.parquet")
    curated = tmp_path / "curated"
    curated.mkdir()
    ids = [f"{image}-0" for image, _, _ in IMAGES]
    urls = [f"http://127.0.0.1/{image}.jpg" for image, _, _ in IMAGES]
    pq.write_table(pa.table({"id": ids, "image_url": urls}), curated / "part-0.parquet")
    summary = {"curated": str(curated), "model": "efficientnet-lite0", "image_size": 256}
    (out / "features.json").write_text(json.dumps(summary))
    (out / "_SUCCESS").write_text("{}")
    return str(out)


def text_model(tmp_path) -> tuple[str, DualEncoder, Vocabulary]:
    torch.manual_seed(0)
    vocab = Vocabulary.build([c for _, _, captions in IMAGES for c in captions], min_count=1)
    model = DualEncoder(RetrieverConfig(modality="text", vocab_size=len(vocab), **TINY)).eval()
    return str(save_retriever(model, tmp_path / "text-model", vocab=vocab)), model, vocab


@pytest.mark.parametrize("read_rows", [1, 3, 4096])
def test_build_embeds_each_image_once_and_every_caption(tmp_path, features, read_rows):
    directory, model, vocab = text_model(tmp_path)
    out = str(tmp_path / "index")
    config = BuildIndexConfig(device="cpu", read_rows=read_rows)
    manifest = build(directory, features, out, config)
    assert manifest["counts"] == {
        "images": 3, "captions": 4, "clips": 0, "clips_skipped": 0, "rejected": 0
    }  # fmt: skip
    assert manifest["modality"] == "text" and manifest["registered"] is None
    assert manifest["features"]["image_size"] == 256
    assert manifest["features"]["model"] == "efficientnet-lite0"
    assert manifest["normalized"] and manifest["scale"] == pytest.approx(10.0)
    assert manifest["approximate"] is None and manifest["embed_dim"] == 8

    index = RetrievalIndex.load(out)
    images = index.tables["images"].to_pylist()
    assert [row["image_id"] for row in images] == ["img-a", "img-b", "img-c"]
    assert images[0] == {
        "image_id": "img-a",
        "id": "img-a-0",
        "caption": "a dog on grass",
        "split": "train",
        "image_url": "http://127.0.0.1/img-a.jpg",
    }
    with torch.no_grad():
        pooled = torch.tensor([pooled_of(row["image_id"]) for row in images], dtype=torch.float32)
        expected_images = model.embed_images(pooled).numpy()
        captions = index.tables["captions"]["caption"].to_pylist()
        tokens = torch.as_tensor(vocab.encode_array(captions, TINY["max_tokens"]))
        expected_captions = model.embed_queries(tokens).numpy()
    np.testing.assert_allclose(index.vectors["images"], expected_images, atol=1e-5)
    np.testing.assert_allclose(index.vectors["captions"], expected_captions, atol=1e-5)
    # A caption finds images by the model's score (the stored vectors' inner product).
    found = index.search(expected_captions[:1], k=3)
    assert sorted(found.rows[0].tolist()) == [0, 1, 2]
    assert (np.diff(found.scores[0]) <= 0).all()


def test_build_keeps_the_splits_asked_for_and_measures_the_faiss_recall(tmp_path, features):
    directory, _, _ = text_model(tmp_path)
    config = BuildIndexConfig(device="cpu", splits=["train"], approximate=True)
    manifest = build(directory, features, str(tmp_path / "index"), config)
    assert manifest["counts"]["images"] == 2 and manifest["splits"] == ["train"]
    targets = manifest["approximate"]["targets"]
    assert set(targets) == {"images", "captions"}
    assert targets["images"]["kind"] == "ivf" and targets["images"]["recall@10"] == 1.0
    index = RetrievalIndex.load(str(tmp_path / "index"))
    assert set(index.approximate) == {"images", "captions"}

    with pytest.raises(ValueError, match="no 'dev' split"):
        build(directory, features, str(tmp_path / "x"), BuildIndexConfig(splits=["dev"]))


def test_build_indexes_a_speech_models_images_and_clips(tmp_path, features):
    torch.manual_seed(0)
    model = DualEncoder(RetrieverConfig(modality="speech", **TINY)).eval()
    directory = str(save_retriever(model, tmp_path / "speech-model", audio=AUDIO))
    t = np.arange(8000) / 16000
    clips = [
        {"id": f"clip-{n}", "caption_id": caption_id, "image_id": image, "caption": f"words {n}",
         "split": "train", "audio": encode_flac(0.3 * np.sin(2 * np.pi * (200 + 100 * n) * t))}
        for n, (caption_id, image) in enumerate(
            [("img-a-0", None), ("img-b-0", "img-b"), ("gone", "img-c"), ("gone", "unknown")]
        )
    ]  # fmt: skip
    speech = tmp_path / "speech"
    (speech / "clips").mkdir(parents=True)
    table = pa.Table.from_pylist(clips, pa.schema([CLIP.field(c) for c in clips[0]]))
    pq.write_table(table, speech / "clips" / "part-0.parquet")
    (speech / "_SUCCESS").write_text("{}")

    out = str(tmp_path / "index")
    manifest = build(
        directory, features, out, BuildIndexConfig(device="cpu"), speech_uri=str(speech)
    )
    assert manifest["counts"] == {
        "images": 3, "captions": 4, "clips": 3, "clips_skipped": 1, "rejected": 0
    }  # fmt: skip
    assert manifest["audio"] == AUDIO
    index = RetrievalIndex.load(out)
    assert index.tables["clips"]["image_id"].to_pylist() == ["img-a", "img-b", "img-c"]
    assert set(index.vectors) == {"images", "clips"}  # a speech model has no caption vectors
    assert index.search(index.vectors["clips"][:1], k=2).rows.shape == (1, 2)

    with pytest.raises(ValueError, match="speech models"):
        text_directory, _, _ = text_model(tmp_path)
        build(
            text_directory,
            features,
            str(tmp_path / "y"),
            BuildIndexConfig(),
            speech_uri=str(speech),
        )


def test_build_refuses_features_of_another_size(tmp_path, features):
    torch.manual_seed(0)
    vocab = Vocabulary.build(["a dog"], min_count=1)
    config = RetrieverConfig(modality="text", vocab_size=len(vocab), **{**TINY, "image_dim": 5})
    directory = save_retriever(DualEncoder(config), tmp_path / "m", vocab=vocab)
    with pytest.raises(ValueError, match="5-d image features"):
        build(str(directory), features, str(tmp_path / "index"), BuildIndexConfig(device="cpu"))
    assert not storage.exists(str(tmp_path / "index" / "_SUCCESS"))


def test_npy_files_hold_no_pickles(tmp_path):
    buffer = io.BytesIO()
    np.save(buffer, np.array([object()]), allow_pickle=True)
    (tmp_path / "images.npy").write_bytes(buffer.getvalue())
    with pytest.raises(ValueError, match="pickle"):
        retrieval_index.read_vectors(str(tmp_path / "images.npy"))
