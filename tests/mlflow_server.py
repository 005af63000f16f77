"""A real `mlflow server` on 127.0.0.1 that a test can stop and start again on the same port
and database (runs in SQLite, artifacts where `artifacts` says): the tracking server of
test_two_nodes and of the outage tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

from waiting import wait_until  # tests/waiting.py

MLFLOW = Path(sys.executable).parent / "mlflow"


class MlflowServer:
    def __init__(self, folder: Path, port: int, artifacts: str, env: dict[str, str] | None = None):
        self.folder, self.port, self.artifacts = folder, port, artifacts
        self.env = {**os.environ, **(env or {})}
        self.url = f"http://127.0.0.1:{port}"
        self.process: subprocess.Popen | None = None
        self.log = folder / "server.log"

    def start(self) -> MlflowServer:
        command = [
            MLFLOW,
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--workers",
            "1",
            "--backend-store-uri",
            f"sqlite:///{self.folder / 'mlflow.db'}",
            "--artifacts-destination",
            self.artifacts,
        ]
        with open(self.log, "a") as log:
            self.process = subprocess.Popen(
                command, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        wait_until(self.healthy, "mlflow server", 120)
        return self

    def healthy(self) -> bool:
        assert self.process.poll() is None, f"mlflow server exited; see {self.log}"
        try:
            return urllib.request.urlopen(f"{self.url}/health", timeout=2).status == 200
        except OSError:
            return False

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Stop the server and its workers (SIGKILL: as a crash does)."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, sig)
            self.process.wait(30)
        self.process = None
