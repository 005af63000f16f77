"""Where the platform keeps local state (MLflow database and artifacts, NLP assets, demo data).

Order: $CONCEPTUAL_HOME; else `.state/` in the source checkout the package runs from
(an editable install, so `ray job submit --working-dir .` jobs, whose working directory is
a temporary copy, still find the same state); else ~/.conceptual.
"""

from __future__ import annotations

import os
from pathlib import Path


def source_checkout() -> Path | None:
    """The repository root when the package is imported from a source checkout."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "pyproject.toml").is_file() and (root / "platform").is_dir() else None


def state_dir() -> Path:
    if env := os.environ.get("CONCEPTUAL_HOME"):
        path = Path(env).expanduser()
    elif checkout := source_checkout():
        path = checkout / ".state"
    else:
        path = Path.home() / ".conceptual"
    path.mkdir(parents=True, exist_ok=True)
    return path.resolve()


# Where Ray unpacks a job's `--working-dir` on the node that runs it.
RAY_WORKING_DIR_COPIES = "runtime_resources/working_dir_files"


class LocationError(ValueError):
    """A path a job cannot place where the user meant it; the message says what to give."""


def user_path(location: str, cwd: Path | None = None) -> str:
    """A job's local path argument as the user meant it, absolute; URIs (`s3://`, `file://`,
    `models:/`, `runs:/`) unchanged.

    Under `ray job submit --working-dir DIR` a job runs in Ray's temporary copy of DIR, which
    Ray deletes: a relative path there would be read from, or written into, that copy. It is
    resolved against DIR itself when DIR is this source checkout (the README's way: submit
    from the repository root), and refused otherwise, since DIR is then unknown."""
    if ":/" in location:
        return location
    path = Path(location).expanduser()
    if path.is_absolute():
        return os.path.normpath(path)
    cwd = cwd or Path.cwd()
    if RAY_WORKING_DIR_COPIES in cwd.as_posix():
        checkout = source_checkout()
        if checkout is None or not _same_project(cwd, checkout):
            raise LocationError(
                f"{location!r} is relative, and this job runs in Ray's temporary copy of its "
                "--working-dir, where nothing written outlives the job: give an absolute "
                "path or an s3:// URI"
            )
        cwd = checkout
    return os.path.normpath(cwd / path)


def _same_project(copy: Path, checkout: Path) -> bool:
    """Whether a working-dir copy is a copy of the checkout (its project file is the same)."""
    try:
        return (copy / "pyproject.toml").read_bytes() == (checkout / "pyproject.toml").read_bytes()
    except OSError:
        return False
