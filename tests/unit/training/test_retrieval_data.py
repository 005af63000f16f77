"""The retrievers' data (pipelines/families/retriever/retrieval_data.py): a features output's images and
captions, the clips that speak them, evaluation sets and training examples, the photos a
fine-tuned CNN reads and their distortion; and the comparison's variants and table
(pipelines/families/retriever/compare_retrievers.py). No Ray cluster: the Ray calls of a training example
(`ray.put` and `ray.get` of the shared images) are stood in for.

The made-up features output: three train images (two records of `img-a`, one of `img-b`
and `img-c`, each with the centre crop and two augmented crops) and three val images
(centre crop only), written in a shuffled order over two files. Every pooled vector is
filled with one number, 10 x the image's number + the crop, so where a row went is
readable from its values. Its photos (`photos_uri`: the same output with features.json
and the curated data it names) are JPEGs whose blue is 40 x the image's number."""

from __future__ import annotations

import io
import json
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import ray
from PIL import Image

from conceptual.config import ConfigError
from conceptual.pipelines.dataflow import readers
from conceptual.pipelines.evaluation.comparison import parse_variant
from conceptual.pipelines.families.retriever import retrieval_data
from conceptual.pipelines.families.retriever.compare_retrievers import markdown_table
from conceptual.pipelines.families.retriever.evaluate_retriever import RetrieverEvalConfig
from conceptual.pipelines.families.retriever.retrieval_data import (
    PhotoAugmentConfig,
    _examples,
    clips_of,
    eval_set,
    group_id,
    open_photo,
    photo_crops,
    photo_pixels,
    photos,
    pooled_crops,
    relevance,
    train_examples,
)
from conceptual.pipelines.families.retriever.train_retriever import RetrieverTrainConfig
from conceptual.pipelines.features.features_data import feature_files, split_images
from conceptual.records import CLIP, FEATURES
from conceptual.splits import drawn_subset
from conceptual.vision.cnn import centre_crop, jitter_colours, random_crop, to_pixels

CHANNELS = 4
# image id -> (number, split, crops, {record id: caption})
IMAGES = {
    "img-a": (1, "train", 3, {"a0": "a dog on the grass", "a1": "a brown dog running"}),
    "img-b": (2, "train", 3, {"b0": "a cat on the sofa"}),
    "img-c": (3, "train", 3, {"c0": "a boat on the lake"}),
    "val-x": (4, "val", 1, {"x0": "a car on the road", "x1": "a red car driving"}),
    "val-y": (5, "val", 1, {"y0": "a bird in a tree"}),
    "val-z": (6, "val", 1, {"z0": "a house by the sea"}),
}
# clip id -> (caption_id, image_id, caption): how each finds (or does not find) its image
CLIPS = {
    "clip-a0": ("a0", "img-a", "a dog on the grass"),  # by its caption
    "clip-a1": ("a1", None, "a brown dog running"),  # by its caption; an import with no image
    "clip-b-old": ("b-old", "img-b", "a cat on the sofa"),  # caption unknown: by its image
    "clip-lost": ("lost", None, "a caption of nothing"),  # neither: dropped
    "clip-other": ("q0", "img-q", "an image of no split here"),  # neither: dropped
    "clip-x0": ("x0", "val-x", "a car on the road"),
    "clip-x1": ("x1", "val-x", "a red car driving"),
    "clip-y-old": ("y-old", "val-y", "a bird in a tree"),  # by its image
    "clip-z0": ("z0", None, "a house by the sea"),  # by its caption
}


def pooled(number: int, crop: int) -> list[float]:
    return [float(10 * number + crop)] * CHANNELS


def feature_rows(with_image_id: bool = True) -> list[dict]:
    rows = []
    for image, (number, split, crops, records) in IMAGES.items():
        for record, caption in records.items():
            for crop in range(crops):
                row = {"id": record, "split": split, "caption": caption, "crop": crop}
                row["pooled"] = pooled(number, crop)
                if with_image_id:
                    row["image_id"] = image
                rows.append(row)
    return rows


