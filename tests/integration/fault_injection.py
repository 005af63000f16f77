"""Faults injected into a stage's real operator inside Ray workers (test_row_faults.py,
test_job_row_faults.py): the operator is built as the job builds it, then some of its parts
raise on the argument their test picks. A test module using these registers itself and this
module for pickling by value (`ship`): Ray workers cannot import test modules."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable

import ray.cloudpickle


def ship(module_name: str) -> None:
    """Send this module and the test module to Ray workers by value."""
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.cloudpickle.register_pickle_by_value(sys.modules[module_name])


def fault(needle) -> IndexError:
    return IndexError(f"[E1002] injected fault on {str(needle)[:40]!r}")


def raising_on(method, hits: Callable[[object], bool], needle=None):
    """`method`, raising when `hits(its first argument)`."""

    @functools.wraps(method)
    def patched(first, *args, **kwargs):
        if hits(first):
            raise fault(needle)
        return method(first, *args, **kwargs)

    return patched


class Faulty:
    """The real operator, with some of its parts (dotted attribute paths) made to raise:
    `patches` are (path, hits, needle) with `hits` as `raising_on` takes it."""

    def __init__(self, operator, patches, **kwargs):
        self.inner = operator(**kwargs)
        for path, hits, needle in patches:
            *parents, name = path.split(".")
            owner = functools.reduce(getattr, parents, self.inner)
            setattr(owner, name, raising_on(getattr(owner, name), hits, needle))

    def __call__(self, batch):
        return self.inner(batch)
