"""The rules that compare images (issue 59, 2) on a local Ray: near-duplicates found cluster
by cluster (pipelines/curation/near_duplicates.py: k-means centroids, each row compared within its
nearest ones, one Ray Data group at a time) find what comparing every row at once finds;
decontamination (pipelines/curation/decontamination.py) against a folder of three photos rejects the
candidate that is a re-encode of one of them; and a small curation with dedup.near on keeps
each of the demo's photos once among its copies."""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import ray
import ray.data
from photo_copies import KINDS, copies, jpeg
from PIL import Image

from conceptual import storage
from conceptual.pipelines.curation.decontamination import (
    DecontaminateConfig,
    check,
    eval_images,
    find_in_eval_set,
)
from conceptual.pipelines.curation.near_duplicates import (
    NearDedupConfig,
    embedding_rows,
    find_near_duplicates,
    mark_found,
)
from conceptual.pipelines.dataflow.rows import table
from conceptual.vision.cnn import CnnConfig, FeatureExtractor
from conceptual_demo.images import PHOTOS, PHOTOS_BY_NAME, load_photo

pytestmark = pytest.mark.integration


def processed(vectors: np.ndarray, mirrors: np.ndarray, ids: list[str]) -> pa.Table:
    """PROCESSED rows still in the running with these embeddings, at positions 0, 1, ..."""
    return table(
        [
            {
                "id": i,
                "position": p,
                "caption": "x",
                "image_url": f"http://x.test/{i}.jpg",
                "embedding": v.tolist(),
                "mirrored_embedding": m.tolist(),
            }
            for p, (i, v, m) in enumerate(zip(ids, vectors, mirrors))
        ]  # fmt: skip
    )


def found_in(batch: pa.Table, **settings) -> tuple[pa.Table, dict]:
    """The batch marked by find_near_duplicates over its embedding rows (in blocks of 50)."""
    keys = ray.data.from_arrow(
        [embedding_rows(batch.slice(i, 50)) for i in range(0, batch.num_rows, 50)]
    )
    settings = NearDedupConfig().model_dump(exclude={"enabled"}) | settings
    arguments, report = find_near_duplicates(keys, **settings)
    return mark_found(batch, **arguments), report


def test_clusters_across_the_cluster_find_what_one_table_finds(ray_local):
    rng = np.random.default_rng(0)
    photos = np.clip(rng.normal(size=(40, 32)), 0, None)
    # each photo three times: itself and two noisy copies, in shuffled order
    vectors = np.repeat(photos, 3, axis=0) + rng.normal(scale=0.02, size=(120, 32))
    order = rng.permutation(120)
    ids = [f"p{i // 3}-{i % 3}" for i in order]
    batch = processed(vectors[order], vectors[order][:, ::-1], ids)

    one_table, report = found_in(batch, threshold=0.95, rows_per_cluster=1000)
    clustered, split_report = found_in(batch, threshold=0.95, rows_per_cluster=12, nearest=2)

    assert report["clusters"] == 1 and split_report["clusters"] == 10
    assert clustered.equals(one_table)
    rejected = one_table.filter(pa.compute.equal(one_table["reason"], "near_duplicate"))
    assert rejected.num_rows == 80 and set(rejected["stage"].to_pylist()) == {"near_duplicates"}
    kept = one_table.filter(pa.compute.is_null(one_table["reason"]))["id"].to_pylist()
    assert sorted(name.split("-")[0] for name in kept) == sorted(f"p{i}" for i in range(40))
    # each rejected row names a kept copy of its own photo, and has lost its image
    for row in rejected.to_pylist():
        named = row["detail"].removeprefix("a near-duplicate of ").split(" ")[0]
        assert named in kept and named.split("-")[0] == row["id"].split("-")[0]
        assert row["caption"] is None and row["embedding"] == []


def embedded_candidates(images: dict[str, bytes]) -> pa.Table:
    extractor = FeatureExtractor()
    decoded = [Image.open(io.BytesIO(data)).convert("RGB") for data in images.values()]
    vectors = extractor.pooled(decoded)
    return processed(vectors, np.zeros((len(images), 0)), list(images))


@pytest.fixture(scope="module")
def photo_bytes() -> dict[str, bytes]:
    return {photo.name: jpeg(load_photo(photo), 92) for photo in PHOTOS}


