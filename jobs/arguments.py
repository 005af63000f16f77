"""What every job's command line shares, here once so that a new job cannot forget it: local
paths made absolute the way the user meant them (conceptual.paths.user_path), `--config`,
`key=value` overrides, `--verbose`, the arguments of each kind of job, and what is checked as
they are read (JobParser, every job's parser), before anything is read, deleted or started:

- an output (`type=output`) that is, holds or lies inside an input (`type=location`), or a
  folder holding another job's output or files no job of this platform wrote
  (storage.claim_output; `--into-existing` writes there anyway, and a job replaces only the
  parts it writes), is refused with an `error:` line and exit code 2; so is a file output
  (`type=file_output`) that is there and that the job did not write (storage.claim_file),
  and a local input that is not there;
- the keys of `key=value` overrides and of `--config` are checked against the shipped
  configs/<name>.yaml (`keys=`) before the job imports its pipeline: `error: ... epoch:
  unknown key, did you mean epochs?` at once; the config is loaded in full before Ray starts
  (conceptual.config.load says the same).

How a job runs once its arguments are read, and the guarantees it gives then, are in
conceptual.jobs.runner.
"""

from __future__ import annotations

import argparse
import glob
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from conceptual.jobs.runner import Stopped, job_main, run_config_job, run_import
from conceptual.paths import LocationError, user_path
from conceptual.pipelines.families import Family

if TYPE_CHECKING:
    from conceptual.importers import ImportConfig

REGISTER = ("best", "all", "none")  # which variants of a comparison become registry versions

