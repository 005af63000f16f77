"""The speech synthesis job on a local Ray: accounting with empty, huge and non-ASCII
captions, the outputs (Parquet, WebDataset, MLflow, S3), resuming after an interruption."""

from __future__ import annotations

import hashlib
import tarfile

import mlflow
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conceptual import storage
from conceptual.pipelines.features.speech import SpeechConfig, records_uri, run, synthesize
from conceptual.records import image_id
from conceptual.storage import IncompleteOutputError

pytestmark = pytest.mark.integration

CAPTIONS = [
    "a dog runs across the grassy field",
    "",
    "two children play on a beach at sunset",
    "word " * 400,
    "un café à Zürich près de la gare",
    "a man rides a bicycle down a city street",
    "a plate of food on a wooden table",
]
CONFIG = SpeechConfig(clips_per_shard=2, max_chars=500, experiment="speech-test")


def clips_by_id(output):
    table = pq.read_table(output / "clips")
    return {row["id"]: row for row in table.to_pylist()}


@pytest.fixture(scope="module")
def speech_run(ray_local, tmp_path_factory):
    root = tmp_path_factory.mktemp("speech")
    images = [f"image-{i % 3}".encode() for i in range(len(CAPTIONS))]
    (root / "data" / "curated").mkdir(parents=True)
    records = pa.table(
        {
            "id": [f"caption-{i}" for i in range(len(CAPTIONS))],
            "image_url": [f"http://example.test/{i % 3}.jpg" for i in range(len(CAPTIONS))],
            "caption": CAPTIONS,
            "image": images,
            "split": ["train"] * len(CAPTIONS),
        }
    )
    pq.write_table(records, root / "data" / "curated" / "part-0.parquet")
    (root / "data" / "_SUCCESS").write_text("{}")
    stats, run_id = run(str(root / "data"), str(root / "out"), CONFIG)
    return {"root": root, "stats": stats, "run_id": run_id, "images": images}


def test_every_caption_is_a_clip_or_a_rejection_with_its_reason(speech_run):
    stats, out = speech_run["stats"], speech_run["root"] / "out"
    assert (stats["input"], stats["kept"]) == (7, 5)
    assert stats["rejected"] == {"synthesize": {"empty": 1, "too_long": 1}}
    rejected = pq.read_table(out / "rejected").to_pylist()
    assert sorted(r["reason"] for r in rejected) == ["empty", "too_long"]
    assert (out / "_SUCCESS").exists() and storage.read_json(str(out / "stats.json"))["kept"] == 5


def test_clips_carry_their_caption_image_and_parameters(speech_run):
    clips = clips_by_id(speech_run["root"] / "out")
    by_caption = {clip["caption_id"]: clip for clip in clips.values()}
    clip = by_caption["caption-4"]
    assert clip["caption"] == CAPTIONS[4] and clip["split"] == "train"
    assert clip["image_id"] == image_id(speech_run["images"][4])
    assert clip["audio"][:4] == b"fLaC" and clip["sample_rate"] == 16_000
    assert clip["source"] == "espeak-ng" and "+" in clip["voice"] and clip["engine_wpm"] > 0
    with tarfile.open(next((speech_run["root"] / "out" / "shards").glob("*.tar"))) as tar:
        names = tar.getnames()
    assert {name.rsplit(".", 1)[1] for name in names} == {"flac", "txt", "json"}


def test_the_run_is_in_mlflow_with_example_clips(speech_run):
    client = mlflow.tracking.MlflowClient()
    run = client.get_run(speech_run["run_id"])
    assert run.data.metrics["clips"] == 5 and run.data.metrics["rejected.synthesize.too_long"] == 1
    examples = [a.path for a in client.list_artifacts(speech_run["run_id"], "examples")]
    assert sum(path.endswith(".flac") for path in examples) == 4


def test_an_interrupted_run_resumes_without_redoing_or_duplicating(speech_run):
    out = speech_run["root"] / "out"
    before = {k: hashlib.sha1(v["audio"]).hexdigest() for k, v in clips_by_id(out).items()}
    # A crash mid-shard: its done marker never written, its clips left half-way, no _SUCCESS.
    (out / "_SUCCESS").unlink()
    (out / "done" / "part-0-0000-0000004.json").unlink()
    (out / "clips" / "part-0-0000-0000004.parquet").write_bytes(b"partial")

    stats = synthesize(str(speech_run["root"] / "data"), str(out), CONFIG)

    assert stats["resumed_shards"] == 3 and (stats["input"], stats["kept"]) == (7, 5)
    after = {k: hashlib.sha1(v["audio"]).hexdigest() for k, v in clips_by_id(out).items()}
    assert after == before  # regenerated bit for bit, nothing duplicated or lost


def test_new_captions_in_the_same_folder_are_not_taken_for_done(speech_run, tmp_path):
    """The input rewritten in place (same file name, row counts and shards): nothing is
    resumed, and every clip speaks a caption of the new input."""
    import shutil

    data, out = tmp_path / "data", tmp_path / "out"
    shutil.copytree(speech_run["root"] / "data", data)
    synthesize(str(data), str(out), CONFIG)
    part = data / "curated" / "part-0.parquet"
    table = pq.read_table(part)
    fresh = [f"new-{i}" for i in range(table.num_rows)]
    table = table.set_column(table.schema.get_field_index("id"), "id", pa.array(fresh))
    pq.write_table(table, part)

    stats = synthesize(str(data), str(out), CONFIG)

    assert stats["resumed_shards"] == 0
    spoken = {clip["caption_id"] for clip in clips_by_id(out).values()}
    assert spoken and spoken <= set(fresh)


def test_reads_and_writes_object_storage(speech_run):
    source = speech_run["root"] / "data" / "curated" / "part-0.parquet"
    storage.write_bytes("s3://conceptual/speech/in/curated/part-0.parquet", source.read_bytes())
    storage.write_json("s3://conceptual/speech/in/_SUCCESS", {})
    config = SpeechConfig(clips_per_shard=4, max_chars=500, webdataset=False)

    stats = synthesize("s3://conceptual/speech/in", "s3://conceptual/speech/out", config)

    assert (stats["input"], stats["kept"]) == (7, 5)
    assert storage.exists("s3://conceptual/speech/out/_SUCCESS")
    assert len(storage.list_files("s3://conceptual/speech/out/clips")) == 2


def test_an_unfinished_input_is_refused_unless_allowed(tmp_path):
    (tmp_path / "curated").mkdir()
    pq.write_table(
        pa.table({"id": ["a"], "caption": ["a cat"]}), tmp_path / "curated" / "p.parquet"
    )
    with pytest.raises(IncompleteOutputError):
        records_uri(str(tmp_path))
    assert records_uri(str(tmp_path), allow_incomplete=True) == str(tmp_path / "curated")
    assert records_uri(str(tmp_path / "curated"), allow_incomplete=True) == str(
        tmp_path / "curated"
    )
