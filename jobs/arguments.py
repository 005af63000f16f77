"""What every job's command line shares: local paths made absolute the way the user meant them
(conceptual.paths.user_path), `key=value` overrides, `--verbose`, and the guarantees every
job gives its data, here once so that a new job cannot forget them:

- JobParser (every job's parser) refuses an output (`type=output`) that is, holds or lies
  inside an input (`type=location`), or a folder holding files no job of this platform
  wrote (storage.claim_output; `--into-existing` writes there anyway, and a job replaces
  only the parts it writes), with an `error:` line and exit code 2, before anything is
  read, deleted or started;
- JobParser checks the keys of `key=value` overrides and of `--config` against the shipped
  configs/<name>.yaml (`keys=`; the data jobs' add_data_arguments sets it) before the job
  imports its pipeline: `error: ... epoch: unknown key, did you mean epochs?` at once; the
  config is loaded in full before Ray starts (conceptual.config.load says the same);
- errors are printed by conceptual.logs.error (`error: ...`, credentials redacted), and
  conceptual.logs.job_output redacts every other line the job prints or logs;
- a job does its work inside `job_run` (its output in its log, job_output), which turns the
  errors a user can fix (a bad key or value, missing data) into an `error:` line and exit
  code 2, and the failures it is told of into exit code 1.

Every job's `main` is wrapped in `job_main`, so that what JobParser refuses and what job_run
stops on is the exit code that main returns, in a process of its own or called from another.
"""

from __future__ import annotations

import argparse
import functools
import glob
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from conceptual.logs import error, job_output
from conceptual.paths import LocationError, user_path


def location(value: str) -> str:
    """argparse type for what a job reads: a URI, or a local path made absolute."""
    try:
        return user_path(value)
    except LocationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def output(value: str) -> str:
    """argparse type for where a job writes (a folder it clears and fills): as `location`,
    and JobParser keeps it apart from every input."""
    return location(value)


def file_output(value: str) -> str:
    """argparse type for a single file a job writes besides its data (a results JSON): as
    `location`, but neither an input that must exist nor a folder the job claims."""
    return location(value)


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


@contextmanager
def stopping(
    refused: tuple[type[BaseException], ...] | None = None,
    failed: tuple[type[BaseException], ...] = (),
) -> Iterator[None]:
    """Errors a user can fix (`refused`; by default a bad key or value and missing data:
    ConfigError, StorageError, ValueError) stop the job with exit code 2, the `failed` ones
    with 1, each said in an `error:` line (Stopped). A tracking server that does not answer
    is always one of the first: every job says so at once."""
    from conceptual.storage import TrackingUnreachable

    if refused is None:
        from conceptual.config import ConfigError
        from conceptual.storage import StorageError

        refused = (ConfigError, StorageError, ValueError)
    try:
        yield
    except (*refused, TrackingUnreachable) as exc:
        raise Stopped(exc) from None
    except failed as exc:
        raise Stopped(exc, code=1) from None


@contextmanager
def job_run(
    job: str,
    verbose: bool,
    refused: tuple[type[BaseException], ...] | None = None,
    failed: tuple[type[BaseException], ...] = (),
) -> Iterator[Path | None]:
    """A job's work: its output in its log (job_output, whose path it yields) and its errors
    stopping it (`stopping`)."""
    with job_output(job, verbose) as log, stopping(refused, failed):
        yield log


