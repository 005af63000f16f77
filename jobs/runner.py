"""How every job runs, here once so that a new job cannot forget its guarantees (its command
line, and what is checked as that is read, are conceptual.jobs.arguments'):

- a job does its work inside `job_run`: third-party output goes to the job's log file, and
  no line the job prints or logs shows credentials (conceptual.logs.job_output); errors are
  said in `error: ...` lines (conceptual.logs.error, redacted too);
- an error the user can fix (a bad key or value, missing data: `refused`) and a tracking
  server that does not answer stop the job with exit code 2; a failure of the system (rows
  that failed past errors.*, object storage that failed after its retries, `failed`) with
  exit code 1, its line saying that the job's output is incomplete;
- its last lines name its MLflow run and its log (report_run);
- every job's `main` is wrapped in `job_main`, so that what its parser refuses and what
  job_run stops on is the exit code that main returns, in a process of its own or called
  from another, and an output folder the job claimed and did not write to is removed again.

Each kind of job is a use of job_run from its arguments to its last line: run_data_job (an
input through a Ray pipeline to an output), run_config_job (a config naming its inputs and
output: the pipeline and ablate, whose `main` arguments.config_job makes), run_training_job
(a model family's recipe on its data), run_evaluation (a family's evaluate function),
run_import (a dataset as records).
"""

from __future__ import annotations

import argparse
import functools
import glob
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from conceptual.logs import error, job_output
from conceptual.pipelines.families import Family

Errors = tuple[type[BaseException], ...]

# ---------------------------------------------------------------- stopping with an exit code


class Stopped(SystemExit):
    """A job stopped, said in an `error:` line, with its exit code (job_main returns it): 2
    for what the user can fix (what JobParser refuses, a bad key, missing data), 1 for what
    failed in the system."""

    def __init__(self, message: object, code: int = 2) -> None:
        error(message)
        super().__init__(code)


def job_main(main: Callable[[list[str] | None], int]) -> Callable[[list[str] | None], int]:
    """Every job's `main`: what its JobParser refused or its job_run stopped on is returned as
    its exit code; an output folder it created and did not write to is removed again."""

    @functools.wraps(main)
    def run(argv: list[str] | None = None) -> int:
        code = 1
        try:
            code = main(argv)
        except Stopped as exc:
            code = int(exc.code)  # type: ignore[arg-type]
        finally:
            from conceptual.storage import settle_claims

            settle_claims(used=code == 0)
        return code

    return run


def family_job(
    body: Callable[[Family, str, list[str] | None], int],
) -> Callable[[Family, str], Callable[[list[str] | None], int]]:
    """A model family's job (conceptual.pipelines.families): `body(family, name, argv)` becomes the
    factory whose `job(family, name)` is that family's job `main`, as job_main makes it."""

    def job(family: Family, name: str) -> Callable[[list[str] | None], int]:
        return job_main(functools.partial(body, family, name))

    return job


@contextmanager
def job_run(
    job: str,
    verbose: bool,
    refused: Errors | None = None,
    failed: Errors = (),
    output: str | None = None,
) -> Iterator[Path | None]:
    """A job's work: third-party output in its log (job_output, whose path it yields) and
    the errors that stop it, each said in an `error:` line (Stopped). Exit code 2: what the
    user can fix (`refused`; by default a bad key or value and missing data: ConfigError,
    StorageError, ValueError) and a tracking server that does not answer (every job says so
    at once). Exit code 1: `failed`, rows that failed past errors.* and object storage that
    failed after its retries, whose lines say that `output` (the job's, if it writes one) is
    incomplete."""
    from conceptual import storage
    from conceptual.errors import TooManyErrors

    if refused is None:
        from conceptual.config import ConfigError

        refused = (ConfigError, storage.StorageError, ValueError)
    left = f". {output} is incomplete (no {storage.SUCCESS} marker)" if output else ""
    with job_output(job, verbose) as log:
        try:
            yield log
        except (*refused, storage.TrackingUnreachable) as exc:
            raise Stopped(exc) from None
        except failed as exc:
            raise Stopped(exc, code=1) from None
        except TooManyErrors as exc:  # rows failed past errors.*: the system, not the data
            raise Stopped(f"{exc}{left}.", code=1) from None
        except OSError as exc:  # a Ray task's error is also an instance of its cause's type
            if (failure := storage.store_failure(exc)) is None:
                raise
            again = "run the job again once the store answers"
            raise Stopped(f"{failure}{left}: {again}.", code=1) from None


