import pytest

from conceptual import storage


def test_local_round_trip_and_listing(tmp_path):
    base = str(tmp_path / "out")
    storage.write_json(storage.join(base, "a", "stats.json"), {"n": 1})
    storage.write_bytes(storage.join(base, "b.bin"), b"xyz")
    assert storage.read_json(storage.join(base, "a", "stats.json")) == {"n": 1}
    assert sorted(p.rsplit("/", 1)[1] for p in storage.list_files(base)) == ["b.bin", "stats.json"]
    assert not list(tmp_path.rglob("*.tmp"))  # atomic writes leave no temporaries
    storage.delete(base)
    assert not storage.exists(base)
    storage.delete(base)  # deleting nothing is fine


def test_file_uri_and_path_agree(tmp_path):
    assert storage.resolve(f"file://{tmp_path}")[1] == storage.resolve(str(tmp_path))[1]


def test_s3_uri_uses_endpoint_from_environment(monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    fs, path = storage.resolve("s3://bucket/some/key")
    assert path == "bucket/some/key"
    assert fs.type_name == "s3"


@pytest.mark.parametrize("bad", ["s3://", "gs://bucket/x", "http://host/x"])
def test_bad_uris(bad):
    with pytest.raises(storage.StorageError):
        storage.resolve(bad)


def test_missing_file_is_a_storage_error(tmp_path):
    with pytest.raises(storage.StorageError, match="does not exist"):
        storage.read_bytes(str(tmp_path / "absent"))


def test_output_parts_are_read_only_from_finished_jobs(tmp_path):
    output = tmp_path / "run"
    (output / "curated").mkdir(parents=True)
    for uri in (str(output), str(output / "curated")):  # the output, or the part itself
        with pytest.raises(storage.IncompleteOutputError) as error:
            storage.output_part(uri, "curated")
        assert f"{output} has no _SUCCESS marker" in str(error.value)
        assert "allow_incomplete=true" in str(error.value)  # says how to read it anyway
        assert storage.output_part(uri, "curated", allow_incomplete=True) == str(output / "curated")
    (output / storage.SUCCESS).write_text("{}")
    assert storage.output_part(str(output), "curated") == str(output / "curated")
    assert storage.output_part(str(output / "curated"), "curated") == str(output / "curated")


def test_a_folder_of_files_without_parts_needs_its_own_marker(tmp_path):
    (tmp_path / "_SUCCESS").write_text("{}")  # a marker above is not this folder's
    (tmp_path / "mine").mkdir()
    with pytest.raises(storage.IncompleteOutputError):
        storage.output_part(str(tmp_path / "mine"), "features")


def test_features_job_refuses_an_unfinished_curation_and_keeps_its_last_output(tmp_path):
    from conceptual.pipelines.features.features import FeaturesConfig, extract

    (tmp_path / "curation" / "curated").mkdir(parents=True)  # a crashed run: no _SUCCESS
    (tmp_path / "features").mkdir()
    (tmp_path / "features" / storage.SUCCESS).write_text("{}")  # the last good features
    with pytest.raises(storage.IncompleteOutputError, match="allow_incomplete=true"):
        extract(str(tmp_path / "curation"), str(tmp_path / "features"), FeaturesConfig())
    assert (tmp_path / "features" / storage.SUCCESS).exists()
