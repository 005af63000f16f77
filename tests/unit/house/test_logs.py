"""A job's terminal keeps the platform's lines; third-party output goes to its log file."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conceptual import logs


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("CONCEPTUAL_HOME", str(tmp_path))
    return tmp_path


def test_standard_error_goes_to_the_log_while_our_errors_reach_the_terminal(home, capsys):
    with logs.job_output("unit") as log:
        assert logs.quiet() and log.parent == home / "logs"
        os.write(2, b"native noise\n")  # what C++ threads and subprocesses write
        subprocess.run([sys.executable, "-c", "import sys; sys.stderr.write('child noise')"])
        print("error: ours", file=logs.stderr())
    assert not logs.quiet()
    text = log.read_text()
    assert "native noise" in text and "child noise" in text
    assert "error: ours" in capsys.readouterr().err and "error: ours" not in text


def test_verbose_and_nested_jobs_leave_standard_error_alone(home):
    with logs.job_output("unit", verbose=True) as log:
        assert log is None and not logs.quiet()
    with logs.job_output("outer") as outer, logs.job_output("inner") as inner:
        assert inner == outer  # a job inside another (the demo) shares its log
    assert not logs.quiet()


def test_an_exception_is_named_on_the_terminal_with_the_log(home, capsys):
    with pytest.raises(RuntimeError), logs.job_output("unit") as log:
        raise RuntimeError("boom")
    err = capsys.readouterr().err
    assert "RuntimeError: boom" in err and str(log) in err
    os.write(2, b"")  # descriptor 2 is usable again
