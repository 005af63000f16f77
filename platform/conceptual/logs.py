"""A job's terminal shows the platform's own lines; everything else goes to its log file.

Ray and MLflow write INFO lines, warnings, progress bars and C++ core-worker messages to
standard error, from Python and from native threads alike. While a job runs, file
descriptor 2 points at `<state>/logs/<job>-<time>.log`, so all of it lands there (native
code included, which no Python logging setting reaches), and the platform's own errors go
to the terminal through `stderr()`. `--verbose` leaves standard error as it is.

No line a job shows or logs carries credentials (`http://user:secret@host` ->
`http://***@host`, conceptual.uris.redact_text), verbose or not: while a job runs, standard
output, standard error and the terminal stream of `stderr()` redact what passes through
them, every Python log record is redacted as it is made (whatever logger and handler it
goes to), and so is the traceback of an exception that ends the process. Native code writing
to descriptor 2 is the exception: that lands in the log file as written.

    with job_output("curate", verbose=args.verbose) as log:
        ...
        error(exc)  # `error: ...` on the terminal, redacted
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

from conceptual.paths import state_dir
from conceptual.uris import redact_text

# What is active: the log file and the stream our errors go to, or None (the terminal is
# standard error as usual). A job called from another (the demo) shares its caller's log.
_active: tuple[Path, TextIO] | None = None


class Redacting:
    """A text stream that hides the credentials of every URI written through it."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(redact_text(text))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:  # flush, fileno, isatty, encoding, ...
        return getattr(self.stream, name)


def _redacting(stream: TextIO) -> TextIO:
    return stream if isinstance(stream, Redacting) else Redacting(stream)  # type: ignore[return-value]


def stderr() -> TextIO:
    """Where the platform's own error messages go: the terminal, even while quiet; what is
    written there is redacted."""
    return _active[1] if _active else _redacting(sys.stderr)


def error(message: object) -> None:
    """The one way a job reports an error a person reads: `error: MESSAGE` on the terminal,
    without credentials."""
    print(f"error: {message}", file=stderr(), flush=True)


def note(message: object) -> None:
    """A line a person should read that stops nothing (an old key still read): `note:
    MESSAGE` on the terminal, without credentials."""
    print(f"note: {message}", file=stderr(), flush=True)


def _redacted_record_factory(make: Callable[..., logging.LogRecord]) -> Callable[..., Any]:
    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # a malformed record is logging's to report
            return record
        if (redacted := redact_text(message)) != message:
            record.msg, record.args = redacted, None
        if record.exc_info and not record.exc_text:
            text = logging.Formatter().formatException(record.exc_info)
            if (redacted := redact_text(text)) != text:
                record.exc_text = redacted
        return record

    factory.redacting = True  # type: ignore[attr-defined]
    return factory


def _redacting_excepthook(kind: type[BaseException], value: BaseException, tb: Any) -> None:
    sys.stderr.write(redact_text("".join(traceback.format_exception(kind, value, tb))))


@contextlib.contextmanager
def redaction() -> Iterator[None]:
    """For the duration: standard output and error redacted, and every log record. The
    traceback of an exception that ends the process is redacted from now on."""
    if getattr(logging.getLogRecordFactory(), "redacting", False):
        yield  # already on (a job inside another)
        return
    if sys.excepthook is sys.__excepthook__:
        sys.excepthook = _redacting_excepthook
    saved = sys.stdout, sys.stderr, logging.getLogRecordFactory()
    sys.stdout, sys.stderr = _redacting(sys.stdout), _redacting(sys.stderr)
    logging.setLogRecordFactory(_redacted_record_factory(saved[2]))
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        sys.stdout, sys.stderr = saved[0], saved[1]
        logging.setLogRecordFactory(saved[2])


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
        with redaction():
            yield _active[0] if _active else None
        return
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    # MLflow writes `🏃 View run ... at: URL` to standard output, the terminal, as each run
    # on a tracking server ends: the job's own lines say where its run is.
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
    folder = state_dir() / "logs"
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / f"{job}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    sys.stderr.flush()
    saved_fd = os.dup(2)
    # Our errors go where standard error went: the terminal, or a test's capture.
    owned = _writes_to_fd(sys.stderr, 2)
    terminal = os.fdopen(os.dup(saved_fd), "w", buffering=1) if owned else sys.stderr
    ray_before = _ray_connected()
    with open(log, "ab", buffering=0) as file, redaction():
        os.dup2(file.fileno(), 2)
        _active = (log, _redacting(terminal))
        try:
            yield log
        except BaseException as exc:
            if not isinstance(exc, (KeyboardInterrupt, SystemExit)):
                sys.stderr.flush()
                file.write(redact_text(traceback.format_exc()).encode())
                error(f"{type(exc).__name__}: {exc} (details in {log})")
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
            if owned:
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
