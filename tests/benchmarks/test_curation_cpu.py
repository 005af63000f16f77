"""CPU-seconds of a small curation, every process counted: this checkout's code side by side
with a baseline's (a git ref), on the README's first job and on 20,000 candidates.

    .venv/bin/pytest -m benchmark tests/benchmarks/test_curation_cpu.py -s
    BENCHMARK_BASELINE=HEAD~3 BENCHMARK_ROUNDS=5 ...   # the baseline ref, the runs of each
    BENCHMARK_SIZES=1000 BENCHMARK_WARMUP=0 ...        # the first job only, no warm-up runs

A small curation's CPU is mostly fixed costs (Ray's start, the NLP actors' loads, the
passes after the stages), and most of it is spent outside the driver: Ray's workers are
the raylet's children, so a counter of the driver's process tree (/usr/bin/time) sees about
a third of it. Each run is the job as a user runs it, `python -m conceptual.jobs.curate`
in a fresh process that starts its own local Ray, measured by process_cpu.py: in a cgroup
of its own where one can be made (every process it starts, Ray's daemons and workers
included, is counted by the kernel), else by polling its process tree.

The baseline is a `git worktree` of BENCHMARK_BASELINE (default HEAD: today's committed
code against the working tree's), imported in place of the editable install by a
sitecustomize on PYTHONPATH, which Ray's workers inherit. Each variant has its own
CONCEPTUAL_HOME (its MLflow database, made by a warm-up run that is not counted; the NLP
assets shared), and the runs alternate, ours then the baseline's, ROUNDS times, so that
a busy machine weighs on both alike; the medians are compared. Both variants' curated and
rejected records must be the same rows.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from conceptual.paths import state_dir
from conceptual_demo.corpus import generate_candidates, write_candidates

sys.path.insert(0, str(Path(__file__).parent))
from process_cpu import cgroup_root, measure  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
BASELINE = os.environ.get("BENCHMARK_BASELINE", "HEAD")
ROUNDS = int(os.environ.get("BENCHMARK_ROUNDS", "3"))
# Which inputs: "1000" (the first job), "20000", or both (the default).
SIZES = os.environ.get("BENCHMARK_SIZES", "1000,20000").split(",")
WARM_UP = os.environ.get("BENCHMARK_WARMUP", "1") != "0"
# The README's first job ("## Your first job"): 1,000 candidates, the text alone.
FIRST_JOB = ["with_images=false", "entity_frequency.more_than=2"]

SHIM = '''"""Import the conceptual packages from $CONCEPTUAL_SOURCE, not the editable install."""
import os, sys
from importlib.machinery import PathFinder
from importlib.util import spec_from_file_location

_root = os.environ.get("CONCEPTUAL_SOURCE")
if _root:
    _PACKAGES = {
        "conceptual": ("platform", "conceptual"),
        "conceptual.jobs": ("jobs",),
        "conceptual.pipelines": ("pipelines",),
        "conceptual.serve": ("serve",),
        "conceptual_demo": ("demo",),
    }
    _MAPPING = {name: os.path.join(_root, *parts) for name, parts in _PACKAGES.items()}

    class _SourceFinder:
        @classmethod
        def find_spec(cls, fullname, path=None, target=None):
            if fullname in _MAPPING:
                folder = _MAPPING[fullname]
                init = os.path.join(folder, "__init__.py")
                return spec_from_file_location(
                    fullname, init, submodule_search_locations=[folder]
                )
            parent = fullname.rpartition(".")[0]
            if parent in _MAPPING:
                return PathFinder.find_spec(fullname, [_MAPPING[parent]])
            return None

    sys.meta_path.insert(0, _SourceFinder)
'''


def baseline_checkout(where: Path) -> Path:
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(where), BASELINE],
        check=True,
        capture_output=True,
    )
    return where


def variant_env(source: Path, home: Path, shim: Path) -> dict[str, str]:
    """The environment of a run of `source`'s code, with its own state directory."""
    home.mkdir(parents=True, exist_ok=True)
    for shared in ("nltk_data", "cache"):  # the NLP assets and WordNet's parsed index
        if (state_dir() / shared).exists() and not (home / shared).exists():
            (home / shared).symlink_to(state_dir() / shared)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "PYTEST"))}
    pythonpath = [str(shim), *filter(None, [os.environ.get("PYTHONPATH")])]
    env.update(
        PYTHONPATH=os.pathsep.join(pythonpath),
        CONCEPTUAL_SOURCE=str(source),
        CONCEPTUAL_HOME=str(home),
        RAY_USAGE_STATS_ENABLED="0",
    )
    return env


