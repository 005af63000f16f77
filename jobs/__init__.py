"""One thin entry point per job: `python -m conceptual.jobs.<job> --help`.

A model family's jobs are its `jobs` in the family table (conceptual.pipelines.families):
`train`, `evaluate` and `compare` (`--family NAME`) run any family's job of that verb, with
the command lines (`factories`) of the family it runs as. The job names users know
(train_captioner, evaluate_retriever, ...) stay as files here: each a `main` that is its
family's factory applied to it, or a thin alias built by `registry_job`. A family added to
the table needs no file here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conceptual.pipelines.families import Family


def factories() -> dict[tuple[str, str], Callable]:
    """(family, verb) -> the factory whose `factory(family, name)` is the `main` of that
    family's job (runner.family_job): the command lines a family's jobs run with (a family
    that reuses another's code runs with that one's: Family.runs_as)."""
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
        ("captioner", "train"): train_captioner.job,
        ("captioner", "evaluate"): evaluate_captioner.job,
        ("captioner", "compare"): compare_captioners.job,
        ("retriever", "train"): train_retriever.job,
        ("retriever", "evaluate"): evaluate_retriever.job,
        ("retriever", "compare"): compare_retrievers.job,
        ("fluency", "train"): train_fluency.job,
        ("fluency", "compare"): compare_fluency.job,
    }


def family_jobs() -> dict[str, tuple[Family, Callable]]:
    """Every family job's name -> (its family, the factory that makes its `main`), read from
    the family table: each family's `jobs`, run with the command lines of its `runs_as`."""
    from conceptual.pipelines.families import FAMILIES

    made = factories()
    return {
        job: (family, made[family.command_lines, verb])
        for family in FAMILIES.values()
        for verb, job in family.jobs.items()
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

        from conceptual.pipelines.families import FAMILIES

        jobs = {name: family.jobs[verb] for name, family in FAMILIES.items() if verb in family.jobs}
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
