"""Serve's autoscaling of the Captioner (issue 58), deployed as a user deploys the service:
serve/config.yaml, its timings shortened in the file's `deployments:` and run with
`serve run --non-blocking` on the session's local Ray. Load adds the second replica the
shipped autoscaling allows (champion.py's MODEL_AUTOSCALING: 1..2 at 4 ongoing requests
each); when the load stops, the deployment goes back to one. Replica counts are Serve's own
(serve.status()). Slow (`make test-slow`): about a minute and a half.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import httpx
import pytest
import ray
import skimage.data
import yaml
from PIL import Image
from ray import serve
from ray.serve.schema import DeploymentSchema
from waiting import WAIT_S, wait_until  # tests/waiting.py

from conceptual import registry
from conceptual.serve.app import APP_NAME
from conceptual.serve.captioner_deployment import CaptionerDeployment
from conceptual.serve.champion import MAX_QUEUED_REQUESTS, MODEL_AUTOSCALING
from conceptual.tracking import start_run
from conceptual_demo.images import good_jpeg

pytestmark = pytest.mark.integration

# The shipped autoscaling with its timings shortened, as a user overrides them. Serve
# replaces a deployment's autoscaling_config whole (keys left out take Serve's defaults,
# max_replicas 1 among them), so the override repeats the shipped keys it keeps.
FAST = {
    **MODEL_AUTOSCALING,
    "upscale_delay_s": 1,
    "downscale_delay_s": 3,
    "look_back_period_s": 2,
    "metrics_interval_s": 0.5,  # how often handles and replicas report their load
}
# Closed-loop clients: up to 8 requests ongoing or queued at the Captioner, twice the target
# of one replica, and never more than its callers may queue (MAX_QUEUED_REQUESTS: no 503s).
CLIENTS = MAX_QUEUED_REQUESTS


def replica_states() -> dict[str, int]:
    """The Captioner's replicas by state, as Serve reports them."""
    application = serve.status().applications[APP_NAME]
    return dict(application.deployments[CaptionerDeployment.name].replica_states)


def serve_processes() -> list[str]:
    """Serve's actors (controller, proxy, replicas) among this process's descendants: the
    session's Ray (other Rays on the machine are not looked at)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            pid, rest = stat.read_text().split(" (", 1)
        except OSError:  # ended meanwhile
            continue
        children.setdefault(int(rest.rsplit(") ", 1)[1].split()[1]), []).append(int(pid))
    found, todo = [], list(children.get(os.getpid(), []))
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        try:
            title = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if "ray::Serve" in title:
            found.append(title.strip("\0"))
    return found


@pytest.fixture(scope="module")
def service(ray_local, platform_home, tiny_captioner, log_captioner, repo, tmp_path_factory,
            free_port):  # fmt: skip
    """The base URL of serve/config.yaml's application, deployed with `serve run` from a
    copy that names a tiny registered champion, a free port and FAST; Serve is shut down
    after, none of its processes left."""
    name = f"autoscale-{uuid.uuid4().hex[:8]}"
    model, vocab = tiny_captioner("a cup of coffee on a saucer")
    with start_run("serve-autoscaling-tests") as run:
        log_captioner(model, vocab)
    version = registry.register(run.info.run_id, {}, name=name)
    registry.promote_if_better(version, 0.1, "val", name=name)

    config = yaml.safe_load((repo / "serve" / "config.yaml").read_text())
    config["http_options"]["port"] = port = free_port()
    [application] = config["applications"]
    application["args"]["captioner"]["model_name"] = name
    application["deployments"] = [{"name": CaptionerDeployment.name, "autoscaling_config": FAST}]
    path = tmp_path_factory.mktemp("autoscaling") / "serve.yaml"
    path.write_text(yaml.safe_dump(config))
    address = ray.get_runtime_context().gcs_address
    serve_cli = Path(sys.executable).parent / "serve"
    deployed = subprocess.run([serve_cli, "run", "--non-blocking", "--address", address, path],
                              capture_output=True, text=True, timeout=120)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        assert deployed.returncode == 0, deployed.stdout[-3000:] + deployed.stderr[-3000:]
        # Serve's start, the application's build and its replicas' (which start() awaits
        # before test_serve.py's WAIT_S for the champion): twice the wait.
        wait_until(lambda: ready(url), "the application and its champion", 2 * WAIT_S)
        assert serve_processes()  # the helper sees them, so that none left means something
        yield url
    finally:
        serve.shutdown()
        wait_until(lambda: not serve_processes(), "Serve's processes to end")


def ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/readyz", timeout=5).status_code == 200
    except httpx.HTTPError:  # the proxy is not listening yet
        return False


@pytest.mark.slow
def test_load_adds_a_replica_and_its_end_takes_it_away(service):
    image = good_jpeg(Image.fromarray(skimage.data.coffee()))
    assert replica_states() == {"RUNNING": 1}
    statuses: list[int] = []
    stop = threading.Event()

    def keep_asking() -> None:
        with httpx.Client(base_url=service, timeout=60) as http:
            while not stop.is_set():
                statuses.append(http.post("/v1/captions", content=image).status_code)

    clients = [threading.Thread(target=keep_asking) for _ in range(CLIENTS)]
    started = time.monotonic()
    for thread in clients:
        thread.start()
    try:
        up_s = wait_until(lambda: replica_states().get("RUNNING") == 2, "a second replica")
    finally:
        stop.set()
        for thread in clients:
            thread.join()
    down_s = wait_until(lambda: replica_states() == {"RUNNING": 1}, "one replica again")
    print(f"\n2 replicas {up_s:.1f} s into the load ({len(statuses)} requests), "
          f"1 again {down_s:.1f} s after it ({time.monotonic() - started:.1f} s in all)")  # fmt: skip
    assert set(statuses) == {200}, sorted(set(statuses))


def test_the_config_files_example_repeats_every_shipped_autoscaling_key(repo):
    """serve/config.yaml's commented `deployments:` example, uncommented, is valid and lists
    every key of MODEL_AUTOSCALING (a key left out would take Serve's default)."""
    text = (repo / "serve" / "config.yaml").read_text()
    example = re.search(r"^    # (deployments:\n(?:    #   .*\n)+)", text, re.M)[1]
    [captioner] = yaml.safe_load(re.sub(r"^    # ", "", example, flags=re.M))["deployments"]
    DeploymentSchema.model_validate(captioner)
    assert captioner["name"] == CaptionerDeployment.name
    assert set(MODEL_AUTOSCALING) <= set(captioner["autoscaling_config"])
