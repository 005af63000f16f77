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
