"""scripts/serve.sh without starting Ray: the folder `make serve` computes for itself holds
HAProxy's sockets (LOW_LATENCY=1), and `make serve-stop` ends the session `make serve`
recorded, by its id, and nothing else (not a process whose command line names the folder)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import ray
from waiting import wait_until

REPO = Path(__file__).resolve().parents[3]
SCRIPT = ["bash", "scripts/serve.sh"]
SUN_PATH = 108  # struct sockaddr_un's sun_path, its final NUL included
LARGEST_PID = 4194304  # the kernel's PID_MAX_LIMIT


def serve_sh(*args: str, **env: str) -> subprocess.CompletedProcess:
    inherited = {k: v for k, v in os.environ.items() if k != "SERVE_RUN_DIR"}
    return subprocess.run([*SCRIPT, *args], cwd=REPO, env={**inherited, **env},
                          capture_output=True, text=True, timeout=60)  # fmt: skip


def per_node(path: str, node_id: str) -> str:
    """Where Ray's HAProxyManager puts a configured path: under the node's id."""
    folder, name = os.path.split(path)
    return os.path.join(folder, node_id, name)


def test_the_default_folder_holds_haproxys_sockets():
    shown = serve_sh("env", LOW_LATENCY="1")
    assert shown.returncode == 0, shown.stderr
    env = dict(line.split("=", 1) for line in shown.stdout.splitlines())
    folder = Path(env["RAY_AUTH_TOKEN_PATH"]).parent
    assert folder.name.startswith("conceptual-") and folder.parent == Path("/tmp")  # the default
    node_id = ray.NodeID.from_random().hex()
    admin = per_node(env["RAY_SERVE_HAPROXY_SOCKET_PATH"], node_id)
    metrics = per_node(env["RAY_SERVE_HAPROXY_METRICS_SOCKET_PATH"], node_id)
    assert admin.startswith(str(folder)) and metrics.startswith(str(folder))
    # HAProxy binds the admin socket as PATH.PID.tmp, then renames it; Ray binds the other.
    assert len(f"{admin}.{LARGEST_PID}.tmp") < SUN_PATH, admin
    assert len(metrics) < SUN_PATH, metrics


def test_a_folder_too_long_for_the_sockets_is_refused_before_anything_starts(tmp_path):
    too_long = f"/tmp/{'x' * 40}"
    shown = serve_sh("env", LOW_LATENCY="1", SERVE_RUN_DIR=too_long)
    assert shown.returncode == 2 and "characters too long for HAProxy" in shown.stderr
    assert serve_sh("env", SERVE_RUN_DIR=too_long).returncode == 0  # no HAProxy, no limit


def started(pid: int) -> str:
    """The process's start, in clock ticks after boot (/proc/PID/stat, field 22)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]


def running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


BOOT = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
# A session's leader, and in it a process of its own process group whose command line does
# not name the folder (as Ray's workers and client server); each prints its PID.
SESSION = """python3 -c 'import os, time; os.setpgid(0, 0); print(os.getpid(), flush=True); \
time.sleep(120)' & sleep 0.2; echo $$; exec sleep 120"""


def session() -> tuple[subprocess.Popen, list[int]]:
    leader = subprocess.Popen(["bash", "-c", SESSION], stdout=subprocess.PIPE, text=True,
                              start_new_session=True)  # fmt: skip
    pids = [int(leader.stdout.readline()) for _ in range(2)]
    assert leader.pid in pids
    return leader, pids


def test_stop_ends_the_recorded_session_whole_and_nothing_else(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    leader, pids = session()
    # Not of the session, though its command line names the folder (`pkill -f` took it).
    bystander = subprocess.Popen(["bash", "-c", "sleep 120", f"{run}/bystander"])
    try:
        (run / "session").write_text(f"{BOOT} {leader.pid} {started(leader.pid)}\n")
        stopped = serve_sh("stop", SERVE_RUN_DIR=str(run))
        assert stopped.returncode == 0, stopped.stderr
        leader.wait(10)
        wait_until(lambda: not any(map(running, pids)), "the session to end", 10, 0.05)
        assert bystander.poll() is None
        assert "stopped its front door, Serve and Ray" in stopped.stdout
        assert not (run / "session").exists()
    finally:
        bystander.kill()
        for pid in pids:
            if running(pid):
                os.kill(pid, 9)


def test_a_record_that_is_no_longer_the_session_is_left_alone(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    leader, pids = session()
    try:
        # Its id now leads another process (a PID used again), or it is of another boot.
        for record in (
            f"{BOOT} {leader.pid} 1",
            f"not-this-boot {leader.pid} {started(leader.pid)}",
        ):
            (run / "session").write_text(record)
            stopped = serve_sh("stop", SERVE_RUN_DIR=str(run))
            assert "nothing of make serve's is running" in stopped.stdout
        time.sleep(0.5)
        assert all(map(running, pids))
    finally:
        for pid in pids:
            os.kill(pid, 9)
        leader.wait(10)


def test_a_serve_config_that_is_not_there_is_refused_before_ray_starts(tmp_path):
    run = tmp_path / "run"
    refused = serve_sh("start", SERVE_RUN_DIR=str(run), SERVE_CONFIG=str(tmp_path / "no.yaml"))
    assert refused.returncode == 2 and "cannot be read" in refused.stderr
    assert not run.exists()  # nothing started, nothing written
