"""The one job runner (jobs/runner.py): every way a job stops is an `error:` line without
credentials and its exit code (2: the user can fix it, 1: the system failed), and an output
folder the job claimed and did not write is removed. No Ray: job_run around plain code."""

from __future__ import annotations

import argparse

import pytest

from conceptual import storage
from conceptual.config import ConfigError
from conceptual.errors import TooManyErrors
from conceptual.importers import ImportConfig, ImportSourceError
from conceptual.jobs.runner import job_main, job_run, run_import

SECRET = "SECRET-pw-48"
CREDENTIALED = f"http://admin:{SECRET}@127.0.0.1:9"
AWS_FAILURE = "When reading information for key 'x': AWS Error NETWORK_CONNECTION during call"


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("CONCEPTUAL_HOME", str(tmp_path / "home"))


def running(raised: BaseException, output: str | None = None, **kwargs):
    """A job's main whose work raises `raised` inside job_run."""

    @job_main
    def main(argv: list[str] | None = None) -> int:
        with job_run("unit", False, output=output, **kwargs):
            raise raised
        return 0

    return main


@pytest.mark.parametrize(
    "raised",
    [
        ConfigError("epochs: unknown key"),
        ValueError("no dev split"),
        storage.StorageError("no input data at /nowhere"),
        storage.TrackingUnreachable("the tracking server cannot be reached"),
    ],
    ids=["bad key", "bad value", "missing data", "tracking server"],
)
def test_what_the_user_can_fix_is_exit_code_2(raised, capsys):
    assert running(raised)() == 2
    assert capsys.readouterr().err == f"error: {raised}\n"


def test_an_unreachable_tracking_server_is_refused_whatever_a_job_refuses(capsys):
    assert running(storage.TrackingUnreachable("down"), refused=(KeyError,))() == 2
    assert running(KeyError("its own"), refused=(KeyError,))() == 2
    assert capsys.readouterr().err == "error: down\nerror: 'its own'\n"


def test_what_a_job_is_told_failed_is_exit_code_1(capsys):
    class StageStopped(Exception):
        pass

    assert running(StageStopped("curate kept nothing"), failed=(StageStopped,))() == 1
    assert capsys.readouterr().err == "error: curate kept nothing\n"


def test_rows_failed_past_the_budget_leave_the_output_incomplete(tmp_path, capsys):
    out = str(tmp_path / "out")
    assert running(TooManyErrors("3 of 4 rows failed"), output=out)() == 1
    assert running(TooManyErrors("3 of 4 rows failed"))() == 1
    assert capsys.readouterr().err.splitlines() == [
        f"error: 3 of 4 rows failed. {out} is incomplete (no _SUCCESS marker).",
        "error: 3 of 4 rows failed.",
    ]


def test_a_store_that_failed_for_good_is_exit_code_1_and_other_os_errors_are_not(tmp_path, capsys):
    out = str(tmp_path / "out")
    assert running(OSError(AWS_FAILURE), output=out)() == 1
    err = capsys.readouterr().err
    assert err.startswith("error: object storage failed after") and "AWS Error NETWORK" in err
    assert err.endswith(
        f". {out} is incomplete (no _SUCCESS marker): run the job again once the store answers.\n"
    )
    with pytest.raises(FileNotFoundError):  # a bug, not the store: its traceback is in the log
        running(FileNotFoundError("/tmp/gone"))()
    assert "error: FileNotFoundError: /tmp/gone (details in " in capsys.readouterr().err


def test_error_lines_show_no_credentials(capsys):
    assert running(ValueError(f"API request to {CREDENTIALED}/api failed"))() == 2
    with pytest.raises(RuntimeError):
        running(RuntimeError(f"API request to {CREDENTIALED}/api failed"))()
    err = capsys.readouterr().err
    assert err.count("http://***@127.0.0.1:9/api failed") == 2 and SECRET not in err


@pytest.mark.parametrize("wrote", [False, True])
def test_an_output_claimed_and_not_written_is_removed_when_the_job_stops(wrote, tmp_path):
    out = tmp_path / "out"

    @job_main
    def main(argv: list[str] | None = None) -> int:
        storage.claim_output(str(out), "unit")
        with job_run("unit", False, output=str(out)):
            if wrote:
                (out / "part-0.parquet").write_bytes(b"written")
            raise TooManyErrors("too many")
        return 0

    assert main() == 1
    assert out.exists() is wrote


def test_an_import_says_what_it_wrote_or_why_not(tmp_path, capsys):
    args = argparse.Namespace(output=str(tmp_path / "out"), overrides=[], verbose=False)
    report = {"output": "o", "images": 1, "captions": 2, "input_captions": 2, "splits": {},
              "skipped_by_reason": {}, "skipped": 0, "speech": {"clips": 1}}  # fmt: skip

    def write(config):
        assert config.curated  # the job's flags apply
        return report

    assert run_import("unit", args, write, ImportConfig, ["curated=true"]) == 0
    out = capsys.readouterr().out
    assert "imported: o  (1 images, 2 captions of 2)" in out
    assert f"speech:   {tmp_path / 'out' / 'clips'}  (1 clips)" in out
    assert f"report:   {tmp_path / 'out' / 'import.json'}" in out

    def missing(config):
        raise ImportSourceError("no captions_*.json in /data")

    assert job_main(lambda argv: run_import("unit", args, missing, ImportConfig))() == 2
    args.overrides = ["curate=true"]
    assert job_main(lambda argv: run_import("unit", args, write, ImportConfig))() == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "error: no captions_*.json in /data"
    assert err[1].startswith("error: invalid ImportConfig: curate: unknown key")
