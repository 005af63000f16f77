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
