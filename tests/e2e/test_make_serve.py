"""`make serve LOW_LATENCY=1` as a user runs it (scripts/serve.sh), from the folder it computes
for itself, on a home with and without Ray's ~/.ray/auth_token, on ports other than the
defaults (Serve's in the serve config SERVE_CONFIG names, the front door's in FRONT_DOOR):
the front door answers and passes a request on to Serve (issue 58: it forwarded to 8000
whatever the config said, 502), every port its processes listen on (Ray's GCS, raylet,
agents, client server, dashboard and Prometheus exporters, HAProxy's stats and metrics,
nginx) is on 127.0.0.1, HAProxy's admin socket is the owner's alone, and Ctrl-C or
`make serve-stop` ends every process of the session it recorded, nginx included, and no
other Ray (the one of this test session stays), leaving none of its ports in use."""

from __future__ import annotations

import os
import re
import shutil
import signal
import stat
import subprocess
from pathlib import Path

import httpx
import pytest
import yaml
from ray_cli import free_port
from waiting import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SERVING = "front door on http://"


def listening(port: int) -> set[str]:
    """The addresses something listens on at TCP `port` (iproute2's ss)."""
    lines = subprocess.run(["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True)
    return {line.split()[3].rsplit(":", 1)[0] for line in lines.stdout.splitlines()}


def members(session: int) -> list[int]:
    """The live processes of a session (zombies are gone, only not yet reaped)."""
    found = subprocess.run(["ps", "-o", "pid=,stat=", "-s", str(session)], capture_output=True,
                           text=True)  # fmt: skip
    return [int(pid) for pid, state in map(str.split, found.stdout.splitlines()) if state[0] != "Z"]


def listened_on(pids: list[int]) -> set[str]:
    """host:port of every TCP socket these processes listen on (iproute2's ss)."""
    lines = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True).stdout.splitlines()
    return {line.split()[3] for line in lines for pid in pids if f"pid={pid}," in line}


LOOPBACK = ("127.0.0.1:", "[::ffff:127.0.0.1]:", "[::1]:")


def serve_replicas(pids: list[int]) -> list[int]:
    """The processes that are Serve replicas (their title, `ray::ServeReplica:APP:NAME`)."""
    titles = {pid: Path(f"/proc/{pid}/cmdline") for pid in pids}
    return [pid for pid, title in titles.items() if b"ServeReplica" in title.read_bytes()]


def readyz(door: int) -> dict:
    """GET /readyz through the front door: the app's JSON, or {} for anything else (nginx's
    502 page, Serve's proxy's plain text while the app deploys)."""
    answer = httpx.get(f"http://127.0.0.1:{door}/readyz", timeout=30)
    try:
        return answer.json() if answer.status_code in (200, 503) else {}
    except ValueError:
        return {}


@pytest.mark.parametrize(
    ("token_file", "stop"),
    [(True, "Ctrl-C"), (False, "make serve-stop")],
    ids=["with ~/.ray/auth_token, Ctrl-C", "without, make serve-stop"],
)
def test_make_serve_low_latency_keeps_to_loopback_and_stops_whole(repo, tmp_path, token_file, stop):
    home = tmp_path / "home"
    (home / ".ray").mkdir(parents=True)
    if token_file:  # what ray.init() leaves for a local cluster: the head then wants tokens
        (home / ".ray" / "auth_token").write_text("0123456789abcdef" * 2)
    door, serve_port = free_port(), free_port()
    # The README's way to move Serve: http_options.port in a copy of serve/config.yaml.
    serve_config = yaml.safe_load((repo / "serve" / "config.yaml").read_text())
    serve_config["http_options"]["port"] = serve_port
    (tmp_path / "serve.yaml").write_text(yaml.safe_dump(serve_config))
    env = {**os.environ, "HOME": str(home), "LOW_LATENCY": "1",
           "FRONT_DOOR": f"listen=127.0.0.1:{door}", "RAY_PORT": str(free_port()),
           "DASHBOARD_PORT": str(free_port()), "CONCEPTUAL_HOME": str(tmp_path / "state"),
           "SERVE_CONFIG": str(tmp_path / "serve.yaml")}  # fmt: skip
    ours = [door, serve_port, int(env["RAY_PORT"]), int(env["DASHBOARD_PORT"])]
    for inherited in ("RAY_ADDRESS", "RAY_AUTH_MODE", "SERVE_RUN_DIR"):
        env.pop(inherited, None)
    shown = subprocess.run(["bash", "scripts/serve.sh", "env"], cwd=repo, env=env,
                           capture_output=True, text=True, check=True).stdout  # fmt: skip
    run = Path(re.search(r"^RAY_AUTH_TOKEN_PATH=(.*)/auth_token$", shown, re.M)[1])  # the default
    made = not run.exists()  # a user's make serve of this checkout keeps its folder
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
        session = int((run / "session").read_text().split()[1])
        health = httpx.get(f"http://127.0.0.1:{door}/healthz", timeout=30)
        assert health.status_code == 200  # nginx's own answer
        # /readyz is Serve's (503 until a model is loaded: none is registered here); 502 is
        # the door finding no Serve where it forwards. The app may still be deploying.
        wait_until(lambda: "ready" in readyz(door), "Serve's /readyz through the door", 120)
        assert listening(serve_port) == {"127.0.0.1"}
        assert listening(8404) == {"127.0.0.1"} and listening(9101) == {"127.0.0.1"}
        ports = listened_on(members(session))
        assert f"127.0.0.1:{door}" in ports  # nginx, and Ray's GCS, are the session's
        assert any(f"{host}{env['RAY_PORT']}" in ports for host in LOOPBACK)
        assert any(f"{host}{serve_port}" in ports for host in LOOPBACK)  # Serve's, or HAProxy
        # Asserted last, so that a port open to the network does not skip the checks of stopping.
        # The one exception, listed in the README: Ray 2.60 opens each replica's server for
        # calls between deployments on every interface ("[::]:0" in serve/_private/replica.py,
        # no setting changes it), one port a replica.
        replicas = serve_replicas(members(session))
        others = [pid for pid in members(session) if pid not in replicas]
        exposed = [port for port in listened_on(others) if not port.startswith(LOOPBACK)]
        for replica in replicas:
            wide = [port for port in listened_on([replica]) if not port.startswith(LOOPBACK)]
            assert len(wide) <= 1 and all(port.startswith(("*:", "[::]:")) for port in wide)
        # The folder is the checkout's, kept from run to run: this node's socket is the newest.
        socket_path = max(run.glob("hap/*/admin.sock"), key=lambda path: path.stat().st_mtime)
        assert stat.S_IMODE(socket_path.stat().st_mode) == 0o600
        assert stat.S_IMODE((run / "hap").stat().st_mode) == 0o700
        config = (socket_path.parent / "haproxy.cfg").read_text()
        assert not re.search(r"^\s*bind (\*)?:\d+\s*$", config, re.M)
        assert (home / ".ray" / "auth_token").exists() == token_file  # the home is left alone
    finally:
        said = ""
        if stop == "Ctrl-C":
            os.killpg(serving.pid, signal.SIGINT)
        else:
            said = subprocess.run(["make", "-s", "serve-stop"], cwd=repo, env=env,
                                  capture_output=True, text=True, timeout=60).stdout  # fmt: skip
        serving.wait(60)
    assert "stopped its front door, Serve and Ray" in log.read_text() + said
    assert members(session) == []  # nginx, HAProxy, Ray's workers and client server too
    assert [port for port in ours if listening(port)] == []
    assert exposed == []
    if made:
        shutil.rmtree(run)