class JobParser(argparse.ArgumentParser):
    """Every job's parser. Besides parsing, it refuses an output that overlaps an input (the
    same folder or bucket prefix, or one inside the other): a job clears and rewrites its
    output, so the data it reads would be deleted or replaced. `--config` is not data. With
    `keys` (a shipped config file's name, `train_captioner.yaml`) it checks the keys of the
    overrides and of `--config` first."""

    def __init__(self, *args: Any, keys: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.keys = keys

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        """As argparse's; a job that has an output also gets `--into-existing`."""
        action = super().add_argument(*args, **kwargs)
        if kwargs.get("type") is output:
            self.writes_output()
        return action

    def writes_output(self) -> None:
        """`--into-existing`, for a job whose output is named elsewhere than by `type=output`
        (the pipeline's `output=` key); it then claims it with claim_output itself."""
        from conceptual.storage import INTO_EXISTING

        if "into_existing" not in {action.dest for action in self._actions}:
            super().add_argument(
                INTO_EXISTING,
                action="store_true",
                help="write into an output folder that holds other files (only the job's own "
                "parts are replaced); refused without it",
            )

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        namespace, extra = super().parse_known_args(args, namespace)
        if self.keys and isinstance(getattr(namespace, "overrides", None), list):
            from conceptual.config import ConfigError, check_keys

            try:
                check_keys(self.keys, namespace.overrides, getattr(namespace, "config", None))
            except ConfigError as exc:
                raise Stopped(exc) from None
        outputs: dict[str, str] = {}
        inputs: dict[str, str] = {}
        for action in self._actions:
            if action.type not in (output, location) or action.dest == "config":
                continue
            value = getattr(namespace, action.dest, None)
            name = action.option_strings[-1] if action.option_strings else action.dest
            values = value if isinstance(value, list) else [value]
            for i, one in enumerate(v for v in values if isinstance(v, str)):
                key = name if len(values) == 1 else f"{name} #{i + 1}"
                if action.type is location and glob.has_magic(one):  # a glob reads its folder
                    one = one[: min(one.find(c) for c in "*?[" if c in one)].rsplit("/", 1)[0]
                (outputs if action.type is output else inputs)[key] = one
        from conceptual.storage import StorageError, claim_output, refuse_overlap

        try:
            refuse_overlap(outputs, inputs)
            # A local input that is not there is said at once, before any heavy import.
            for name, value in inputs.items():
                # URIs: their stores say; a glob (harvest's `crawl/*.warc.gz`): its job does
                if ":/" not in value and not glob.has_magic(value) and not Path(value).exists():
                    raise StorageError(f"{name} {value}: no such file or folder")
            for uri in outputs.values():
                claim_output(uri, self.prog, namespace.into_existing)
        except StorageError as exc:
            raise Stopped(exc) from None
        return namespace, extra


def add_common(parser: argparse.ArgumentParser, overrides_help: str | None = None) -> None:
    """`--verbose` and the trailing `key=value` overrides."""
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="show Ray's and MLflow's own logs on the terminal (always in the job's log file)",
    )
    parser.add_argument("overrides", nargs="*", metavar="key=value", help=overrides_help)


def add_data_arguments(
    parser: argparse.ArgumentParser,
    source: str,
    source_help: str,
    output_help: str,
    config: str,
    many: bool = False,
) -> None:
    """What a data job reads (`--input`, `--data`; `many`: one or more, as curate takes web
    archives), where it writes, its config file, and the common arguments."""
    if isinstance(parser, JobParser):
        parser.keys = config
    nargs = "+" if many else None
    parser.add_argument(source, required=True, type=location, nargs=nargs, help=source_help)
    parser.add_argument("--output", required=True, type=output, help=output_help)
    parser.add_argument(
        "--config", type=location, help=f"YAML file (configs/{config} shows every key)"
    )
    add_common(parser)


