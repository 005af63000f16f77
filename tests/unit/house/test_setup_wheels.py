"""scripts/native_wheels.sh, the rebuilt spaCy and thinc wheels that every clone's setup
installs: a setup that finds another one building waits for it and says so, with no time
limit, then takes the wheels it built instead of building them again; wheels already there
are taken at once. (The build itself runs in `make setup`: minutes, not a unit test.)"""

from __future__ import annotations

import fcntl
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "scripts" / "native_wheels.sh"
TAG = f"cp{sys.version_info[0]}{sys.version_info[1]}"
RELEASES = ["spacy==3.8.18", "thinc==8.3.14"]
WHEELS = [
    f"spacy-3.8.18-{TAG}-{TAG}-linux_x86_64.whl",
    f"thinc-8.3.14-{TAG}-{TAG}-linux_x86_64.whl",
]


def run(folder: Path, **popen) -> subprocess.Popen:
    venv = Path(sys.executable).parent.parent
    env = {"PATH": "/usr/bin:/bin", "HOME": str(folder), "CONCEPTUAL_WHEELS": str(folder)}
    return subprocess.Popen(
        ["bash", str(SCRIPT), str(venv), *RELEASES],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **popen,
    )


def test_wheels_in_the_folder_are_taken_as_they_are(tmp_path):
    for name in WHEELS:
        (tmp_path / name).write_bytes(b"")
    out, err = run(tmp_path).communicate(timeout=30)
    assert out.split() == [str(tmp_path / name) for name in WHEELS]
    assert "building" not in err


def test_a_setup_waits_for_another_ones_build_and_says_so(tmp_path):
    with open(tmp_path / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another setup, building
        waiting = run(tmp_path)
        time.sleep(3)
        assert waiting.poll() is None  # still waiting: it has no time limit of its own
        for name in WHEELS:  # what the other setup built, then its lock released
            (tmp_path / name).write_bytes(b"")
    out, err = waiting.communicate(timeout=30)
    assert waiting.returncode == 0, err
    assert "another setup is building spacy==3.8.18 thinc==8.3.14" in err
    assert "waiting for it" in err and "without Cython's profiling hooks" not in err  # no build
    assert out.split() == [str(tmp_path / name) for name in WHEELS]
