"""One thin entry point per job: `python -m conceptual.jobs.<job> --help`.

A model family's jobs (train_*, evaluate_*, compare_*) are declared in the family table
(conceptual.families): a job that has a file here is that file, whose `main` is its factory
applied to its family; one that has none (a family that reuses another's jobs, as the
contrastive family runs the retriever's) is built from the registry as it is imported, so
that `python -m conceptual.jobs.train_contrastive` and `ray job submit -- python -m ...`
find it like any other.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable, Sequence


def registry_job(job: str) -> Callable[[list[str] | None], int]:
    """The `main` of a family's job: its factory (conceptual.families) applied to its family
    and name."""
    from conceptual.families import job_factories, resolve

    family, factory = job_factories()[job]
    return resolve(factory)(family, job)


class _FamilyJobs(importlib.abc.MetaPathFinder, importlib.abc.InspectLoader):
    """Finds `conceptual.jobs.<job>` for a registry job without a file. Last on sys.meta_path:
    a file always wins. Its source is two lines, so runpy (`python -m`) can run it."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        package, _, job = fullname.rpartition(".")
        if package != __name__:
            return None
        from conceptual.families import job_factories

        if job not in job_factories():
            return None
        return importlib.machinery.ModuleSpec(fullname, self, origin="conceptual.families")

    def get_source(self, fullname: str) -> str:
        job = fullname.rpartition(".")[2]
        return (
            f"import sys\nfrom {__name__} import registry_job\nmain = registry_job({job!r})\n"
            "if __name__ == '__main__':\n    sys.exit(main())\n"
        )

    def is_package(self, fullname: str) -> bool:
        return False


if not any(isinstance(finder, _FamilyJobs) for finder in sys.meta_path):
    sys.meta_path.append(_FamilyJobs())
