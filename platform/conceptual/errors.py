"""No single row ends a job (docs/design.md): a row whose processing raises is rejected with
reason `internal_error` and the exception as its detail, and the job goes on. A job still
fails when the errors say something is wrong with the system rather than with a few rows:
past `errors.max_rate` of the input or `errors.max_count` (ErrorsConfig, `check`).

Which stage a row failed in: the step that ran it, unless the code that raised named a finer
one with `failing_as` (one spaCy parse serves the text, syntax and hypernymize stages).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence

from conceptual.config import Config
from conceptual.uris import redact_text

INTERNAL_ERROR = "internal_error"
DETAIL_CHARS = 500


class ErrorsConfig(Config):
    """How many rows may fail with `internal_error` before the job fails instead."""

    max_rate: float = 0.001  # of the input rows
    max_count: int | None = None  # None: no count limit beyond the rate

    def budget(self, rows: int) -> int:
        """The most failed rows a job over `rows` inputs tolerates."""
        by_rate = int(self.max_rate * rows)
        return by_rate if self.max_count is None else min(by_rate, self.max_count)


class TooManyErrors(RuntimeError):
    """Rows failed past the budget: a bug or a broken environment, not bad rows."""


@contextlib.contextmanager
def failing_as(stage: str) -> Iterator[None]:
    """Name the stage an exception raised in here belongs to (the innermost name wins)."""
    try:
        yield
    except Exception as exc:
        if not hasattr(exc, "conceptual_stage"):
            exc.conceptual_stage = stage  # type: ignore[attr-defined]
        raise


def stage_of(exc: BaseException, default: str) -> str:
    return getattr(exc, "conceptual_stage", default)


def describe(exc: BaseException) -> str:
    """A rejection's detail for a failed row: the exception's class and message, with any
    credentials in it hidden and its length bounded."""
    text = redact_text(f"{type(exc).__name__}: {exc}")
    return text if len(text) <= DETAIL_CHARS else text[: DETAIL_CHARS - 1] + "…"


def check(
    failed: Mapping[str, int],
    rows: int,
    config: ErrorsConfig,
    samples: Mapping[str, Sequence[str]] | None = None,
) -> None:
    """Fail when more rows failed than the budget allows; one line names the stage that
    failed most, its count and up to three sample ids (`samples`: stage -> ids)."""
    total = sum(failed.values())
    if total <= config.budget(rows):
        return
    stage, count = max(failed.items(), key=lambda kv: kv[1])
    ids = ", ".join((samples or {}).get(stage, [])[:3]) or "none recorded"
    raise TooManyErrors(
        f"{total} of {rows} rows failed with {INTERNAL_ERROR} (errors.max_rate="
        f"{config.max_rate}, errors.max_count={config.max_count} allow {config.budget(rows)}): "
        f"stage {stage} failed {count} rows, e.g. ids {ids}; fix the cause, or raise the limits"
    )
