"""Shared fixtures. Tiers: unit (default, no Ray), integration and e2e (marked), realdata
(reads ../shared/data, skipped when absent), benchmark (tests/benchmarks only)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("RAY_DATA_DISABLE_PROGRESS_BARS", "1")

REPO = Path(__file__).resolve().parents[1]


def real_data_dir() -> Path | None:
    """../shared/data (or $CONCEPTUAL_REAL_DATA) when present; a user's clone has none."""
    path = Path(os.environ.get("CONCEPTUAL_REAL_DATA", REPO.parent / "shared" / "data"))
    return path if path.is_dir() else None


@pytest.fixture(scope="session")
def real_data() -> Path:
    path = real_data_dir()
    if path is None:
        pytest.skip("real data not present (set CONCEPTUAL_REAL_DATA or check out ../shared)")
    return path


@pytest.fixture(scope="session")
def nlp():
    from conceptual.assets import load_spacy

    return load_spacy()
