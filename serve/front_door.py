"""The front door: nginx (Debian's package) in front of Ray Serve's proxy, with the limits
Serve's proxy does not have (header size and time, body size as it streams, connections per
client). Serve listens on 127.0.0.1 only; the front door is what clients reach.

    python -m conceptual.serve.front_door [key=value ...]   # e.g. listen=0.0.0.0:8080
    python -m conceptual.serve.front_door serve_config=serve/config.yaml   # Serve's port from it
    make serve                                             # Serve (serve/config.yaml) + this

It fills in serve/nginx.conf.template (the one template, also used by infra/compose.yaml
and the KubeRay manifests) under a prefix of its own (pid, temporary files), so nginx runs
as any user, then runs nginx in the foreground. `FrontDoor` does the same from Python
(the tests start a real one in front of a real Serve app).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pydantic import Field

from conceptual.config import Config, ConfigError, load, read_yaml
from conceptual.limits import IMAGE_BYTES

TEMPLATE = Path(__file__).with_name("nginx.conf.template")


class FrontDoorConfig(Config):
    listen: str = "127.0.0.1:8080"  # where clients connect (host:port)
    upstream: str = "127.0.0.1:8000"  # Serve's proxy (host:port); see serve_config
    # A Serve config file (make serve: the one it deploys): unless upstream is given, the door
    # forwards to where its http_options have Serve listen.
    serve_config: str = ""
    worker_processes: str = "auto"  # one per core
    worker_connections: int = Field(4096, ge=16)  # per worker, idle ones included
    connections_per_client: int = Field(32, ge=1)  # per client address, on the API routes
    # API requests passed on at once from all clients together: past it nginx answers 503 at
    # once, so a flood never reaches Serve's proxy (above the ingress's max_in_flight).
    requests_in_progress: int = Field(96, ge=1)
    header_timeout_s: int = Field(10, ge=1)  # all of the headers within this
    body_timeout_s: int = Field(30, ge=1)  # longest pause between two reads of a body
    max_body_bytes: int = Field(IMAGE_BYTES, gt=0)  # as ServeConfig.max_body_bytes
    access_log: str = "off"  # or a path, or /dev/stdout


# Where Serve listens when its config sets no http_options.host or port (ray.serve.HTTPOptions).
SERVE_HOST, SERVE_PORT = "127.0.0.1", 8000
# A proxy bound to every interface is reached on loopback.
WILDCARDS = {"0.0.0.0": "127.0.0.1", "::": "::1"}


def serve_upstream(path: str | Path) -> str:
    """host:port of Serve's proxy as the Serve config at `path` has it listen."""
    serve = read_yaml(path, "the Serve config")
    options = (serve.get("http_options") if isinstance(serve, dict) else None) or {}
    host = str(options.get("host") or SERVE_HOST)
    host = WILDCARDS.get(host, host)
    port = options.get("port") or SERVE_PORT
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"  # nginx's IPv6 in brackets


def configure(overrides: list[str]) -> FrontDoorConfig:
    """The front door's config from key=value overrides, its upstream from serve_config
    unless given."""
    config = load(FrontDoorConfig, None, overrides)
    if config.serve_config and "upstream" not in config.model_fields_set:
        config.upstream = serve_upstream(config.serve_config)
    return config


def render(config: FrontDoorConfig, prefix: Path) -> str:
    """The template with every @NAME@ filled in from `config` (and PREFIX)."""
    values = {name.upper(): str(value) for name, value in config.model_dump().items()}
    values["PREFIX"] = str(prefix)
    text = TEMPLATE.read_text()
    missing = set(re.findall(r"@([A-Z_]+)@", text)) - set(values)
    if missing:
        raise ConfigError(f"{TEMPLATE.name} names {sorted(missing)}, which FrontDoorConfig lacks")
    return re.sub(r"@([A-Z_]+)@", lambda match: values[match[1]], text)


def nginx() -> str:
    """The nginx binary (Debian's is in /usr/sbin, often not on a user's PATH)."""
    found = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")
    if found is None:
        raise ConfigError("nginx is not installed: make setup installs it (requirements/apt.txt)")
    return found


def prepare(config: FrontDoorConfig, prefix: Path) -> list[str]:
    """Writes the configuration under `prefix`; the command that runs nginx in the foreground."""
    prefix.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:  # root's nginx runs its workers as nobody: they must reach the prefix
        prefix.chmod(0o755)
    (prefix / "nginx.conf").write_text(render(config, prefix))
    command = [nginx(), "-p", str(prefix), "-c", str(prefix / "nginx.conf")]
    check = subprocess.run([*command, "-t", "-q"], capture_output=True, text=True)
    if check.returncode != 0:
        raise ConfigError(f"nginx refuses the configuration: {check.stderr.strip()}")
    return [*command, "-g", "daemon off;"]


class FrontDoor:
    """nginx running in front of `config.upstream` until `stop()`; `url` is where it listens."""

    def __init__(self, config: FrontDoorConfig, prefix: Path | None = None):
        self.config = config
        self._directory = None if prefix else tempfile.TemporaryDirectory(prefix="front-door-")
        self.prefix = prefix or Path(self._directory.name)
        self.process = subprocess.Popen(prepare(config, self.prefix))
        host, port = config.listen.rsplit(":", 1)
        self.url = f"http://{host}:{port}"
        self._wait_for(host, int(port))

    def _wait_for(self, host: str, port: int, timeout_s: float = 10.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"nginx exited with {self.process.returncode}")
            try:
                socket.create_connection((host, port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"nginx did not listen on {host}:{port} within {timeout_s} s")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)
        if self._directory is not None:
            self._directory.cleanup()


def main(argv: list[str] | None = None) -> int:
    overrides = sys.argv[1:] if argv is None else argv
    try:
        config = configure(overrides)
        prefix = Path(os.environ.get("FRONT_DOOR_PREFIX") or tempfile.mkdtemp(prefix="front-door-"))
        command = prepare(config, prefix)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"front door on http://{config.listen} -> Serve at {config.upstream}", flush=True)
    os.execv(command[0], command)  # nginx in this process: signals reach it directly


if __name__ == "__main__":
    sys.exit(main())