def curate(source: Path, env: dict, input_path: str, output: Path) -> dict:
    command = [sys.executable, "-m", "conceptual.jobs.curate", "--input", input_path]
    command += ["--output", str(output), *FIRST_JOB]
    run = measure(command, env=env, cwd=str(source))
    assert run["rc"] == 0, f"curate of {source} failed: {run}"
    return run


def same_records(ours: Path, theirs: Path) -> None:
    for part in ("curated", "rejected"):
        mine, baseline = (pq.read_table(p / part).sort_by("id") for p in (ours, theirs))
        assert mine.equals(baseline), f"{part} differs from the baseline's"


def compare(inputs: dict[str, str], variants: dict[str, tuple[Path, dict]], out: Path) -> dict:
    """Median CPU-seconds of each variant over ROUNDS alternating runs, after a warm-up."""
    runs: dict[str, list[dict]] = {name: [] for name in variants}
    for name, (source, env) in variants.items():  # the MLflow database, the page cache
        if WARM_UP:
            curate(source, env, inputs[name], out / f"warm-{name}")
    for round_ in range(ROUNDS):
        for name, (source, env) in variants.items():
            runs[name].append(curate(source, env, inputs[name], out / name))
            print(f"  round {round_ + 1} {name}: {runs[name][-1]['cpu_s']:.1f} CPU-s", flush=True)
    same_records(out / "ours", out / "baseline")
    figures = {
        name: {
            "cpu_s_median": round(statistics.median(r["cpu_s"] for r in done), 1),
            "cpu_s": [round(r["cpu_s"], 1) for r in done],
            "wall_s": [round(r["wall_s"], 1) for r in done],
        }
        for name, done in runs.items()
    }
    ours, baseline = figures["ours"]["cpu_s_median"], figures["baseline"]["cpu_s_median"]
    figures["ratio_ours_to_baseline"] = round(ours / baseline, 3)
    return figures


@pytest.mark.timeout(7200)
def test_curation_cpu_seconds_against_the_baseline(tmp_path, record):
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(SHIM)
    baseline = baseline_checkout(tmp_path / "baseline")
    try:
        variants = {
            "ours": (ROOT, variant_env(ROOT, tmp_path / "home-ours", shim)),
            "baseline": (baseline, variant_env(baseline, tmp_path / "home-baseline", shim)),
        }
        sizes = {}
        if "1000" in SIZES:
            sizes["first_job_1000"] = {name: "examples/candidates.tsv" for name in variants}
        if "20000" in SIZES:  # in 4 files, as the throughput benchmark makes them
            many = tmp_path / "candidates-20000"
            many.mkdir()
            rows = generate_candidates(20_000, seed=11)
            for part in range(4):
                write_candidates(rows[part::4], str(many / f"part-{part}.tsv"), fmt="cc_tsv")
            sizes["candidates_20000"] = {name: str(many) for name in variants}
        figures: dict = {
            "method": measure_method(),
            "baseline": BASELINE,
            "rounds": ROUNDS,
            "command": "python -m conceptual.jobs.curate --input INPUT --output OUT "
            + " ".join(FIRST_JOB),
        }
        for size, inputs in sizes.items():
            print(f"{size}:", flush=True)
            figures[size] = compare(inputs, variants, tmp_path / size)
            print(f"  ratio ours/baseline: {figures[size]['ratio_ours_to_baseline']}")
        record("curation_cpu", figures)
    finally:
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(baseline)],
            capture_output=True,
        )
        shutil.rmtree(baseline, ignore_errors=True)


def measure_method() -> str:
    found = cgroup_root()
    return f"cgroup {found[1]} (cpuacct usage)" if found else "process tree polled every 0.1 s"
