"""The shards users already have, as input (issue 60, 3), on a local Ray with moto's S3 on
127.0.0.1: a folder laid out as img2dataset writes it (`00000.tar` by webdataset's
TarWriter, its `00000.parquet` and `00000_stats.json` beside it) with img2dataset's Parquet
output (`url`, `caption`, `status`, `jpg` bytes) curated with images, none fetched again, and
every image still checked; the curation's own shards read back by `webdataset` and curated
again from a glob; a tar without captions refused."""

from __future__ import annotations

import io
import json
import tarfile
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conceptual import storage
from conceptual_demo.images import PHOTOS_BY_NAME, build_images

pytestmark = pytest.mark.integration

BASE = "s3://conceptual/shard-input"
# Were any image fetched, this would be refused (fetch stage, not a kept row).
UNFETCHABLE = "http://img.demo.invalid"
SETTINGS = [
    "overlap.enabled=false",  # what is read, not whether the classifier agrees
    "entity_frequency.enabled=false",
    "webdataset.enabled=true",
    "resources.batch_size=64",
]


def tar_of(samples: list[dict]) -> bytes:
    """Samples as img2dataset's WebDatasetSampleWriter writes them: webdataset's TarWriter."""
    from webdataset import TarWriter

    out = io.BytesIO()
    with TarWriter(out) as writer:
        for sample in samples:
            writer.write(sample)
    return out.getvalue()


def img2dataset_sample(key: int, image: bytes, caption: str, **meta) -> dict:
    meta = {"url": f"{UNFETCHABLE}/{key}.jpg", "caption": caption, "key": f"{key:09d}",
            "status": "success", "error_message": None, "width": 0, "height": 0} | meta  # fmt: skip
    return {"__key__": f"{key:09d}", "jpg": image, "txt": caption, "json": json.dumps(meta)}


@pytest.fixture(scope="module")
def inputs(ray_local, tmp_path_factory):
    """The img2dataset folder on S3 and what each part of it should give."""
    catalogue = build_images(tmp_path_factory.mktemp("shard-images"))
    in_parquet = catalogue.of_kind("good")[:2]  # each image once: none a duplicate of another
    views = [f for f in catalogue.views() if f not in in_parquet]
    image = {f.name: catalogue.path(f).read_bytes() for f in catalogue.files}

    def caption(file) -> str:
        return PHOTOS_BY_NAME[file.photo].captions()[0]

    good = [img2dataset_sample(i, image[f.name], caption(f)) for i, f in enumerate(views)]
    half = len(good) // 2
    broken = {kind: catalogue.of_kind(kind)[0] for kind in ("png", "corrupt", "small")}
    bad = [
        img2dataset_sample(100 + i, image[f.name], caption(f))
        for i, f in enumerate(broken.values())
    ]
    no_caption = {"__key__": "000000200", "jpg": image[views[0].name]}
    storage.write_bytes(f"{BASE}/in/00000.tar", tar_of([*good[:half], *bad, no_caption]))
    # img2dataset's metadata of a shard: every URL it tried, beside the shard; not candidates
    meta = [json.loads(s["json"]) for s in good[:half]] + [{"url": "x", "caption": "y"}]
    sidecar = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(meta), sidecar)
    storage.write_bytes(f"{BASE}/in/00000.parquet", sidecar.getvalue())
    storage.write_bytes(f"{BASE}/in/00000_stats.json", b'{"count": 99}')
    second = tar_of(good[half:-2])
    storage.write_bytes(f"{BASE}/in/00001.tar", second)
    # a shard cut inside its last sample's image: what came before, and one rejection
    cut = tar_of(good[-2:])
    last_image = [m for m in tarfile.open(fileobj=io.BytesIO(cut)) if m.name.endswith(".jpg")][-1]
    storage.write_bytes(f"{BASE}/in/00002.tar", cut[: last_image.offset_data + 1000])
    # img2dataset's output_format=parquet: the image in `jpg`, a failed download without
    parquet_rows = [
        {"url": f"{UNFETCHABLE}/p{i}.jpg", "caption": caption(f), "key": f"p{i}",
         "status": "success", "jpg": image[f.name]}
        for i, f in enumerate(in_parquet)
    ] + [{"url": f"{UNFETCHABLE}/gone.jpg", "caption": "A cup of espresso on a saucer",
          "key": "p9", "status": "failed_to_download", "jpg": None}]  # fmt: skip
    table = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(parquet_rows), table)
    storage.write_bytes(f"{BASE}/in/parquet/00000.parquet", table.getvalue())
    return {
        "good": len(good) - 1 + 2,  # the cut shard's last sample is lost; Parquet's two
        "samples": len(good) + len(bad) + 1 + 3,  # the cut sample: its shard's rejection
        "in_shards": len(good) + len(bad) + 1,
    }


