"""Waiting for an event, never for a fixed time: one helper for every test that acts and
then reads what the action caused (a replica loading, a page replacing the last one, a
job's first file)."""

from __future__ import annotations

import time
from collections.abc import Callable

WAIT_S = 90  # the longest any event a test waits for may take on a loaded 2-core machine


def wait_until(
    ready: Callable[[], object], what: str, timeout_s: float = WAIT_S, step_s: float = 0.2
) -> float:
    """Seconds until `ready()` is true, polled every `step_s`; AssertionError naming `what`
    after `timeout_s`."""
    start = time.monotonic()
    while not ready():
        if time.monotonic() - start > timeout_s:
            raise AssertionError(f"gave up after {timeout_s:.0f} s waiting for {what}")
        time.sleep(step_s)
    return time.monotonic() - start
