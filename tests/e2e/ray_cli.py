"""Ray clusters on this machine as a user starts them (`ray start`), and jobs submitted to
them with `ray job submit`: what the e2e tests share."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from waiting import wait_until  # tests/waiting.py

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ray_env(**extra: str) -> dict[str, str]:
    """This process's environment, as an activated venv has it (the job's `python` is the
    one the platform is installed in), without a RAY_ADDRESS of its own."""
    path = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {**os.environ, "PATH": path, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("RAY_ADDRESS", None)
    return {**env, **extra}


class Node:
    """One `ray start --block` process: stopping it stops that node (and, for a head, the
    cluster it started), never another Ray on the machine (unlike `ray stop`)."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path):
        self.log = log
        self._log = open(log, "w")
        self.process = subprocess.Popen(
            [BIN / "ray", "start", "--block", "--disable-usage-stats", *args],
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        if self.alive():
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
        self._log.close()


def agent_ports() -> list[str]:
    """`ray start` options giving a node's agents free ports: Ray's defaults (52365...) may
    be held by another Ray on this machine (a demo's, make serve's, the other node's), and a
    head whose job agent cannot bind answers every submission "No available agent"."""
    return [
        f"--dashboard-agent-listen-port={free_port()}",
        f"--dashboard-agent-grpc-port={free_port()}",
        f"--metrics-export-port={free_port()}",
        f"--runtime-env-agent-port={free_port()}",
    ]


def start_head(tmp: Path, env: dict[str, str], *args: str) -> tuple[Node, str, int]:
    """A head node with the dashboard on a free port. Returns it, the job submission address
    and the GCS port other nodes join at."""
    dashboard, gcs = free_port(), free_port()
    head = Node(
        [
            "--head",
            f"--port={gcs}",
            "--include-dashboard=true",
            "--dashboard-host=127.0.0.1",
            f"--dashboard-port={dashboard}",
            *agent_ports(),
            *args,
        ],
        env,
        tmp / "head.log",
    )
    address = f"http://127.0.0.1:{dashboard}"

    def answers() -> bool:
        """Started (the dashboard may answer before the node has, and the node's start may
        still time out) and taking jobs."""
        if not head.alive():
            raise AssertionError(f"ray head exited; see {head.log}")
        if "Ray runtime started." not in head.log.read_text():
            return False
        listed = subprocess.run(
            [BIN / "ray", "job", "list", "--address", address], env=env, capture_output=True
        )
        return listed.returncode == 0

    wait_until(answers, f"ray head (log {head.log})", 120, step_s=2)
    return head, address, gcs


def submit(
    address: str,
    env: dict[str, str],
    *args: str,
    timeout: int = 600,
    working_dir: Path = REPO,
    runtime_env: dict | None = None,
    submission_id: str | None = None,
    wait: bool = True,
) -> subprocess.CompletedProcess:
    """`ray job submit ... -- python -m ARGS`, under `submission_id` if given; `wait=False`
    returns once the job is submitted."""
    options = ["--runtime-env-json", json.dumps(runtime_env)] if runtime_env else []
    options += ["--submission-id", submission_id] if submission_id else []
    options += [] if wait else ["--no-wait"]
    return subprocess.run(
        [
            BIN / "ray",
            "job",
            "submit",
            "--address",
            address,
            "--working-dir",
            str(working_dir),
            *options,
            "--",
            "python",
            "-m",
            *args,
        ],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def output_of(result: subprocess.CompletedProcess) -> str:
    return result.stdout[-4000:] + result.stderr[-4000:]


def job_logs(address: str, env: dict[str, str], submission_id: str) -> str:
    """What the job itself printed (`ray job logs`), after Ray's lines that start it."""
    logs = subprocess.run(
        [BIN / "ray", "job", "logs", "--address", address, submission_id],
        env=env, capture_output=True, text=True, timeout=120,
    ).stdout  # fmt: skip
    return logs.split(f"Running entrypoint for job {submission_id}: ", 1)[-1].partition("\n")[2]


def stop_job(address: str, env: dict[str, str], submission_id: str) -> None:
    """`ray job stop`, which waits until the job has stopped."""
    subprocess.run(
        [BIN / "ray", "job", "stop", "--address", address, submission_id],
        env=env, check=True, capture_output=True, timeout=120,
    )  # fmt: skip
