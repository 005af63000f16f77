"""One thin entry point per job: `python -m conceptual.jobs.<job> --help`.

A model family's jobs (train_*, evaluate_*, compare_*) are `family_jobs`: each names its
family (conceptual.families) and the factory of its code. Each has a file here, whose `main`
is that factory applied to its family, or, for a family that runs another's code (the
contrastive family runs the retriever's), a thin alias built by `registry_job`. `train`,
`evaluate` and `compare` (`--family NAME`) run any family's job of that verb.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conceptual.families import Family


def family_jobs() -> dict[str, tuple[Family, Callable]]:
    """Every family job's name -> (its family, the factory whose `factory(family, name)` is
    the job's `main`, runner.family_job). A family that runs another's code takes that one's
    factories (the contrastive family, the retriever's)."""
    from conceptual.families import FAMILIES
    from conceptual.jobs import (
        compare_captioners,
        compare_fluency,
        compare_retrievers,
        evaluate_captioner,
        evaluate_retriever,
        train_captioner,
        train_fluency,
        train_retriever,
    )

    return {
        "train_captioner": (FAMILIES["captioner"], train_captioner.job),
        "evaluate_captioner": (FAMILIES["captioner"], evaluate_captioner.job),
        "compare_captioners": (FAMILIES["captioner"], compare_captioners.job),
        "train_retriever": (FAMILIES["retriever"], train_retriever.job),
        "evaluate_retriever": (FAMILIES["retriever"], evaluate_retriever.job),
        "compare_retrievers": (FAMILIES["retriever"], compare_retrievers.job),
        "train_contrastive": (FAMILIES["contrastive"], train_retriever.job),
        "evaluate_contrastive": (FAMILIES["contrastive"], evaluate_retriever.job),
        "compare_contrastive": (FAMILIES["contrastive"], compare_retrievers.job),
        "train_fluency": (FAMILIES["fluency"], train_fluency.job),
        "compare_fluency": (FAMILIES["fluency"], compare_fluency.job),
    }


def registry_job(job: str) -> Callable[[list[str] | None], int]:
    """The `main` of a family's job, from family_jobs."""
    family, factory = family_jobs()[job]
    return factory(family, job)


def family_verb(verb: str) -> Callable[[list[str] | None], int]:
    """The `main` of the generic job `verb` (train, evaluate, compare): `--family NAME`, then
    that family's `verb` job with the rest of the command line."""

    def main(argv: list[str] | None = None) -> int:
        import argparse

        from conceptual.families import FAMILIES

        jobs = {family.name: job for job, (family, _) in family_jobs().items()
                if job.startswith(f"{verb}_")}  # fmt: skip
        parser = argparse.ArgumentParser(
            prog=f"python -m conceptual.jobs.{verb}",
            description=f"A model family's {verb} job: --family NAME, then that job's own "
            f"arguments (--family NAME --help lists them).",
            add_help=False,
        )
        parser.add_argument("--family", choices=sorted(jobs), help="the model family")
        parser.add_argument("-h", "--help", action="store_true")
        args, rest = parser.parse_known_args(argv)
        if args.family is None:
            if args.help:
                parser.print_help()
                return 0
            without = sorted(set(FAMILIES) - set(jobs))
            none = f" ({', '.join(without)} {'has' if len(without) == 1 else 'have'} none)"
            parser.error(f"--family is required: one of {', '.join(sorted(jobs))}"
                         f"{none if without else ''}")  # fmt: skip
        return registry_job(jobs[args.family])([*rest, *(["--help"] if args.help else [])])

    return main