# ---------------------------------------------------------------- argument types


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
    `location`, but not an input that must exist; JobParser claims it (storage.claim_file:
    a file there that the job did not write is refused, never replaced)."""
    return location(value)


# ---------------------------------------------------------------- the parser


class JobParser(argparse.ArgumentParser):
    """Every job's parser, for the job `job` (its module under conceptual.jobs) described by
    the first paragraph of `doc`. Besides parsing, it refuses an output that overlaps an
    input (the same folder or bucket prefix, or one inside the other): a job clears and
    rewrites its output, so the data it reads would be deleted or replaced. `--config` is not
    data. With `keys` (a shipped config file's name, `train_captioner.yaml`) it checks the
    keys of the overrides and of `--config` first."""

    def __init__(self, job: str, doc: str | None, keys: str | None = None, **kwargs: Any):
        description = (doc or "").split("\n\n")[0]
        super().__init__(prog=f"python -m conceptual.jobs.{job}", description=description, **kwargs)
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
        if unknown := [arg for arg in extra if arg.startswith("--")]:
            # Said first: the value after an unknown option reads as an override, and its
            # "not key=value" would hide the option the user mistyped or the job lacks.
            self.error(f"unrecognized arguments: {' '.join(unknown)}")
        if self.keys and isinstance(getattr(namespace, "overrides", None), list):
            from conceptual.config import ConfigError, check_keys

            try:
                check_keys(self.keys, namespace.overrides, getattr(namespace, "config", None))
            except ConfigError as exc:
                raise Stopped(exc) from None
        outputs: dict[str, str] = {}
        inputs: dict[str, str] = {}
        files = [
            value
            for action in self._actions
            if action.type is file_output and (value := getattr(namespace, action.dest, None))
        ]
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
        from conceptual.storage import StorageError, claim_file, claim_output, refuse_overlap

        try:
            refuse_overlap(outputs, inputs)
            # A local input that is not there is said at once, before any heavy import.
            for name, value in inputs.items():
                # URIs: their stores say; a glob (harvest's `crawl/*.warc.gz`): its job does
                if ":/" not in value and not glob.has_magic(value) and not Path(value).exists():
                    raise StorageError(f"{name} {value}: no such file or folder")
            for uri in outputs.values():
                claim_output(uri, self.prog, namespace.into_existing)
            for uri in files:
                claim_file(uri, self.prog)
        except StorageError as exc:
            raise Stopped(exc) from None
        return namespace, extra


# ---------------------------------------------------------------- arguments jobs share


def add_verbose(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="show Ray's, MLflow's and the other libraries' own logs on the terminal (always "
        "in the job's log file)",
    )


def add_common(parser: argparse.ArgumentParser, overrides_help: str) -> None:
    """`--verbose` and the trailing `key=value` overrides."""
    add_verbose(parser)
    parser.add_argument("overrides", nargs="*", metavar="key=value", help=overrides_help)


def add_config(parser: JobParser, what: str = "", example: str = "") -> None:
    """`--config FILE` of `what` keys (a config's name; by default the shipped file's that
    the parser checks keys against), `--verbose` and the overrides (`example`: some)."""
    shipped = f"configs/{parser.keys}"
    config_help = f"YAML file of {what} keys" if what else "YAML file"
    if parser.keys:
        config_help += f" ({shipped} shows every key)"
    parser.add_argument("--config", type=location, help=config_help)
    add_common(parser, f"{what or shipped} keys{f', e.g. {example}' if example else ''}")


def add_data_arguments(
    parser: argparse.ArgumentParser,
    writes: str,
    source: str = "--data",
    reads: str = "a curation or import output, or its curated/ folder",
    many: bool = False,
    required: bool = True,
) -> None:
    """What a data job reads (by default curated records, as `--data`; `many`: one or more,
    as curate takes web archives; not `required` where the job can name it otherwise, as
    harvest's `--crawl`) and where it writes (`writes`: what goes there)."""
    nargs = "+" if many else None
    parser.add_argument(source, required=required, type=location, nargs=nargs, help=reads)
    parser.add_argument("--output", required=True, type=output, help=writes)


def add_import_arguments(
    parser: argparse.ArgumentParser, keys: str = "ImportConfig keys", recordings: bool = False
) -> None:
    """What an import job (run_import) takes besides its source: where it writes, with
    `recordings` the longest recorded speech it imports, `--verbose` and the overrides of
    its config's `keys`."""
    parser.add_argument(
        "--output", required=True, type=output, help="where the Parquet and import.json go"
    )
    if recordings:
        from conceptual.speech.human import MAX_SECONDS

        parser.add_argument(
            "--speech-max-seconds",
            type=float,
            default=MAX_SECONDS,
            help="longer recordings are not imported (counted as too_long_clip)",
        )
    add_common(parser, keys)


def add_model(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, type=location, help="a model URI or directory")


def add_evaluation_arguments(parser: JobParser, example: str = "") -> None:
    """An evaluation job's model, features, split and evaluation config (run_evaluation: the family's)."""
    add_model(parser)
    parser.add_argument("--features", required=True, type=location, help="a features job's output")
    parser.add_argument("--split", help="the split to score (default: test)")
    add_config(parser, "evaluation", example)


def training_parser(
    family: Family, name: str, doc: str | None, add_data: Callable[[JobParser], None]
) -> JobParser:
    """A family's training job's command line (run_training_job): what it trains on
    (`add_data`), its config (the family's shipped file's keys; its `example` shows some),
    the registered model, `--no-register`."""
    parser = JobParser(name, doc, keys=family.config_file)
    add_data(parser)
    add_config(parser, example=family.example)
    parser.add_argument("--model-name", help=f"registered model (default: {family.registers})")
    parser.add_argument("--no-register", action="store_true", help="train and log only")
    return parser


def add_variants(parser: JobParser, register: str, named: Sequence[str] = ()) -> None:
    """A comparison's variants: `--variant 'name: key=value ...'` (repeatable; required
    unless the family has `named` ones, which `--variants` picks from), which of them
    `--register` makes registry versions (default `register`), `--no-register`."""
    if named:
        parser.add_argument(
            "--variants",
            help=f"comma-separated, from: {', '.join(named)} (default: all, without --variant)",
        )
    parser.add_argument(
        "--variant",
        action="append",
        required=not named,
        default=[],
        help="'name: key=value ...' (repeat)",
    )
    parser.add_argument(
        "--register",
        choices=REGISTER,
        default=register,
        help="which variants become registry versions (the champion rule judges each)",
    )
    parser.add_argument(
        "--no-register", action="store_const", const="none", dest="register", help="--register none"
    )


def prefixed(overrides: Sequence[str], prefix: str) -> tuple[list[str], list[str]]:
    """(the overrides without `prefix`, those with it, the prefix taken off): a comparison's
    `eval.KEY=...` or `bootstrap.KEY=...` beside its training keys."""
    return (
        [o for o in overrides if not o.startswith(prefix)],
        [o.removeprefix(prefix) for o in overrides if o.startswith(prefix)],
    )


def config_job(
    job: str,
    doc: str | None,
    example: str,
    inputs: Sequence[str],
    parts: Callable[[], tuple[type, Callable[[Any], Any], Callable[[Any], dict[str, Any]]]],
    show: Callable[[dict[str, Any], Any], None],
    what: str,
) -> Callable[[list[str] | None], int]:
    """The `main` of a job run by a config naming its `inputs` and its output (configs/<job>.yaml
    lists its keys; `example`: some overrides), with runner.run_config_job. `parts()` imports
    what runs it once the command line is read: (its config class, the check of the config
    before Ray starts, the run); `show` and `what` are run_config_job's."""

    @job_main
    def main(argv: list[str] | None = None) -> int:
        parser = JobParser(job, doc, keys=f"{job}.yaml")
        parser.writes_output()
        add_config(parser, "", example)
        args = parser.parse_args(argv)
        config_class, check, run = parts()
        return run_config_job(job, parser.prog, args, config_class, inputs, check, run, show, what)

    return main


def translations_import(
    job: str,
    doc: str | None,
    importer: Callable[[str, str, str, Any], dict[str, Any]],
    config_class: type[ImportConfig],
    describe: Callable[[dict[str, Any]], str],
) -> Callable[[list[str] | None], int]:
    """The `main` of an import job of a caption set in another language beside its photos:
    `importer(images, cn, output, config)` over --images and --cn, with the overrides of
    `config_class` (its own keys named in the help, then ImportConfig's)."""
    from conceptual.importers import ImportConfig

    own = [
        f"{key}=..." for key in config_class.model_fields if key not in ImportConfig.model_fields
    ]

    @job_main
    def main(argv: list[str] | None = None) -> int:
        parser = JobParser(job, doc)
        parser.add_argument(
            "--images", required=True, type=location, help="the photos' folder (or a part)"
        )
        parser.add_argument("--cn", required=True, type=location, help="the caption set's folder")
        add_import_arguments(parser, ", ".join([*own, "ImportConfig keys"]))
        args = parser.parse_args(argv)

        def write(config: Any) -> dict[str, Any]:
            return importer(args.images, args.cn, args.output, config)

        return run_import(job, args, write, config_class, describe=describe)

    return main
