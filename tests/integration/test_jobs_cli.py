"""The job entry points' command-line contracts (no Ray needed for these paths)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conceptual.jobs import curate

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def run_module(module: str, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        input=stdin,
        capture_output=True,
        cwd=REPO,
        timeout=300,
    )


def test_hypernymize_writes_one_line_per_input_line():
    lines = [
        "Crowd at a concert in Los Angeles",
        "",
        "crowd at a concert in los angeles",  # lowercase: transformed, not filtered
        "   ",
        "x" * 100_000,
        "A dog\rcarriage return inside",
        "\xff bytes that are not utf-8 are replaced",
    ]
    data = "\n".join(lines).encode("utf-8", "surrogateescape").replace(b"\xc3\xbf", b"\xff") + b"\n"
    result = run_module("conceptual.jobs.hypernymize", stdin=data)
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    out = result.stdout.decode().split("\n")[:-1]
    assert len(out) == len(lines)
    assert out[0] == "crowd at a concert" and out[2] == "crowd at a concert"
    assert out[1] == "REJECT\thypernymize\ttoo_short"


def test_hypernymize_with_filters_reports_the_stage():
    stdin = b"Crowd at a concert in Los Angeles\n#tbt best day ever @jane\nItalian cuisine\n"
    result = run_module("conceptual.jobs.hypernymize", "--filters", stdin=stdin)
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    assert result.stdout.decode().splitlines() == [
        "crowd at a concert",
        "REJECT\ttext\thashtag",
        "REJECT\tsyntax\tno_determiner",
    ]


def test_hypernymize_overrides_apply_and_bad_ones_fail_clearly():
    ok = run_module(
        "conceptual.jobs.hypernymize", "text.hypernym.min_tokens=1", stdin=b"Italian cuisine\n"
    )
    assert ok.stdout.decode() == "cuisine\n"
    bad = run_module("conceptual.jobs.hypernymize", "text.hypernym.min_tokns=1", stdin=b"x\n")
    assert bad.returncode == 2 and b"min_tokns" in bad.stderr


def test_curate_rejects_bad_config_before_starting_anything(tmp_path, capsys):
    assert (
        curate.main(
            [
                "--input",
                str(tmp_path / "in"),
                "--output",
                str(tmp_path / "o"),
                "entity_frequency.more_then=3",
            ]
        )
        == 2
    )
    assert "more_then" in capsys.readouterr().err


def test_features_job_fails_clearly_without_data(tmp_path):
    result = run_module(
        "conceptual.jobs.features",
        "--data",
        str(tmp_path / "nope"),
        "--output",
        str(tmp_path / "o"),
    )
    assert result.returncode == 2
    assert (
        result.stderr.decode().strip()
        == f"error: --data {tmp_path / 'nope'}: no such file or folder"
    )
    assert not (tmp_path / "o").exists()


def test_features_job_rejects_unknown_keys(tmp_path):
    data, output = str(tmp_path / "data"), str(tmp_path / "out")
    result = run_module("conceptual.jobs.features", "--data", data, "--output", output, "crop=2")
    assert result.returncode == 2 and b"crop" in result.stderr


def test_the_first_job_recipe_keeps_captions_and_an_empty_result_says_why(
    ray_local, repo, tmp_path, capsys
):
    """The README's first job: the shipped sample curated text-only. With the paper's
    entity-frequency threshold a small input keeps nothing: the job names the rule and the
    key that changes it, and prints no path that was not written."""
    import json

    sample = str(repo / "examples" / "candidates.tsv")
    first = tmp_path / "first"
    recipe = ["--input", sample, "--output", str(first), "with_images=false"]
    assert curate.main([*recipe, "entity_frequency.more_than=2"]) == 0
    out = capsys.readouterr().out
    stats = json.loads((first / "stats.json").read_text())
    assert stats["input"] == 1000 and stats["kept"] > 200
    assert f"curated:  {first / 'curated'}  ({stats['kept']} records)" in out

    empty = tmp_path / "empty"
    assert curate.main(["--input", sample, "--output", str(empty), "with_images=false"]) == 0
    out = capsys.readouterr().out
    assert not (empty / "curated").exists()
    assert f"nothing kept, so nothing written to {empty / 'curated'}" in out
    assert "entity_frequency stage rejected the last" in out
    assert "entity_frequency.more_than" in out and "it is 100 now" in out


def test_curate_refuses_an_input_inside_its_output(tmp_path, capsys):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "in.tsv").write_text("A dog on the grass\thttp://127.0.0.1/a.jpg\n")
    args = ["--input", str(tmp_path / "out" / "in.tsv"), "--output", str(tmp_path / "out")]
    assert curate.main(args) == 2  # refused as the arguments are read
    assert "overlap" in capsys.readouterr().err
    assert (tmp_path / "out" / "in.tsv").exists()
