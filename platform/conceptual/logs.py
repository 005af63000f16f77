"""A job's terminal shows the platform's own lines; everything else goes to its log file.

Ray and MLflow write INFO lines, warnings, progress bars and C++ core-worker messages to
standard error, from Python and from native threads alike. While a job runs, file
descriptor 2 points at `<state>/logs/<job>-<time>.log`, so all of it lands there (native
code included, which no Python logging setting reaches), and the platform's own errors go
to the terminal through `stderr()`. `--verbose` leaves standard error as it is.

    with job_output("curate", verbose=args.verbose) as log:
        ...
        print("error: ...", file=stderr())
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from conceptual.paths import state_dir

# What is active: the log file and the stream our errors go to, or None (the terminal is
# standard error as usual). A job called from another (the demo) shares its caller's log.
_active: tuple[Path, TextIO] | None = None


def stderr() -> TextIO:
    """Where the platform's own error messages go: the terminal, even while quiet."""
    return _active[1] if _active else sys.stderr


def quiet() -> bool:
    """Whether third-party output is being sent to a log file (Ray need not forward worker
    output to this driver then: it stays in Ray's session logs)."""
    return _active is not None


@contextlib.contextmanager
def job_output(job: str, verbose: bool = False) -> Iterator[Path | None]:
    """Standard error to the job's log file for the duration (yields its path; None with
    `verbose`). An exception leaving the job is named on the terminal with the log's path."""
    global _active
    if verbose or _active is not None:
        yield _active[0] if _active else None
        return
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    folder = state_dir() / "logs"
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / f"{job}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    sys.stderr.flush()
    saved_fd = os.dup(2)
    # Our errors go where standard error went: the terminal, or a test's capture.
    terminal = (
        os.fdopen(os.dup(saved_fd), "w", buffering=1)
        if _writes_to_fd(sys.stderr, 2)
        else sys.stderr
    )
    ray_before = _ray_connected()
    with open(log, "ab", buffering=0) as file:
        os.dup2(file.fileno(), 2)
        _active = (log, terminal)
        try:
            yield log
        except BaseException as exc:
            if not isinstance(exc, (KeyboardInterrupt, SystemExit)):
                print(f"error: {type(exc).__name__}: {exc} (details in {log})", file=terminal)
            raise
        finally:
            if not ray_before and _ray_connected():
                # The Ray this job started ends inside its log: Ray delivers notices to the
                # driver late (a raylet's "N worker processes have been started"), and they
                # would otherwise print after the job's last line. A Ray the job found
                # running (a test session's) is left as it was.
                sys.modules["ray"].shutdown()
            sys.stderr.flush()
            os.dup2(saved_fd, 2)
            os.close(saved_fd)
            if terminal is not sys.stderr:
                terminal.close()
            _active = None


def _ray_connected() -> bool:
    ray = sys.modules.get("ray")  # not imported: a job without Ray
    return ray is not None and ray.is_initialized()


def _writes_to_fd(stream: TextIO, fd: int) -> bool:
    try:
        return stream.fileno() == fd
    except (AttributeError, OSError, ValueError):
        return False
