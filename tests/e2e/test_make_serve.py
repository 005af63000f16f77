"""`make serve LOW_LATENCY=1` as a user runs it (scripts/serve.sh), on a home with and without
Ray's ~/.ray/auth_token: the front door answers, HAProxy's stats and metrics listen on
127.0.0.1 only and its admin socket is the owner's alone, and Ctrl-C stops the front door,
Serve and the Ray head it started, and no other Ray (the one of this test session stays)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import stat
import subprocess
import tempfile
from pathlib import Path

import httpx
import pytest
from ray_cli import free_port
from waiting import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SERVING = "front door on http://"


def listening(port: int) -> set[str]:
    """The addresses something listens on at TCP `port` (iproute2's ss)."""
    lines = subprocess.run(["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True)
    return {line.split()[3].rsplit(":", 1)[0] for line in lines.stdout.splitlines()}


def processes_naming(path: Path) -> list[str]:
    found = subprocess.run(["pgrep", "-af", str(path)], capture_output=True, text=True)
    return found.stdout.splitlines()


@pytest.mark.parametrize("token_file", [True, False], ids=["with ~/.ray/auth_token", "without"])
def test_make_serve_low_latency_keeps_to_loopback_and_stops_whole(repo, tmp_path, token_file):
    # Ray's socket paths must stay under 108 characters: a short folder, not tmp_path's.
    home, run = tmp_path / "home", Path(tempfile.mkdtemp(prefix="serve-", dir="/tmp"))
    (home / ".ray").mkdir(parents=True)
    if token_file:  # what ray.init() leaves for a local cluster: the head then wants tokens
        (home / ".ray" / "auth_token").write_text("0123456789abcdef" * 2)
    door = free_port()
    env = {**os.environ, "HOME": str(home), "SERVE_RUN_DIR": str(run), "LOW_LATENCY": "1",
           "FRONT_DOOR": f"listen=127.0.0.1:{door}", "RAY_PORT": str(free_port()),
           "DASHBOARD_PORT": str(free_port()), "CONCEPTUAL_HOME": str(tmp_path / "state")}  # fmt: skip
    for inherited in ("RAY_ADDRESS", "RAY_AUTH_MODE"):
        env.pop(inherited, None)
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        serving = subprocess.Popen(
            ["bash", "scripts/serve.sh", "start"], cwd=repo, env=env, stdout=out,
            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
    try:
        wait_until(lambda: SERVING in log.read_text() or serving.poll() is not None,
                   "make serve's front door", 240, step_s=1)  # fmt: skip
        assert serving.poll() is None, log.read_text()[-3000:]
        health = httpx.get(f"http://127.0.0.1:{door}/healthz", timeout=30)
        assert health.status_code == 200
        assert listening(8404) == {"127.0.0.1"} and listening(9101) == {"127.0.0.1"}
        [socket_path] = run.glob("haproxy/*/admin.sock")
        assert stat.S_IMODE(socket_path.stat().st_mode) == 0o600
        assert stat.S_IMODE((run / "haproxy").stat().st_mode) == 0o700
        config = next(run.glob("haproxy/*/haproxy.cfg")).read_text()
        assert not re.search(r"^\s*bind (\*)?:\d+\s*$", config, re.M)
        assert (home / ".ray" / "auth_token").exists() == token_file  # the home is left alone
    finally:
        os.killpg(serving.pid, signal.SIGINT)  # Ctrl-C
        serving.wait(60)
    assert "stopped its Ray and Serve" in log.read_text()
    assert processes_naming(run) == []
    shutil.rmtree(run)
