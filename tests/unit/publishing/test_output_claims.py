"""Outputs are claimed before a job writes anything (issue 57): a file output that is there
and that the job did not write is refused, never replaced, and one it wrote may be written
again; a folder's marker names the jobs that wrote it, another job refuses it unless
`--into-existing`, and a job deletes only files it wrote. None of these tests starts Ray."""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

import pytest
from PIL import Image
from test_publish_lineage import curated_rows, write_curation

from conceptual import storage
from conceptual.jobs import caption, publish_dataset
from conceptual.models.saving import save_model

REPO = Path(__file__).resolve().parents[3]
HARVEST = "python -m conceptual.jobs.harvest"
PUBLISH = "python -m conceptual.jobs.publish_dataset"
CAPTION = "python -m conceptual.jobs.caption"


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("CONCEPTUAL_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return tmp_path / "home"


def precious(tmp_path: Path) -> Path:
    thesis = tmp_path / "precious" / "thesis.txt"
    thesis.parent.mkdir()
    thesis.write_text("four years of work")
    return thesis


# --- file outputs ---------------------------------------------------------------------------

# Every job with a file output (`type=file_output`): how to call it with a folder `d` that
# stands for its inputs and the file `f`.
FILE_WRITERS = {
    "caption": lambda d, f: ["--model", d, d, "--results-json", f],
    "evaluate_captioner": lambda d, f: ["--model", d, "--features", d, "--results-json", f],
}


def test_every_job_with_a_file_output_is_tested():
    for path in sorted((REPO / "jobs").glob("*.py")):
        if path.name != "arguments.py" and "type=file_output" in path.read_text():
            assert path.stem in FILE_WRITERS, f"{path.name} writes a file: add it to FILE_WRITERS"


@pytest.mark.parametrize("job", FILE_WRITERS)
def test_a_file_output_never_replaces_a_file_the_job_did_not_write(job, tmp_path, home, capsys):
    """`caption --results-json precious/thesis.txt` once replaced the thesis with captions:
    the job now refuses, naming the file, before it reads anything."""
    thesis = precious(tmp_path)
    module = importlib.import_module(f"conceptual.jobs.{job}")
    assert module.main(FILE_WRITERS[job](str(tmp_path), str(thesis))) == 2
    err = capsys.readouterr().err
    assert re.search(
        rf"^error: {re.escape(str(thesis))} exists and .*{job} did not write", err, re.M
    )
    assert thesis.read_text() == "four years of work"
    assert list(thesis.parent.iterdir()) == [thesis]
    assert module.main(FILE_WRITERS[job](str(tmp_path), str(tmp_path))) == 2  # a folder
    assert "is a folder" in capsys.readouterr().err


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, tiny_captioner):
    model, vocab = tiny_captioner("a red square")
    return save_model(model, vocab, tmp_path_factory.mktemp("model"))


def test_a_job_writes_its_own_results_file_again_but_not_one_changed_since(
    model_dir, tmp_path, home, capsys
):
    Image.new("RGB", (64, 48), "red").save(tmp_path / "red.jpg", "JPEG")
    results = tmp_path / "results.json"
    argv = ["--model", str(model_dir), str(tmp_path / "red.jpg"), "--beam", "1"]
    argv += ["--results-json", str(results)]
    assert caption.main(argv) == 0
    mark = json.loads(Path(f"{results}.{storage.OWNER}").read_text())
    assert mark["job"] == CAPTION and len(mark["sha256"]) == 64
    assert caption.main(argv) == 0  # its own file, as it wrote it
    results.write_text("[] edited by hand")
    assert caption.main(argv) == 2
    assert "did not write it as it is now" in capsys.readouterr().err
    assert results.read_text() == "[] edited by hand"


def test_a_claimed_file_is_marked_only_once_written(tmp_path):
    out = str(tmp_path / "r.json")
    storage.claim_file(out, CAPTION)
    storage.settle_claims(used=False)  # stopped before writing: nothing to mark
    assert not Path(f"{out}.{storage.OWNER}").exists()
    storage.claim_file(out, CAPTION)
    storage.write_json(out, [])
    storage.settle_claims(used=False)  # it wrote, then failed: the file is still its own
    storage.claim_file(out, CAPTION)
    with pytest.raises(storage.ForeignOutputError, match="did not write"):
        storage.claim_file(out, "python -m conceptual.jobs.evaluate_captioner")
    storage.settle_claims(used=True)


# --- folders name their jobs ----------------------------------------------------------------


def harvested(tmp_path: Path) -> Path:
    """A harvest's output, and a user's notes put in it afterwards."""
    out = tmp_path / "harvested"
    storage.claim_output(str(out), HARVEST)
    (out / "data").mkdir()
    (out / "data" / "notes.txt").write_text("my notes")
    return out


def test_another_job_refuses_a_folder_a_job_wrote(tmp_path, home, capsys):
    """`publish_dataset` once wrote into a harvest's output, unasked, and deleted the notes
    in its data/: the marker names harvest, and publish refuses the folder in one line."""
    out = harvested(tmp_path)
    (tmp_path / "in").mkdir()
    assert publish_dataset.main(["--data", str(tmp_path / "in"), "--output", str(out)]) == 2
    err = capsys.readouterr().err
    (line,) = [x for x in err.splitlines() if x.strip()]
    assert line.startswith(f"error: {out} is the output of {HARVEST}, not of {PUBLISH}")
    assert "--into-existing" in line
    assert (out / "data" / "notes.txt").read_text() == "my notes"


def test_a_folder_names_every_job_let_in(tmp_path):
    out = harvested(tmp_path)
    storage.claim_output(str(out), HARVEST)  # the job that wrote it, again
    with pytest.raises(storage.ForeignOutputError, match="is the output of"):
        storage.claim_output(str(out), PUBLISH)
    storage.claim_output(str(out), PUBLISH, into_existing=True)
    storage.claim_output(str(out), PUBLISH)  # let in once, it may rerun there
    storage.claim_output(str(out), HARVEST)
    assert json.loads((out / storage.OWNER).read_text()) == {"jobs": [HARVEST, PUBLISH]}
    # A marker of an older version names one job.
    (out / storage.OWNER).write_text(json.dumps({"job": HARVEST}))
    storage.claim_output(str(out), HARVEST)
    with pytest.raises(storage.ForeignOutputError, match=f"output of {HARVEST}"):
        storage.claim_output(str(out), PUBLISH)


def test_a_publish_let_into_a_folder_deletes_only_its_own_files(tmp_path, home):
    cur, out = tmp_path / "cur", harvested(tmp_path)
    write_curation(cur, curated_rows())
    stale = out / "data" / "train-00000-of-00002.parquet"  # an earlier publish's file
    stale.write_bytes(b"old")
    argv = ["--data", str(cur), "--output", str(out), "--into-existing"]
    assert publish_dataset.main(argv) == 0
    assert (out / "data" / "notes.txt").read_text() == "my notes"
    assert not stale.exists() and list((out / "data").rglob("train-00000-of-00001.parquet"))