def report_run(run_id: str, experiment: str, log: Path | None, what: str = "run") -> None:
    """A job's last lines: its MLflow run (the tracking URI without credentials) and log."""
    from conceptual.tracking import printable_tracking_uri

    print(f"mlflow:   {what} {run_id} in experiment {experiment!r} at {printable_tracking_uri()}")
    if log:
        print(f"log:      {log}")


def print_rejected(output: str, summary: dict[str, Any], what: str = "internal errors") -> None:
    """The rejected/ line of a job whose summary counts its rejections by stage and reason,
    when there are any."""
    if rejected := sum(sum(reasons.values()) for reasons in summary["rejected"].values()):
        from conceptual import storage

        print(f"rejected: {storage.join(output, 'rejected')}  ({rejected} {what})")


# ---------------------------------------------------------------- the kinds of job


def run_data_job(
    job: str,
    args: argparse.Namespace,
    source: str | list[str],
    config_class: type,
    run: Callable[[Any, str, Any], tuple[dict[str, Any], str]],
    show: Callable[[dict[str, Any], Any], None],
    user_errors: Errors = (),
    check: Callable[[Any, Any], Any] | None = None,
) -> int:
    """A data job from its arguments to its last line: the config, a line saying what goes
    where, Ray, `run(source, output, config)` (its summary and MLflow run), all in job_run,
    then `show(summary, config)` and the run. `check(source, config)`, the job's own checks
    of its input, runs before Ray starts and returns the config to run with (or the config
    and the source it names: harvest's `--crawl` lists its files by the config). `source` may be
    a list (harvest's archives; a glob among them is checked by the job). Refused (exit code
    2): a bad key, a missing input, `user_errors`."""
    from conceptual import storage
    from conceptual.config import ConfigError, load
    from conceptual.runtime import init_ray, require_shared

    refused = (ConfigError, storage.StorageError, *user_errors)
    with job_run(job, args.verbose, refused, output=args.output) as log:
        config = load(config_class, args.config, args.overrides)
        sources = [source] if isinstance(source, str) else source
        for one in sources:
            if not glob.has_magic(one) and not storage.exists(one):
                raise storage.StorageError(f"no input data at {one}")
        if check is not None:  # the config, or (the config, the sources it names)
            checked = check(source, config)
            config, source = checked if isinstance(checked, tuple) else (checked, source)
            sources = [source] if isinstance(source, str) else source
        more = f" ... ({len(sources)} inputs)" if len(sources) > 3 else ""
        print(f"{job}: {' '.join(sources[:3])}{more} -> {args.output}", flush=True)
        init_ray()
        named = {f"the input {one}": one for one in sources}
        require_shared({**named, "--output": args.output})
        summary, run_id = run(source, args.output, config)
    show(summary, config)
    report_run(run_id, config.experiment, log)
    return 0


def run_config_job(
    job: str,
    prog: str,
    args: argparse.Namespace,
    config_class: type,
    inputs: Sequence[str],
    check: Callable[[Any], Any],
    run: Callable[[Any], dict[str, Any]],
    show: Callable[[dict[str, Any], Any], None],
    what: str,
) -> int:
    """A job whose config names its `inputs` and its `output` (the pipeline, ablate), from its
    arguments to its last line: the config, its paths as the user's, `check(config)` (every
    step or variant, before Ray starts), the output refused where it overlaps an input and
    claimed, Ray, `run(config)` in job_run, then `show(result, config)` and the run
    (result["run_id"], as `what`). Refused (exit code 2): a bad key or value, a bad
    candidates file, storage; a step that stopped the run: exit code 1."""
    from conceptual.candidates import CandidateFormatError
    from conceptual.config import ConfigError, load
    from conceptual.paths import user_path
    from conceptual.pipelines.pipeline import PipelineStopped
    from conceptual.runtime import init_ray, require_shared
    from conceptual.storage import StorageError, claim_output, refuse_overlap

    refused = (ConfigError, CandidateFormatError, StorageError, ValueError)
    with job_run(job, args.verbose, refused, failed=(PipelineStopped,)) as log:
        config = load(config_class, args.config, args.overrides)
        paths = (*inputs, "output")
        config = config.model_copy(
            update={key: user_path(getattr(config, key)) for key in paths if getattr(config, key)}
        )
        check(config)
        # Each step clears and rewrites its folder under the output: never an input's.
        refuse_overlap({"output": config.output}, {key: getattr(config, key) for key in inputs})
        if config.output:
            claim_output(config.output, prog, args.into_existing)
        init_ray()
        require_shared({key: getattr(config, key) for key in paths})
        result = run(config)
    show(result, config)
    report_run(result["run_id"], config.experiment, log, what)
    return 0