def run_data_job(
    job: str,
    args: argparse.Namespace,
    source: str | list[str],
    config_class: type,
    run: Callable[[str, str, Any], Any],
    user_errors: tuple[type[Exception], ...] = (),
    check: Callable[[str, Any], Any] | None = None,
) -> tuple[Any, Any, Path | None]:
    """A data job from its arguments to its result: the config, a line saying what goes
    where, Ray, the run, all with third-party output in the job's log. `check(source,
    config)`, the job's own checks of its input, runs before Ray starts and returns the
    config to run with. `source` may be a list (harvest's archives; a glob among them is
    checked by the job). Returns (config, what `run` returned, the log's path), or stops the
    job (Stopped) with exit code 2 on an error the user can fix (a bad key, a missing input,
    `user_errors`), 1 after rows failed past errors.* or object storage failed for good."""
    from conceptual import storage
    from conceptual.config import ConfigError, load
    from conceptual.errors import TooManyErrors
    from conceptual.runtime import init_ray, require_shared
    from conceptual.storage import StorageError

    with job_output(job, args.verbose) as log:
        try:
            config = load(config_class, args.config, args.overrides)
            sources = [source] if isinstance(source, str) else source
            for one in sources:
                if not glob.has_magic(one) and not storage.exists(one):
                    raise StorageError(f"no input data at {one}")
            if check is not None:
                config = check(source, config)
            print(f"{job}: {' '.join(sources)} -> {args.output}", flush=True)
            init_ray()
            named = {f"the input {one}": one for one in sources}
            require_shared({**named, "--output": args.output})
            return config, run(source, args.output, config), log
        except (ConfigError, StorageError, *user_errors) as exc:
            raise Stopped(exc) from None
        except TooManyErrors as exc:  # rows failed past errors.*: the system, not the data
            incomplete = f"{args.output} is incomplete (no {storage.SUCCESS} marker)"
            raise Stopped(f"{exc}. {incomplete}.", code=1) from None
        except OSError as exc:  # a Ray task's error is also an instance of its cause's type
            if (failure := storage.store_failure(exc)) is None:
                raise
            incomplete = f"{args.output} is incomplete (no {storage.SUCCESS} marker)"
            raise Stopped(
                f"{failure}. {incomplete}: run the job again once the store answers.", code=1
            ) from None


def add_teacher_speech(parser: argparse.ArgumentParser) -> None:
    """`--teacher-speech URI` (repeatable): the retriever trainers' clips that teach a speech
    tower through `teacher=` by their captions alone."""
    parser.add_argument(
        "--teacher-speech",
        action="append",
        default=[],
        type=location,
        help="more clips that teach the speech tower through teacher= (repeatable)",
    )


def add_training_arguments(
    parser: argparse.ArgumentParser, config: str, default_model: str, example: str
) -> None:
    """What a training job takes besides its data: a config file, the registered model,
    `--no-register`, and the common arguments (`example`: overrides to show in --help)."""
    parser.add_argument("--config", type=location, help=f"YAML file of {config} keys")
    parser.add_argument("--model-name", help=f"registered model (default: {default_model})")
    parser.add_argument("--no-register", action="store_true", help="train and log only")
    add_common(parser, f"{config} keys, e.g. {example}")


def run_training_job(
    args: argparse.Namespace,
    recipe: Any,
    *data: Any,
    report: Callable[[dict[str, Any]], str] | None = None,
) -> int:
    """A training job from its arguments to its last line: the config, a model of the
    `recipe`'s family trained on `data` (training.train), registered (unless --no-register)
    with the champion rule's decision, the best epoch's dev metrics, `report(result)` (more
    for people, such as a held-out table), where the model is, and the MLflow run. Returns
    the exit code, or stops (`stopping`) on an error the user can fix (a bad key, missing
    data, no dev split)."""
    from conceptual import registry
    from conceptual.config import load
    from conceptual.pipelines import training

    with job_output(recipe.stage, args.verbose) as log:
        with stopping():
            config = load(recipe.config, args.config, args.overrides)
            result = training.train(recipe, config, *data)
        decision = None
        if not args.no_register:
            decision = training.publish(recipe, result, config, args.model_name)
    print(json.dumps({"best": result["best"], "eval_set": result["eval_set"]}, indent=2))
    if report is not None:
        print(report(result))
    print(f"model:    {result['model_dir']}")
    if decision:
        print(registry.decision_lines(decision))
    report_run(result["run_id"], config.experiment, log)
    return 0


def report_run(run_id: str, experiment: str, log: Path | None, what: str = "run") -> None:
    """A job's last lines: its MLflow run (the tracking URI without credentials) and log."""
    from conceptual.tracking import printable_tracking_uri

    print(f"mlflow:   {what} {run_id} in experiment {experiment!r} at {printable_tracking_uri()}")
    if log:
        print(f"log:      {log}")
