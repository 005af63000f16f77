"""One thin entry point per job: `python -m conceptual.jobs.<job> --help`.

A model family's jobs (train_*, evaluate_*, compare_*) are declared in the family table
(conceptual.families). Each has a file here: the family's own code (a factory applied to its
family), or, for a family that runs another's code (the contrastive family runs the
retriever's), a thin alias built by `registry_job`. `train`, `evaluate` and `compare`
(`--family NAME`) run any family's job of that verb, by the same table.
"""

from __future__ import annotations

from collections.abc import Callable


def registry_job(job: str) -> Callable[[list[str] | None], int]:
    """The `main` of a family's job: its factory (conceptual.families) applied to its family
    and name."""
    from conceptual.families import job_factories, resolve

    family, factory = job_factories()[job]
    return resolve(factory)(family, job)


def family_verb(verb: str) -> Callable[[list[str] | None], int]:
    """The `main` of the generic job `verb` (train, evaluate, compare): `--family NAME`, then
    that family's `verb` job with the rest of the command line."""

    def main(argv: list[str] | None = None) -> int:
        import argparse

        from conceptual.families import FAMILIES, job_factories

        jobs = {family.name: job for job, (family, _) in job_factories().items()
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