def run_training_job(
    args: argparse.Namespace,
    family: Family,
    *data: Any,
    show: Callable[[dict[str, Any]], None] | None = None,
) -> int:
    """A training job (arguments.training_parser) from its arguments to its last line: the
    config, a model of `family` trained on `data` (Family.train), registered (unless
    --no-register) with the champion rule's decision (Family.publish), the best epoch's dev
    metrics, `show(result)` (more for people, such as a held-out table), where the model is,
    and the MLflow run. Refused (exit code 2): a bad key, missing data, no dev split."""
    from conceptual import registry
    from conceptual.config import load

    with job_run(family.jobs["train"], args.verbose) as log:
        config = load(family.recipe().config, args.config, args.overrides)
        result = family.train(config, *data)
        decision = None if args.no_register else family.publish(result, config, args.model_name)
    print(json.dumps({"best": result["best"], "eval_set": result["eval_set"]}, indent=2))
    if show is not None:
        show(result)
    print(f"model:    {result['model_dir']}")
    if decision:
        print(registry.decision_lines(decision))
    report_run(result["run_id"], config.experiment, log)
    return 0


def run_evaluation(
    job: str,
    args: argparse.Namespace,
    config_class: type,
    evaluate: Callable[..., dict[str, Any]],
    *data: Any,
    show: Callable[[dict[str, Any]], None],
) -> int:
    """An evaluation job (add_evaluation_arguments) from its arguments to its last line: the
    config (--split over its `split` key), `evaluate(model, features, config, *data)`,
    `show(result)`, the MLflow run. Refused (exit code 2): a bad key, an unknown model, no
    such split."""
    from conceptual.config import load

    overrides = [*args.overrides, *([f"split={args.split}"] if args.split else [])]
    with job_run(job, args.verbose) as log:
        config = load(config_class, args.config, overrides)
        result = evaluate(args.model, args.features, config, *data)
    show(result)
    report_run(result["run_id"], config.experiment, log)
    return 0


def run_import(
    job: str,
    args: argparse.Namespace,
    write: Callable[[Any], dict[str, Any]],
    config_class: type,
    flags: Sequence[str] = (),
    describe: Callable[[dict[str, Any]], str] | None = None,
) -> int:
    """An import job from its arguments to its last lines: `write(config)`, which returns
    import.json's content, with the config of `config_class` (`flags`, then the overrides),
    then `describe(report)` (importers.summary by default) and where the clips and the report
    are. Refused (exit code 2): a bad key, a source that cannot be imported."""
    from conceptual import storage
    from conceptual.config import ConfigError, load
    from conceptual.importers import REPORT, ImportSourceError, summary

    refused = (ConfigError, ImportSourceError, storage.StorageError)
    with job_run(job, args.verbose, refused, output=args.output):
        report = write(load(config_class, None, [*flags, *args.overrides]))
    print((describe or summary)(report))
    if "speech" in report:
        clips = report["speech"]["clips"]
        print(f"speech:   {storage.join(args.output, 'clips')}  ({clips} clips)")
    print(f"report:   {storage.join(args.output, REPORT)}")
    return 0


def run_pairs_import(
    job: str,
    args: argparse.Namespace,
    pairs: Callable[[], Iterable[Any]],
    flags: Sequence[str],
    then: Callable[[str], dict[str, Any]] | None = None,
) -> int:
    """run_import of the importers.Pair of `pairs()` (a reader's), written by
    importers.write_import under ImportConfig (`then`: its step after the pairs)."""
    from conceptual.importers import ImportConfig, write_import

    def write(config: Any) -> dict[str, Any]:
        return write_import(pairs(), args.output, config, then)

    return run_import(job, args, write, ImportConfig, flags)
