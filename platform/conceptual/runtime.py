"""Ray bootstrap: join the cluster in RAY_ADDRESS (as `ray job submit` sets it), or start a
private local Ray on this machine (the embedded default); and the check that a job on a
cluster of several nodes reads and writes where every node sees the same data."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping

import ray

from conceptual import logs
from conceptual.storage import StorageError, is_remote
from conceptual.tracking import tracking_uri
from conceptual.uris import redact

# Set to 1 on a cluster whose nodes all mount the same filesystem at the same paths (NFS, a
# shared volume): local paths and a local MLflow database then mean one place for every node.
SHARED_FILESYSTEM_ENV = "CONCEPTUAL_SHARED_FILESYSTEM"


def init_ray(num_cpus: int | None = None) -> None:
    """Idempotent. `num_cpus` caps a local Ray (benchmarks use it); a cluster sizes itself."""
    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    _notices_follow_quiet()
    address = os.environ.get("RAY_ADDRESS")
    if address:
        # A submitted job inherits the job's runtime_env; passing one here would replace it.
        ray.init(address=address, logging_level=logging.WARNING, log_to_driver=not logs.quiet())
    else:
        ray.init(
            address="local",
            num_cpus=num_cpus,
            include_dashboard=False,
            logging_level=logging.WARNING,
            # Quiet jobs leave worker output in Ray's session logs (logs.job_output).
            log_to_driver=not logs.quiet(),
            # Workers inherit this process's environment (AWS_*, MLFLOW_*, CONCEPTUAL_*).
        )
    from ray.data import DataContext

    ctx = DataContext.get_current()
    # Bars would draw into a quiet job's log file: it prints its own progress lines.
    if (
        os.environ.get("RAY_DATA_DISABLE_PROGRESS_BARS") == "1"
        or logs.quiet()
        or not sys.stderr.isatty()
    ):
        ctx.enable_progress_bars = False
    ctx.verbose_stats_logs = False


def _notices_follow_quiet() -> None:
    """Ray's driver prints the raylet's notices (`(raylet) WARNING: 9 PYTHON worker processes
    have been started...`, pushed whatever log_to_driver says) to standard output, which
    stays the terminal in a quiet job: there they go to standard error, the job's log file
    (logs.job_output), with Ray's other output. Ray has no setting for this, so its printer
    is wrapped, once, deciding at each line; `--verbose` leaves them where Ray prints them."""
    from ray._private import worker

    printer = worker.print_to_stdstream
    if getattr(printer, "follows_quiet", False):
        return

    def print_to_stdstream(data: dict, ignore_prefix: bool) -> None:
        printer({**data, "is_err": data["is_err"] or logs.quiet()}, ignore_prefix)

    print_to_stdstream.follows_quiet = True  # type: ignore[attr-defined]
    worker.print_to_stdstream = print_to_stdstream


def alive_nodes() -> int:
    """The nodes of the Ray this process joined that are up (1 for the embedded local Ray)."""
    return sum(1 for node in ray.nodes() if node["Alive"])


def require_shared(locations: Mapping[str, str | None]) -> None:
    """On a cluster of more than one node, refuse local paths among `locations` (named as
    the user gave them: `{"--output": uri}`) and a local MLflow database: each node would
    read and write its own disk, so outputs would land in pieces on whichever nodes ran the
    work. One node, or SHARED_FILESYSTEM_ENV=1, accepts them."""
    if os.environ.get(SHARED_FILESYSTEM_ENV) == "1" or (nodes := alive_nodes()) < 2:
        return
    local = [f"{name} {uri}" for name, uri in locations.items() if uri and not is_remote(uri)]
    if not tracking_uri().startswith(("http://", "https://", "databricks")):
        local.append(f"MLflow tracking {redact(tracking_uri())}")
    if local:
        raise StorageError(
            f"this Ray cluster has {nodes} nodes, and {'; '.join(local)} "
            f"{'is' if len(local) == 1 else 'are'} on one machine's disk, which the other nodes "
            "do not see. Use s3:// URIs (training: storage=s3://...) and an MLflow tracking "
            f"server (MLFLOW_TRACKING_URI=http://...), or set {SHARED_FILESYSTEM_ENV}=1 when "
            "every node mounts these paths."
        )