def write_output(folder, part: str, rows: list[dict], schema: pa.Schema, files: int = 2) -> str:
    """rows in a shuffled order over `files` Parquet files, then the _SUCCESS marker."""
    order = np.random.default_rng(7).permutation(len(rows))
    (folder / part).mkdir(parents=True)
    for n, chunk in enumerate(np.array_split(order, files)):
        table = pa.Table.from_pylist([rows[i] for i in chunk], schema=schema)
        pq.write_table(table, folder / part / f"part-{n}.parquet")
    (folder / "_SUCCESS").write_text("{}")
    return str(folder)


@pytest.fixture(scope="module")
def features_uri(tmp_path_factory) -> str:
    return write_output(tmp_path_factory.mktemp("features"), "features", feature_rows(), FEATURES)


@pytest.fixture(scope="module")
def speech_uri(tmp_path_factory) -> str:
    from conceptual.speech.audio import SAMPLE_RATE, encode_flac

    rng = np.random.default_rng(0)
    rows = []
    for clip, (caption_id, image_id, caption) in CLIPS.items():
        samples = (0.05 * rng.normal(size=SAMPLE_RATE // 5)).astype(np.float32)
        rows.append(
            {
                "id": clip,
                "caption_id": caption_id,
                "image_id": image_id,
                "caption": caption,
                "audio": encode_flac(samples),
            }
        )
    return write_output(tmp_path_factory.mktemp("speech"), "clips", rows, CLIP)


# ---------------------------------------------------------------- split_images


def test_split_images_groups_the_records_of_an_image_with_every_crop(features_uri):
    images = split_images(feature_files(features_uri), features_uri, "train", every_crop=True)

    assert images.image_ids == ["img-a", "img-b", "img-c"]
    assert images.index == {"img-a": 0, "img-b": 1, "img-c": 2}
    assert images.pooled.shape == (3, 3, CHANNELS) and images.pooled.dtype == np.float32
    for row, image in enumerate(images.image_ids):
        number = IMAGES[image][0]
        for crop in range(3):  # the centre crop first, then the augmented ones in order
            np.testing.assert_array_equal(images.pooled[row, crop], pooled(number, crop))
    # Every caption record (not every crop's row) maps to its image; the val split's do not.
    assert images.caption_image == {"a0": "img-a", "a1": "img-a", "b0": "img-b", "c0": "img-c"}
    assert images.captions == {
        "a0": "a dog on the grass",
        "a1": "a brown dog running",
        "b0": "a cat on the sofa",
        "c0": "a boat on the lake",
    }


def test_split_images_reads_one_split(features_uri):
    images = split_images(feature_files(features_uri), features_uri, "val", every_crop=True)
    assert images.image_ids == ["val-x", "val-y", "val-z"]
    assert images.pooled.shape == (3, 1, CHANNELS)
    assert set(images.caption_image) == {"x0", "x1", "y0", "z0"}


def test_an_empty_split_raises(features_uri):
    with pytest.raises(ValueError, match="no 'test' rows"):
        split_images(feature_files(features_uri), features_uri, "test", every_crop=True)


def test_features_with_null_image_ids_are_refused_with_what_to_do(tmp_path):
    uri = write_output(tmp_path, "features", feature_rows(with_image_id=False), FEATURES)
    with pytest.raises(ValueError, match="run the features job again"):
        split_images(feature_files(uri), uri, "train", every_crop=True)


def test_features_without_the_image_id_column_are_refused_with_what_to_do(tmp_path):
    older = FEATURES.remove(FEATURES.get_field_index("image_id"))  # the features job's before
    uri = write_output(tmp_path, "features", feature_rows(with_image_id=False), older)
    with pytest.raises(ValueError, match="run the features job again"):
        split_images(feature_files(uri), uri, "train", every_crop=True)


# ---------------------------------------------------------------- clips_of


def test_a_clip_finds_its_image_by_caption_else_by_its_own_image(features_uri, speech_uri):
    train = split_images(feature_files(features_uri), features_uri, "train", every_crop=True)
    clips = clips_of(speech_uri, train).sort_by("id")
    assert clips.column_names == ["id", "caption_id", "image_id", "caption", "audio"]
    found = dict(zip(clips["id"].to_pylist(), clips["image_id"].to_pylist()))
    # clip-lost and clip-other find nothing; the val clips belong to another split.
    assert found == {"clip-a0": "img-a", "clip-a1": "img-a", "clip-b-old": "img-b"}


def test_clips_of_another_split_are_dropped(features_uri, speech_uri):
    val = split_images(feature_files(features_uri), features_uri, "val", every_crop=True)
    found = dict(
        zip(*(clips_of(speech_uri, val)[c].to_pylist() for c in ("id", "image_id")), strict=True)
    )
    assert found == {
        "clip-x0": "val-x",
        "clip-x1": "val-x",
        "clip-y-old": "val-y",
        "clip-z0": "val-z",
    }


def test_a_caption_decides_over_the_clip_s_own_image(features_uri, tmp_path):
    """A clip whose caption is known keeps its caption's image, even when its own image_id
    names another image of the split."""
    train = split_images(feature_files(features_uri), features_uri, "train", every_crop=True)
    row = {"id": "c", "caption_id": "b0", "image_id": "img-a", "caption": "x", "audio": b""}
    uri = write_output(tmp_path, "clips", [row], CLIP, files=1)
    assert clips_of(uri, train)["image_id"].to_pylist() == ["img-b"]


# ---------------------------------------------------------------- evaluation sets


def test_a_text_eval_set_has_each_caption_and_its_image(features_uri):
    evaluated = eval_set(features_uri, "val", "text")
    assert evaluated["split"] == "val"
    assert evaluated["image_ids"] == ["val-x", "val-y", "val-z"]
    np.testing.assert_array_equal(evaluated["images"], [pooled(n, 0) for n in (4, 5, 6)])
    assert evaluated["query_ids"] == ["x0", "x1", "y0", "z0"]
    assert evaluated["captions"] == [IMAGES["val-x"][3]["x0"], IMAGES["val-x"][3]["x1"]] + [
        IMAGES["val-y"][3]["y0"],
        IMAGES["val-z"][3]["z0"],
    ]
    assert evaluated["audio"] is None
    assert evaluated["query_image"].tolist() == [0, 0, 1, 2]
    relevant = relevance(evaluated)
    assert relevant.dtype == bool
    np.testing.assert_array_equal(
        relevant, [[True, False, False], [True, False, False], [False, True, False], [0, 0, 1]]
    )


def test_max_images_keeps_a_stable_prefix_and_only_its_queries(features_uri, tmp_path):
    full = eval_set(features_uri, "val", "text")
    cut = eval_set(features_uri, "val", "text", max_images=2)
    assert cut["image_ids"] == full["image_ids"][:2] == ["val-x", "val-y"]
    assert cut["images"].shape == (2, CHANNELS)
    assert cut["query_ids"] == ["x0", "x1", "y0"]
    assert cut["query_image"].tolist() == [0, 0, 1]
    assert relevance(cut).shape == (3, 2)
    # The same prefix whatever order the rows were written in.
    rows = feature_rows()[::-1]
    again = eval_set(write_output(tmp_path, "features", rows, FEATURES, 3), "val", "text", None, 2)
    assert again["image_ids"] == cut["image_ids"] and again["query_ids"] == cut["query_ids"]


def test_a_speech_eval_set_has_each_clip_and_its_image(features_uri, speech_uri):
    evaluated = eval_set(features_uri, "val", "speech", speech_uri)
    assert evaluated["image_ids"] == ["val-x", "val-y", "val-z"]
    assert evaluated["query_ids"] == ["clip-x0", "clip-x1", "clip-y-old", "clip-z0"]
    assert evaluated["captions"] == [CLIPS[c][2] for c in evaluated["query_ids"]]
    assert [a[:4] for a in evaluated["audio"]] == [b"fLaC"] * 4
    assert evaluated["query_image"].tolist() == [0, 0, 1, 2]
    assert relevance(evaluated).sum(axis=1).tolist() == [1, 1, 1, 1]

    cut = eval_set(features_uri, "val", "speech", speech_uri, max_images=1)
    assert cut["query_ids"] == ["clip-x0", "clip-x1"] and len(cut["audio"]) == 2
    assert cut["query_image"].tolist() == [0, 0]


def test_a_speech_eval_set_needs_clips(features_uri):
    with pytest.raises(ValueError, match="--speech"):
        eval_set(features_uri, "val", "speech")


def test_an_eval_set_with_no_queries_raises(features_uri, tmp_path):
    row = {"id": "c", "caption_id": "a0", "image_id": "img-a", "caption": "x", "audio": b""}
    uri = write_output(tmp_path, "clips", [row], CLIP, files=1)  # train clips only
    with pytest.raises(ValueError, match="no speech queries"):
        eval_set(features_uri, "val", "speech", uri)


# ---------------------------------------------------------------- training examples


def test_group_id_is_a_stable_60_bit_id():
    assert group_id("img-a") == group_id("img-a") == 858135587806337450
    assert group_id("a dog on the grass") == 242959770256514971
    assert group_id("img-a") != group_id("img-b")
    assert all(0 <= group_id(text) < 2**60 for text in ("", "img-a", "x" * 1000))


def object_store(monkeypatch) -> list:
    """`ray.put` and `ray.get` stood in for: what is put, in order, each under its own ref."""
    put: list = []
    refs: dict = {}

    def store(value):
        ref = ray.ObjectRef(bytes([len(refs) + 1]) * 28)
        refs[ref] = value
        put.append(value)
        return ref

    monkeypatch.setattr(ray, "put", store)
    monkeypatch.setattr(ray, "get", lambda ref: refs[ref])
    readers.fetched_once.cache_clear()  # refs of another test's store
    return put


def tokens_of(batch: pa.Table, rng: np.random.Generator) -> np.ndarray:
    assert isinstance(rng, np.random.Generator)
    return np.array([[len(c)] for c in batch["caption"].to_pylist()], dtype=np.int64)


def test_an_example_is_a_random_crop_of_its_image_with_the_match_ids(monkeypatch, features_uri):
    put = object_store(monkeypatch)
    images = split_images(feature_files(features_uri), features_uri, "train", every_crop=True)
    image_input = pooled_crops(images, np.float16)
    assert len(put) == 1 and put[0]["pooled"] is images.pooled  # one object, no copy
    image_ids = ["img-a", "img-b", "img-a", "img-c"] * 50
    captions = [IMAGES[i][3][min(IMAGES[i][3])] for i in image_ids]
    batch = pa.table({"image_id": image_ids, "caption": captions})

    out = _examples(batch, "tokens", image_input, tokens_of)

    assert set(out) == {"image", "image_group", "caption_group", "tokens"}
    assert out["image"].shape == (200, CHANNELS) and out["image"].dtype == np.float16
    numbers = np.array([IMAGES[i][0] for i in image_ids])
    crops = out["image"][:, 0].astype(np.float32) - 10 * numbers
    assert set(crops.tolist()) == {0.0, 1.0, 2.0}  # every crop drawn, none from another image
    assert np.all(out["image"] == out["image"][:, :1])  # one row of pooled, not a mix
    assert out["image_group"].tolist() == [group_id(i) for i in image_ids]
    assert out["caption_group"].tolist() == [group_id(c) for c in captions]
    assert out["tokens"].tolist() == [[len(c)] for c in captions]
    # The draw changes from call to call (every epoch reads the rows anew).
    again = _examples(batch, "tokens", image_input, tokens_of)
    assert not np.array_equal(again["image"], out["image"])


def test_a_speech_example_carries_the_query_input_as_mfcc(monkeypatch, features_uri):
    object_store(monkeypatch)
    images = split_images(feature_files(features_uri), features_uri, "train", every_crop=True)
    batch = pa.table({"image_id": ["img-b"], "caption": ["a cat on the sofa"], "audio": [b"x"]})
    mfcc = np.zeros((1, 3, 5), dtype=np.float32)
    out = _examples(batch, "mfcc", pooled_crops(images), lambda b, rng: mfcc)
    assert out["mfcc"] is mfcc and "tokens" not in out
    assert out["image"].dtype == np.float32 and out["image"][0, 0] in (20.0, 21.0, 22.0)


class RecordingDataset:
    """A stand-in for the pairs' ray.data.Dataset: keeps what map_batches was given."""

    def map_batches(self, fn, **kwargs):
        self.fn, self.kwargs = fn, kwargs
        return "examples"


@pytest.mark.parametrize("modality, column", [("speech", "mfcc"), ("text", "tokens")])
def test_train_examples_maps_the_pairs_with_the_image_input(
    monkeypatch, features_uri, modality, column
):
    object_store(monkeypatch)
    images = split_images(feature_files(features_uri), features_uri, "train", every_crop=True)
    monkeypatch.setattr(readers, "read_tasks", lambda: "bounded")  # map_read's bound
    pairs = RecordingDataset()
    image_input = pooled_crops(images, np.float16)

    assert train_examples(pairs, image_input, modality, tokens_of) == "examples"

    assert pairs.kwargs == {"batch_format": "pyarrow", "num_cpus": 0, "compute": "bounded"}
    assert pairs.fn.keywords["image_input"] is image_input
    assert pairs.fn.keywords["column"] == column
    batch = pa.table({"image_id": ["img-c"], "caption": ["a boat on the lake"]})
    out = pairs.fn(batch)
    assert out["image"].dtype == np.float16 and column in out


# ---------------------------------------------------------------- photos (a fine-tuned CNN)


def jpeg(number: int) -> bytes:
    """A 120 x 90 photo: red rising left to right, green top to bottom, blue 40 x number."""
    x, y = np.meshgrid(np.linspace(0, 255, 120), np.linspace(0, 255, 90))
    rgb = np.stack([x, y, np.full_like(x, 40 * number)], axis=-1).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(rgb).save(buffer, "JPEG", quality=95)
    return buffer.getvalue()


def write_photos(folder, features_uri: str, leave_out: set[str] = frozenset()) -> str:
    """A copy of the features output with its features.json, and the curated data it names:
    every record's photo (but those of the records in `leave_out`)."""
    out = folder / "features"
    shutil.copytree(features_uri, out)
    records = [
        {"id": record, "image": jpeg(number)}
        for number, _, _, captions in IMAGES.values()
        for record in captions
        if record not in leave_out
    ]
    (folder / "curated").mkdir()
    pq.write_table(pa.Table.from_pylist(records), folder / "curated" / "part-0.parquet")
    (out / "features.json").write_text(json.dumps({"curated": str(folder / "curated")}))
    return str(out)


@pytest.fixture(scope="module")
def photos_uri(tmp_path_factory, features_uri) -> str:
    return write_photos(tmp_path_factory.mktemp("photos"), features_uri)


def blue(pixels: np.ndarray) -> np.ndarray:
    """Each image's mean blue (the photos' blue is flat: 40 x the image's number)."""
    return pixels[:, 2].reshape(len(pixels), -1).mean(axis=1)


def test_a_split_s_photos_come_from_the_curated_data_by_record(photos_uri):
    images = split_images(feature_files(photos_uri), photos_uri, "train", every_crop=True)
    assert images.records == {"img-a": "a0", "img-b": "b0", "img-c": "c0"}
    assert photos(photos_uri, images, ["img-c", "img-a"]) == [jpeg(3), jpeg(1)]

    evaluated = eval_set(photos_uri, "val", "text", photo_size=32)
    assert evaluated["image_ids"] == ["val-x", "val-y", "val-z"]
    assert evaluated["images"].shape == (3, 3, 32, 32) and evaluated["images"].dtype == np.uint8
    np.testing.assert_allclose(blue(evaluated["images"]), [160, 200, 240], atol=3)
    # The centre square, as the search service crops an image query.
    image = open_photo(jpeg(4), 32)
    assert image.size == (60, 45)  # decoded at half scale: both sides still over 32
    centre = to_pixels([image], 32, [centre_crop(60, 45)])
    np.testing.assert_array_equal(evaluated["images"][:1], centre)


def test_photos_that_are_not_reachable_are_refused(features_uri, tmp_path):
    images = split_images(feature_files(features_uri), features_uri, "train", every_crop=True)
    with pytest.raises(ValueError, match="not reachable from here"):  # no features.json
        photos(features_uri, images, images.image_ids)
    with pytest.raises(ValueError, match="not reachable from here"):
        eval_set(features_uri, "val", "text", photo_size=32)
    partial_uri = write_photos(tmp_path, features_uri, leave_out={"b0"})
    with pytest.raises(ValueError, match="1 of 3 photos .* are not in the curated data"):
        photos(partial_uri, images, images.image_ids)


def test_random_crops_cover_at_least_the_spec_s_area():
    rng, width, height = np.random.default_rng(0), 640, 480
    scale = (PhotoAugmentConfig().min_area, 1.0)
    assert scale == (0.67, 1.0)
    crops = [random_crop(width, height, rng, scale=scale) for _ in range(2000)]
    areas = np.array([(c.box[2] - c.box[0]) * (c.box[3] - c.box[1]) for c in crops])
    areas /= width * height
    assert areas.min() >= 0.67 - 1e-9 and areas.max() <= 1.0 + 1e-9
    # Spread over the range (large crops fit the photo's aspect less often: fewer of them).
    assert (areas < 0.7).mean() > 0.1 and (areas > 0.9).mean() > 0.05
    assert {c.flip for c in crops} == {True, False}


def test_colour_jitter_stays_within_its_bounds():
    rng = np.random.default_rng(0)
    grey = np.full((500, 3, 4, 4), 100, dtype=np.uint8)
    out = jitter_colours(grey, rng, brightness=0.125, saturation=0.5).astype(int)
    assert np.all(out == out[:, :1, :1, :1])  # a grey stays grey (saturation moves nothing)
    shift = out[:, 0, 0, 0] - 100
    assert shift.min() >= -32 and shift.max() <= 32 and shift.std() > 10

    colour = np.zeros((500, 3, 2, 2), dtype=np.uint8)
    colour[:, 0], colour[:, 1], colour[:, 2] = 180, 100, 60  # luma 112.7
    out = jitter_colours(colour, rng, brightness=0.0, saturation=0.5).astype(float)
    factor = (out[:, 0, 0, 0] - out[:, 2, 0, 0]) / (180 - 60)  # the spread scales alike
    assert factor.min() >= 0.5 - 0.01 and factor.max() <= 1.5 + 0.01 and factor.std() > 0.2
    assert np.array_equal(jitter_colours(colour, rng, 0.0, 0.0), colour)


def test_distorted_photos_are_the_same_for_the_same_seed_and_differ_otherwise():
    data, augment = [jpeg(1), jpeg(2)], PhotoAugmentConfig()
    first = photo_pixels(data, 32, np.random.default_rng(7), augment)
    assert first.shape == (2, 3, 32, 32) and first.dtype == np.uint8
    assert np.array_equal(first, photo_pixels(data, 32, np.random.default_rng(7), augment))
    assert not np.array_equal(first, photo_pixels(data, 32, np.random.default_rng(8), augment))
    assert not np.array_equal(first, photo_pixels(data, 32))  # the centre square, undistorted
    # Crops alone (no colour change) keep each photo's own flat blue.
    crops_only = PhotoAugmentConfig(brightness=0.0, saturation=0.0)
    np.testing.assert_allclose(
        blue(photo_pixels(data, 32, np.random.default_rng(7), crops_only)), [40, 80], atol=3
    )


def test_photo_examples_are_each_image_s_own_photo_drawn_anew_every_epoch(monkeypatch, photos_uri):
    put = object_store(monkeypatch)
    images = split_images(feature_files(photos_uri), photos_uri, "train", every_crop=True)
    crops_only = PhotoAugmentConfig(brightness=0.0, saturation=0.0)
    image_input = photo_crops(photos_uri, images, 32, crops_only)
    assert len(put) == 1 and put[0]["jpegs"].dtype == np.uint8  # one array every task reads
    image_ids = ["img-c", "img-a", "img-b", "img-a"]
    batch = pa.table({"image_id": image_ids, "caption": ["x"] * 4})

    out = _examples(batch, "tokens", image_input, tokens_of)

    assert out["image"].shape == (4, 3, 32, 32) and out["image"].dtype == np.uint8
    np.testing.assert_allclose(blue(out["image"]), [120, 40, 80, 40], atol=3)
    again = _examples(batch, "tokens", image_input, tokens_of)
    assert not np.array_equal(again["image"], out["image"])


# ---------------------------------------------------------------- compare_retrievers


def shared_config() -> RetrieverTrainConfig:
    return RetrieverTrainConfig(modality="text", epochs=3, experiment="shared")


def test_a_variant_is_its_overrides_on_the_shared_config():
    name, config = parse_variant(
        "mms-24:  loss=mms batch_size=24 model.embed_dim=64", shared_config()
    )
    assert name == "mms-24"
    assert (config.loss, config.batch_size, config.model.embed_dim) == ("mms", 24, 64)
    assert (config.modality, config.epochs, config.experiment) == ("text", 3, "shared")
    assert config.model.text_layers == shared_config().model.text_layers
    name, config = parse_variant(" triplet :loss=triplet", shared_config())
    assert (name, config.loss) == ("triplet", "triplet")
    name, config = parse_variant("plain:", shared_config())  # no overrides: the shared config
    assert name == "plain" and config == shared_config()


@pytest.mark.parametrize("text", ["mms loss=mms", "loss=mms", ": loss=mms", "  :"])
def test_a_variant_without_a_name_and_a_colon_is_refused(text):
    with pytest.raises(ConfigError, match="name: key=value"):
        parse_variant(text, shared_config())


@pytest.mark.parametrize(
    "text", ["lossy: los=mms", "lossy: loss=hinge", "lossy: model.embed=64", "lossy: epochs=x"]
)
def test_a_variant_with_an_unknown_key_or_bad_value_names_the_variant(text):
    with pytest.raises(ConfigError, match="variant 'lossy'"):
        parse_variant(text, shared_config())


def test_every_variant_trains_on_the_teaching_clips_too(monkeypatch):
    """--teacher-speech reaches each variant's training as train_retriever's third input."""
    from conceptual.pipelines.families.retriever import compare_retrievers

    trained_on = {}

    def comparison(how, config, variants, params, register):
        trained_on.update(data=[variant.data for variant in variants], params=params)
        return {"run_id": "r", "rows": []}

    monkeypatch.setattr(compare_retrievers, "run_comparison", comparison)
    config = RetrieverTrainConfig(modality="speech", teacher="TEXT")
    compare_retrievers.compare(
        "F", "S", "EF", "ES", config, ["a:"], RetrieverEvalConfig(), teacher_speech=["CC", "F8R"]
    )
    assert trained_on["data"] == [["F", "S", ["CC", "F8R"]]]
    assert trained_on["params"]["teacher_speech"] == "CC F8R"


def comparison_rows() -> list[dict]:
    def row(variant, loss, base, seconds, p_vs_best):
        ks = [(d, k) for d in ("text_to_image", "image_to_text") for k in (1, 5, 10, 50, 100)]
        recall = {f"{d}.R@{k}": base * k / 100 for d, k in ks}
        chance = {f"chance {d}.R@{k}": k / 1000 for d, k in ks}
        return {
            "variant": variant,
            "modality": "text",
            "loss": loss,
            "batch_size": 48,
            **recall,
            "mean_R@10": base / 10,
            "mean_R@10.ci95_low": base / 10 - 0.1,
            "mean_R@10.ci95_high": base / 10 + 0.1,
            "mean_R@10.p_vs_best": p_vs_best,
            **chance,
            "train_seconds": seconds,
            "eval_set": "features@test:4q:abc",
            "version": None,
        }

    return [row("mms", "mms", 5.0, 12.5, None), row("triplet", "triplet", 2.0, 10.0, 0.2)]


def test_the_markdown_table_has_a_row_per_variant_and_chance_last():
    lines = markdown_table(comparison_rows()).split("\n")
    recall = [f"{d}.R@{k}" for d in ("text_to_image", "image_to_text") for k in (1, 5, 10)]
    columns = ["variant", "loss", "batch_size", *recall, "mean_R@10", "p vs best", "train_seconds"]
    assert lines[0] == "| " + " | ".join(columns) + " |"
    assert lines[1] == "|" + "---|" * 12
    assert lines[2] == (
        "| mms | mms | 48 | 0.050 | 0.250 | 0.500 | 0.050 | 0.250 | 0.500 "
        "| 0.500 [0.400, 0.600] |  | 12.500 |"
    )
    assert lines[3].startswith("| triplet | triplet | 48 | 0.020 |")
    assert "| 0.200 [0.100, 0.300] | 0.200 ~ |" in lines[3]  # inside the noise
    assert lines[4] == "| chance |  |  | 0.001 | 0.005 | 0.010 | 0.001 | 0.005 | 0.010 |  |  |  |"
    assert lines[6].startswith("Evaluation set: features@test:4q:abc. mean_R@10 [95% bootstrap")
    assert all(line.count("|") == 13 for line in lines[:5])


# ---------------------------------------------------------------- train_fraction


def test_a_train_fraction_is_a_seeded_draw_of_images():
    ids = [f"img-{n}" for n in range(100)]
    half = drawn_subset(ids, 0.5, seed=3)
    assert len(half) == 50 and half == [i for i in ids if i in set(half)]  # their order kept
    assert drawn_subset(list(reversed(ids)), 0.5, seed=3) == list(reversed(half))  # any order
    assert drawn_subset(ids, 0.5, seed=4) != half
    assert drawn_subset(ids, 1.0, seed=3) == ids
    assert len(drawn_subset(ids, 0.001, seed=3)) == 1  # never none
    with pytest.raises(ValueError, match="fraction"):
        drawn_subset(ids, 0.0, seed=3)


def test_a_subset_of_the_train_images_keeps_their_captions_and_crops(features_uri):
    images = split_images(feature_files(features_uri), features_uri, "train", every_crop=True)
    part = images.subset(["img-a", "img-c"])
    assert part.image_ids == ["img-a", "img-c"]
    np.testing.assert_array_equal(part.pooled, images.pooled[[0, 2]])
    assert part.caption_image == {"a0": "img-a", "a1": "img-a", "c0": "img-c"}
    assert set(part.captions) == {"a0", "a1", "c0"}


def test_text_training_rows_are_the_drawn_images_captions_only(monkeypatch):
    object_store(monkeypatch)
    rows = pa.Table.from_pylist(feature_rows()).select(["image_id", "caption", "split", "crop"])
    kept = retrieval_data._train_records(rows, "train", (ray.put(["img-a", "img-c"]),))
    assert sorted(kept["caption"].to_pylist()) == [
        "a boat on the lake",
        "a brown dog running",
        "a dog on the grass",
    ]


def test_train_fraction_is_a_share_of_the_images():
    assert RetrieverTrainConfig().train_fraction == 1.0
    for bad in (0, 1.5):
        with pytest.raises(ValueError, match="train_fraction"):
            RetrieverTrainConfig(train_fraction=bad)
