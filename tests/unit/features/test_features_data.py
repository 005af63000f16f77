"""Reading a features job's output for captioning: images grouped with all their references,
and the photos behind them found through features.json."""

from __future__ import annotations

import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from conceptual.pipelines.features.features_data import (
    feature_files,
    source_images,
    split_images,
    train_captions,
)
from conceptual.plots import image_grid
from conceptual.records import FEATURES
from conceptual.registry import eval_set_name
from conceptual.storage import StorageError


def photo(colour) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (64, 48), colour).save(buffer, "JPEG")
    return buffer.getvalue()


@pytest.fixture
def features(tmp_path):
    """Two val images (3 and 2 captions), one train image with an augmented crop; the
    curated photos in data/curated, named by features.json as the features job does."""
    rows = []
    records = [("v1", "val", 1.0, ["a dog", "a brown dog", "dog on grass"])]
    records += [("v2", "val", 2.0, ["a cat", "a cat asleep"]), ("t1", "train", 3.0, ["a boat"])]
    for image, split, value, captions in records:
        for n, caption in enumerate(captions):
            for crop in (0, 1):
                rows.append(
                    {
                        "id": f"{image}-{n}",
                        "image_id": image,
                        "split": split,
                        "caption": caption,
                        "crop": crop,
                        "pooled": [value + crop] * 4,
                        "grid": [value + crop] * 16,
                        "grid_shape": [2, 2, 4],
                    }
                )
    (tmp_path / "out" / "features").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows, FEATURES), tmp_path / "out/features/p.parquet")
    curated = tmp_path / "data" / "curated"
    curated.mkdir(parents=True)
    table = pa.table({"id": ["v1-0", "v2-0"], "image": [photo("red"), photo("blue")]})
    pq.write_table(table, curated / "part-0.parquet")
    (tmp_path / "out" / "features.json").write_text(json.dumps({"curated": str(curated)}))
    (tmp_path / "out" / "_SUCCESS").write_text("{}")  # written last, as the features job does
    return str(tmp_path / "out")


def test_a_split_groups_records_by_image_with_every_reference(features):
    files = feature_files(features)
    images = split_images(files, features, "val", grids=True)
    assert len(images.image_ids) == 2 and images.feature_dim == 4
    references = sorted(images.references[k] for k in images.image_ids)
    assert references == [["a cat", "a cat asleep"], ["a dog", "a brown dog", "dog on grass"]]
    assert sorted(images.records.values()) == ["v1-0", "v2-0"]  # one record id per image
    assert images.pooled.shape == (2, 1, 4) and images.grid.shape == (2, 16)
    assert len(split_images(files, features, "val", max_images=1).image_ids) == 1
    pooled_only = split_images(files, features, "val")
    assert pooled_only.grid is None and pooled_only.image_ids == images.image_ids
    assert train_captions(files, features) == ["a boat"]  # centre crops only


def test_an_eval_set_is_named_by_its_folder_split_size_and_content(features):
    images = split_images(feature_files(features), features, "val")
    size, references = len(images.image_ids), images.references
    name = eval_set_name(features, "val", size, references)
    assert name.startswith(f"{features.rstrip('/').rsplit('/', 1)[-1]}#val:2:")
    # The same set read from another location keeps its name; other references change it.
    copy = f"s3://bucket/copy/{features.rsplit('/', 1)[-1]}"
    assert eval_set_name(copy, "val", size, references) == name
    changed = {**references, images.image_ids[0]: ["x"]}
    assert eval_set_name(features, "val", size, changed) != name


def test_missing_features_and_splits_fail_clearly(features, tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(StorageError, match="no _SUCCESS marker.*allow_incomplete=true"):
        feature_files(str(tmp_path / "empty"))
    with pytest.raises(StorageError, match="no features Parquet"):
        feature_files(str(tmp_path / "empty"), allow_incomplete=True)
    with pytest.raises(ValueError, match="no 'test' rows"):
        split_images(feature_files(features), features, "test")
    table = pq.read_table(f"{features}/features/p.parquet")
    unknown = pa.nulls(len(table), pa.string())
    table = table.set_column(table.schema.get_field_index("image_id"), "image_id", unknown)
    pq.write_table(table, f"{features}/features/p.parquet")
    with pytest.raises(ValueError, match="without an image_id.*run the features job again"):
        split_images(feature_files(features), features, "val")


def test_photos_come_from_the_curated_data_features_json_names(features, tmp_path):
    found = source_images(features, ["v2-0", "v1-0", "v1-1"])
    assert list(found) == ["v2-0", "v1-0"]  # in the order asked; v1-1 has no photo there
    assert Image.open(io.BytesIO(found["v1-0"])).getpixel((0, 0))[0] > 200  # the red one
    (tmp_path / "out" / "features.json").write_text(json.dumps({"curated": "/nowhere"}))
    assert source_images(features, ["v1-0"]) == {}


def test_an_image_grid_shows_every_photo_with_its_title():
    figure = image_grid([(photo("red"), "model: a\nreference: b")] * 5, columns=4)
    shown = [ax for ax in figure.axes if ax.images]
    assert len(shown) == 5 and shown[0].get_title(loc="left").startswith("model: a")
    with pytest.raises(ValueError):
        image_grid([])
