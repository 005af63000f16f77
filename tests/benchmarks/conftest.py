"""Benchmarks: never part of the default test run (`make bench` runs them). Every test in
this folder is marked `benchmark`; results are printed and saved as JSON under
<state>/benchmarks/ so BENCHMARKS.md can quote them with the command that made them."""

from __future__ import annotations

import json
import platform
import time

import pytest

from conceptual.paths import state_dir


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/benchmarks/" in str(item.fspath):
            item.add_marker(pytest.mark.benchmark)


@pytest.fixture
def record():
    """record(name, results): print and save a benchmark's results with the machine."""

    def save(name: str, results: dict) -> None:
        payload = {
            "benchmark": name,
            "when": time.strftime("%Y-%m-%d %H:%M:%S"),
            "machine": {"cpus": __import__("os").cpu_count(), "python": platform.python_version()},
            **results,
        }
        out = state_dir() / "benchmarks" / f"{name}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(payload, indent=2))
        print(f"\n{name}: {json.dumps(results, indent=2)}\nsaved to {out}")

    return save