def test_a_candidate_copying_an_evaluation_image_is_rejected_naming_it(
    ray_local, tmp_path, photo_bytes
):
    folder = tmp_path / "eval"
    folder.mkdir()
    for name in ("coffee", "chelsea", "rocket"):
        (folder / f"{name}.jpg").write_bytes(photo_bytes[name])
    coffee_again = copies(photo_bytes["coffee"])["jpeg70"]  # new bytes: no exact duplicate
    candidates = {"coffee-70": coffee_again, "camera": photo_bytes["camera"]}
    candidates["motorcycle"] = photo_bytes["motorcycle"]
    batch = embedded_candidates(candidates)

    config = DecontaminateConfig(against=[str(folder)])
    arguments, report = find_in_eval_set(
        ray.data.from_arrow(embedding_rows(batch)), **config.model_dump(), cnn=CnnConfig()
    )
    marked = {row["id"]: row for row in mark_found(batch, **arguments).to_pylist()}

    assert [marked[i]["reason"] for i in candidates] == ["in_eval_set", None, None]
    assert marked["coffee-70"]["stage"] == "decontaminate"
    assert "the evaluation image coffee.jpg (cosine" in marked["coffee-70"]["detail"]
    (against,) = report["against"]
    assert against["path"] == str(folder) and against["images"] == 3
    assert len(against["fingerprint"]) == 32 and report["rejected"] == 1
    with pytest.raises(FileNotFoundError, match="decontaminate.against: .*gone does not exist"):
        check(DecontaminateConfig(against=[str(folder), str(tmp_path / "gone")]))


def test_an_imported_dataset_gives_the_images_of_its_split(tmp_path, photo_bytes):
    rows = [
        {"id": "a", "split": "test", "image": photo_bytes["coffee"]},
        {"id": "b", "split": "train", "image": photo_bytes["camera"]},
        {"id": "c", "split": "test", "image": photo_bytes["rocket"]},
    ]
    (tmp_path / "curated").mkdir()
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "curated" / "part-0.parquet")
    assert [image.name for image in eval_images(str(tmp_path), "test")] == ["a", "c"]
    assert [image.name for image in eval_images(str(tmp_path), None)] == ["a", "b", "c"]


@pytest.mark.slow  # a curation with images: the CNN over 17 images, twice each
def test_a_curation_with_near_dedup_keeps_each_photo_once(ray_local, tmp_path, photo_bytes):
    from conceptual.config import load
    from conceptual.pipelines.curation.curation import curate
    from conceptual.pipelines.curation.curation_config import CurationConfig

    copied = ("coffee", "rocket")
    rows = []
    for name, data in photo_bytes.items():
        made = {"original": data, **(copies(data) if name in copied else {})}
        caption = PHOTOS_BY_NAME[name].captions()[0]
        for kind, image in made.items():
            url = f"http://img.demo.invalid/{name}-{kind}.jpg"  # never fetched: bytes given
            rows.append({"url": url, "caption": caption, "jpg": image})
    (tmp_path / "in").mkdir()
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "in" / "00000.parquet")
    overrides = [
        "dedup.near.enabled=true",
        "image.min_side=100",  # the resized copies are small
        "overlap.enabled=false",
        "entity_frequency.enabled=false",
        "resume=false",
    ]
    config = load(CurationConfig, overrides=overrides)
    stats = curate(str(tmp_path / "in"), str(tmp_path / "out"), config)

    assert stats["input"] == len(PHOTOS) + len(copied) * len(KINDS)
    assert stats["kept"] == len(PHOTOS)
    assert stats["rejected"]["near_duplicates"] == {"near_duplicate": len(copied) * len(KINDS)}
    assert stats["near_duplicates"]["rejected"] == len(copied) * len(KINDS)
    on_disk = storage.read_json(str(tmp_path / "out" / "stats.json"))
    assert on_disk["near_duplicates"]["threshold"] == NearDedupConfig().threshold
    curated = pq.read_table(tmp_path / "out" / "curated").to_pylist()
    assert sorted(r["image_url"].rsplit("/", 1)[1] for r in curated) == sorted(
        f"{photo.name}-original.jpg" for photo in PHOTOS
    )
    kept_ids = {r["image_url"].rsplit("/", 1)[1].split("-")[0]: r["id"] for r in curated}
    rejected = pq.read_table(tmp_path / "out" / "rejected").to_pylist()
    assert {r["reason"] for r in rejected} == {"near_duplicate"}
    for row in rejected:  # each copy names its own photo's kept record
        photo = row["image_url"].rsplit("/", 1)[1].split("-")[0]
        assert row["detail"].startswith(f"a near-duplicate of {kept_ids[photo]} (cosine ")
