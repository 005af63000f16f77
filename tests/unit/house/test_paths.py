"""Local paths given to jobs: absolute as the user meant them, also under `ray job submit`."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conceptual.paths import RAY_WORKING_DIR_COPIES, LocationError, source_checkout, user_path


@pytest.mark.parametrize(
    "uri", ["s3://bucket/prefix", "file:///data/x", "models:/captioner@champion", "runs:/abc/model"]
)
def test_uris_are_left_as_they_are(uri, tmp_path):
    assert user_path(uri, cwd=tmp_path / RAY_WORKING_DIR_COPIES / "x") == uri


def test_local_paths_become_absolute(tmp_path):
    assert user_path("out/small", cwd=tmp_path) == str(tmp_path / "out" / "small")
    assert user_path("./a/../b", cwd=tmp_path) == str(tmp_path / "b")
    assert user_path("/data/in.tsv", cwd=tmp_path) == "/data/in.tsv"
    assert user_path("~/x") == str(Path.home() / "x")


def _working_dir_copy(tmp_path: Path, project: Path) -> Path:
    """A folder laid out as Ray lays out a job's working directory, holding `project`'s
    pyproject.toml."""
    copy = tmp_path / "session" / RAY_WORKING_DIR_COPIES / "_ray_pkg_0123"
    copy.mkdir(parents=True)
    shutil.copy(project / "pyproject.toml", copy / "pyproject.toml")
    return copy


def test_relative_paths_in_a_working_dir_copy_of_the_checkout_resolve_in_the_checkout(tmp_path):
    checkout = source_checkout()
    assert checkout is not None  # the tests run from the source checkout
    copy = _working_dir_copy(tmp_path, checkout)
    assert user_path("out/small", cwd=copy) == str(checkout / "out" / "small")


def test_relative_paths_in_another_working_dir_copy_are_refused(tmp_path):
    other = tmp_path / "other-project"
    other.mkdir()
    (other / "pyproject.toml").write_text("[project]\nname = 'other'\n")
    copy = _working_dir_copy(tmp_path, other)
    with pytest.raises(LocationError, match="absolute path or an s3:// URI"):
        user_path("out/small", cwd=copy)
    assert user_path(str(tmp_path / "abs"), cwd=copy) == str(tmp_path / "abs")
