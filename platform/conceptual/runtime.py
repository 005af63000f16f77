"""Ray bootstrap: join the cluster in RAY_ADDRESS (as `ray job submit` sets it), or start a
private local Ray on this machine (the embedded default)."""

from __future__ import annotations

import logging
import os
import sys

import ray

from conceptual import logs


def init_ray(num_cpus: int | None = None) -> None:
    """Idempotent. `num_cpus` caps a local Ray (benchmarks use it); a cluster sizes itself."""
    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
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