def test_the_folder_reads_as_candidates_with_their_images(inputs):
    """What the readers make of the folder, before any stage: each sample and Parquet row
    once, the sidecar metadata not at all, the images in the rows."""
    from conceptual.pipelines.dataflow.readers import read_candidates

    rows = read_candidates(f"{BASE}/in", "auto", 1 << 20).take_all()
    assert len(rows) == inputs["samples"]
    reasons = Counter(row["reason"] for row in rows)
    assert reasons == {None: inputs["samples"] - 2, "missing_caption": 1, "malformed_row": 1}
    fetched = [row["image_url"] for row in rows if row["reason"] is None and row["image"] is None]
    assert fetched == [f"{UNFETCHABLE}/gone.jpg"]  # img2dataset's failed download alone
    assert len({row["position"] for row in rows}) == len(rows)


def test_a_glob_of_shards_reads_only_what_it_matches(inputs):
    from conceptual.pipelines.dataflow.readers import read_candidates

    rows = read_candidates(f"{BASE}/in/0000[01].tar", "auto", 1 << 20).take_all()
    assert len(rows) == inputs["in_shards"] - 2  # 00002.tar: its sample and its rejection


@pytest.fixture(scope="module")
def curated(inputs):
    from conceptual.jobs import curate

    out = f"{BASE}/out"
    assert curate.main(["--input", f"{BASE}/in", "--output", out, *SETTINGS]) == 0
    return storage.read_json(f"{out}/stats.json")


def rejected_rows(uri: str) -> list[dict]:
    fs, _ = storage.resolve(uri)
    rows = []
    for path in storage.list_files(uri):
        with fs.open_input_file(path) as f:
            rows += pq.read_table(f, columns=["stage", "reason", "detail"]).to_pylist()
    return rows


@pytest.mark.slow  # a curation with images: 5.7 min on 2 cores shared with other jobs
def test_shards_and_parquet_images_are_curated_without_fetching(inputs, curated):
    """Every sample of the shards and every Parquet row is counted once; the sidecar
    metadata is not; no shard image is fetched; a row without bytes is (and fails)."""
    assert curated["input"] == inputs["samples"]  # the cut sample: its shard's rejection
    assert curated["kept"] == inputs["good"]
    rejected = curated["rejected"]
    assert rejected["read"] == {"missing_caption": 1, "malformed_row": 1}
    assert rejected["fetch"] == {"dns": 1}  # the failed download alone, fetched again
    image = rejected["image"]
    assert set(image) == {"not_jpeg", "corrupt", "too_small"} and sum(image.values()) == 3
    details = [r["detail"] for r in rejected_rows(f"{BASE}/out/rejected")]
    assert any("00002.tar: the shard breaks after 1 samples" in (d or "") for d in details)


@pytest.mark.slow  # a second curation with images: 10.6 min on the same loaded cores
def test_the_curations_shards_read_with_webdataset_and_curate_again_from_a_glob(curated, tmp_path):
    """The round trip: OUTPUT/shards/*/NNNNN.tar as `webdataset` reads them, then the same
    shards (a glob) as the next curation's input, their images taken as they are."""
    import webdataset

    from conceptual.config import load
    from conceptual.pipelines.curation.curation import run
    from conceptual.pipelines.curation.curation_config import CurationConfig

    local = []
    for n, path in enumerate(storage.list_files(f"{BASE}/out/shards/*/*.tar")):
        local.append(str(tmp_path / f"{n:05d}.tar"))
        (tmp_path / f"{n:05d}.tar").write_bytes(storage.read_bytes(f"s3://{path}"))
    samples = 0
    for sample in webdataset.WebDataset(local, shardshuffle=False, empty_check=False):
        assert sample["jpg"][:2] == b"\xff\xd8" and sample["txt"]
        samples += 1
    assert samples == curated["kept"]
    again, _ = run(
        f"{BASE}/out/shards/*/*.tar", f"{BASE}/again", load(CurationConfig, overrides=SETTINGS)
    )
    assert again["input"] == samples
    assert "fetch" not in again["rejected"] or not again["rejected"]["fetch"]
    assert again["kept"] == samples  # their alt-texts (the JSON's) and images, as before


@pytest.mark.slow  # the pipeline's curate stage is curate's own reader, tested above
def test_the_pipeline_job_reads_a_glob_of_shards(inputs):
    """The pipeline job's curate stage, given a glob of shards as its input (text alone:
    the images are read and carried, not checked)."""
    from conceptual.config import load
    from conceptual.pipelines import pipeline

    overrides = [f"input={BASE}/in/*.tar", f"output={BASE}/walk", "steps=[curate]"]
    overrides += ["curate.with_images=false", "curate.entity_frequency.enabled=false"]
    result = pipeline.run(load(pipeline.PipelineConfig, overrides=overrides))
    assert result["steps"]["curate"]["result"]["input"] == inputs["in_shards"]
    stats = storage.read_json(f"{BASE}/walk/curated/stats.json")
    assert stats["rejected"]["read"] == {"missing_caption": 1, "malformed_row": 1}


def test_a_tar_without_captions_is_refused_before_any_work(ray_local, capsys):
    from conceptual.jobs import curate

    storage.write_bytes(f"{BASE}/bare/00000.tar", tar_of([{"__key__": "0", "jpg": b"\xff\xd8"}]))
    code = curate.main(["--input", f"{BASE}/bare", "--output", f"{BASE}/bare-out", *SETTINGS])
    assert code == 2
    assert "00000.tar: its first sample has no caption (0.jpg)" in capsys.readouterr().err
