"""The harvest job's command line (issue 47, 1): inputs that name no web archive are said
at once, before Ray starts; the inputs a folder, a glob and a file name. No Ray."""

from __future__ import annotations

import re
import sys

import pytest
from web_archives import response, write_archive  # tests/web_archives.py

from conceptual.pipelines.curation.harvest import archive_files, is_archive_input
from conceptual.storage import StorageError


@pytest.fixture
def ray_starts(monkeypatch, tmp_path) -> list:
    """The calls that would start Ray: none may happen before the job refuses its inputs."""
    from conceptual import runtime

    monkeypatch.setenv("CONCEPTUAL_HOME", str(tmp_path / "home"))
    calls: list = []
    monkeypatch.setattr(runtime, "init_ray", lambda *args, **kwargs: calls.append(args))
    if (ray := sys.modules.get("ray")) is not None:
        monkeypatch.setattr(ray, "init", lambda *args, **kwargs: calls.append(args))
    return calls


@pytest.mark.parametrize("pattern", ["crawl/*.warc.gz", "crawl/none-*.wat"])
def test_inputs_naming_no_archive_are_said_before_ray(pattern, tmp_path, capsys, ray_starts):
    from conceptual.jobs import harvest

    (tmp_path / "crawl").mkdir()
    (tmp_path / "crawl" / "notes.txt").write_text("not an archive")
    code = harvest.main(["--input", str(tmp_path / pattern), "--output", str(tmp_path / "out")])
    assert code == 2 and not ray_starts
    assert re.search(r"^error: no web archives .* at .*crawl/", capsys.readouterr().err, re.M)


def test_folders_globs_and_files_name_their_archives(tmp_path):
    crawl = tmp_path / "crawl"
    (crawl / "deeper").mkdir(parents=True)
    record = response("http://a.example/", b'<img src="a.jpg" alt="a">')
    for name in ("a.warc.gz", "b.wat.gz", "deeper/c.warc", "_SUCCESS", ".hidden.warc"):
        write_archive(crawl / name, [record])
    (crawl / "notes.txt").write_text("x")
    assert archive_files([str(crawl)]) == [
        str(crawl / "a.warc.gz"),
        str(crawl / "b.wat.gz"),
        str(crawl / "deeper" / "c.warc"),
    ]
    assert archive_files([str(crawl / "*.warc.gz"), str(crawl / "a.warc.gz")]) == [
        str(crawl / "a.warc.gz")  # each once
    ]
    named = crawl / "any-name.bin"  # a file named on its own is read by its content
    named.write_bytes(b"")
    assert archive_files([str(named)]) == [str(named)]
    assert is_archive_input(str(crawl / "*.warc.gz")) and not is_archive_input(
        str(crawl / "notes.txt")
    )
    with pytest.raises(StorageError, match="no web archives"):
        archive_files([str(tmp_path / "missing")])


def test_a_task_counts_a_file_it_cannot_open_and_writes_the_others(tmp_path):
    """One read task (what Ray runs per file), called as a plain function: a file that is
    gone is `unreadable_file`, and the job goes on; a file's candidates are its Parquet."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from conceptual.harvest import HarvestRules
    from conceptual.pipelines.curation.harvest import _harvest_files
    from conceptual.records import HARVESTED

    page = "".join(f'<img src="{i}.jpg" alt="photo {i}">' for i in range(25)).encode()
    good = write_archive(tmp_path / "good.warc.gz", [response("http://a.example/", page)])
    batch = pa.Table.from_pylist(
        [{"index": 0, "uri": str(good)}, {"index": 1, "uri": str(tmp_path / "gone.warc.gz")}]
    )
    rows = _harvest_files(batch, str(tmp_path / "out"), HarvestRules(), 10).to_pylist()
    counts = [json.loads(r["counts"]) for r in rows]
    assert counts[0]["candidates"] == 25 and counts[1] == {"files": 1, "unreadable_file": 1}
    assert rows[1]["error"] and rows[0]["error"] is None
    written = pq.ParquetFile(tmp_path / "out" / "part-00000.parquet")
    assert written.metadata.num_row_groups == 3  # streamed out 10 rows at a time
    table = written.read()
    assert table.schema == HARVESTED and table["alt_text"].to_pylist()[-1] == "photo 24"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["part-00000.parquet"]


def test_an_output_inside_the_folder_a_glob_reads_is_refused(tmp_path, capsys, ray_starts):
    from conceptual.jobs import harvest

    (tmp_path / "crawl").mkdir()
    argv = ["--input", str(tmp_path / "crawl" / "*.warc.gz"), "--output", str(tmp_path / "crawl" / "out")]  # fmt: skip
    assert harvest.main(argv) == 2 and not ray_starts
    assert "overlap" in capsys.readouterr().err


def test_a_file_whose_reading_raises_is_counted_and_the_others_written(tmp_path, monkeypatch):
    """No file ends the job (issue 57, 2): whatever a file's harvest raises (here a bug's
    RuntimeError, not storage's OSError) counts that file as unreadable_file, with its
    error, and the next file is harvested."""
    import json

    import pyarrow as pa

    from conceptual.harvest import HarvestRules
    from conceptual.pipelines.curation import harvest as harvesting

    page = b'<img src="a.jpg" alt="a photo">'
    files = [write_archive(tmp_path / f"{name}.warc.gz", [response("http://a.example/", page)]) for name in ("bad", "good")]  # fmt: skip
    real = harvesting.harvest_archive

    def failing(open_at, source, rules, counts):
        if source.endswith("bad.warc.gz"):
            raise RuntimeError("a bug")
        return real(open_at, source, rules, counts)

    monkeypatch.setattr(harvesting, "harvest_archive", failing)
    batch = pa.Table.from_pylist([{"index": i, "uri": str(f)} for i, f in enumerate(files)])
    rows = harvesting._harvest_files(batch, str(tmp_path / "out"), HarvestRules(), 10).to_pylist()
    assert json.loads(rows[0]["counts"]) == {"files": 1, "unreadable_file": 1}
    assert rows[0]["error"] == "a bug" and json.loads(rows[1]["counts"])["candidates"] == 1
