"""What every job's command line shares: local paths made absolute the way the user meant them
(conceptual.paths.user_path), `key=value` overrides, and `--verbose`."""

from __future__ import annotations

import argparse
from pathlib import Path

from conceptual.paths import LocationError, user_path


def location(value: str) -> str:
    """argparse type for an input or output: a URI, or a local path made absolute."""
    try:
        return user_path(value)
    except LocationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def add_common(parser: argparse.ArgumentParser, overrides_help: str | None = None) -> None:
    """`--verbose` and the trailing `key=value` overrides."""
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="show Ray's and MLflow's own logs on the terminal (always in the job's log file)",
    )
    parser.add_argument("overrides", nargs="*", metavar="key=value", help=overrides_help)


def report_run(run_id: str, experiment: str, log: Path | None, what: str = "run") -> None:
    """A job's last lines: its MLflow run (the tracking URI without credentials) and log."""
    from conceptual.tracking import printable_tracking_uri

    print(f"mlflow:   {what} {run_id} in experiment {experiment!r} at {printable_tracking_uri()}")
    if log:
        print(f"log:      {log}")
