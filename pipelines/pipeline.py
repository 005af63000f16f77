"""The jobs' work in order, as one resumable job: its steps curate, features, train, register,
evaluate and, when configured, speech, train_retriever, train_contrastive and index (the
`steps` it is given).

    step             reads                           writes (OUTPUT/...)  config
    curate           INPUT (web archives: harvested  curated/             curate
                     first, into curated/harvest/)
    features         curate                          features/            features
    train            features                        an MLflow run        train
    register         train                           a registry version   model_name
    evaluate         features, train                 an MLflow run        evaluate
    speech           curate                          clips/               speech
    train_retriever  features (+ speech)             a registry version   train_retriever,
                                                                          retriever_name
    train_contrastive  features                      a registry version   train_contrastive
    index            features, train_retriever       index/<retriever>/   index
                     (+ speech)
    OUTPUT/steps/<step>.json    one manifest per finished step
    OUTPUT/summary.json         every step's result, as the job prints it at the end

TABLE is that table. train registers nothing itself (register does, by the champion rule);
train_retriever and train_contrastive are the steps of the families that declare one
(conceptual.pipelines.families' pipeline_step: a family's step trains it on the features and registers
it by the same rule, as its train job does; its config section is the step's name);
index embeds the features (and, for a speech retriever, the clips) with that version and
tags it with the index. A speech retriever (train_retriever.modality=speech, the default)
also reads speech's clips: `(+ speech)`.

The config's `steps` lists the steps to run, in this order; by default the first five.
Each listed step's prerequisites (the steps it reads) must be listed too: they are skipped
when done. (`stages`, its old name, is still read for this release.)

A step is skipped when its manifest says it finished with the same fingerprint: a digest
of its config keys and of what it reads (the input's files, their sizes and a digest of
their bytes, for curation; the fingerprints of the steps it reads otherwise; the tracking
store, for the steps whose result lives there), and, for steps that write a folder, when
that folder's `_SUCCESS` is still there, and the MLflow run and registered version it
names still exist. A rerun after any failure so
continues where it stopped, and a changed key reruns that step and every step that reads
it, directly or not (a train_retriever key: train_retriever and index; not speech, nor the
captioner's steps). Every step's MLflow run is a child of one pipeline run, in the
pipeline's experiment, named after its input, steps and time; it ends FAILED when a step
fails. Each step prints what it did (the curation funnel, where its output went, the
evaluation beside its baseline) as it finishes or is skipped.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mlflow
from mlflow.exceptions import MlflowException
from pydantic import create_model

from conceptual import funnel, registry, storage, tracking
from conceptual.config import Config
from conceptual.harvest import stats as harvest_stats
from conceptual.pipelines.curation import curation
from conceptual.pipelines.curation.curation import where_it_went
from conceptual.pipelines.curation.curation_config import CurationConfig
from conceptual.pipelines.families import CAPTIONER, FAMILIES
from conceptual.pipelines.families.captioner.evaluate_captioner import (
    CaptionerEvalConfig,
    held_out_table,
)
from conceptual.pipelines.families.captioner.train_captioner import CaptionerTrainConfig
from conceptual.pipelines.features import features, speech
from conceptual.pipelines.features.features import FeaturesConfig
from conceptual.pipelines.features.speech import SpeechConfig
from conceptual.pipelines.retrieval import build_index
from conceptual.pipelines.retrieval.build_index import BuildIndexConfig
from conceptual.storage import SUCCESS


@dataclass(frozen=True)
class JobStep:
    """One row of TABLE: what a step of the pipeline job reads, writes and is configured by,
    and what runs it (not a curation `steps.Step`, which is a Ray Data operator)."""

    needs: tuple[str, ...]  # the steps whose output it reads (listed before it)
    folder: str | None  # OUTPUT/<folder>, done when its _SUCCESS is there; None: no folder
    settings: tuple[str, ...]  # the PipelineConfig keys its fingerprint covers
    run: Callable[[Context], dict[str, Any]]  # runs it; returns what its manifest records
    report: Callable[[Context, dict[str, Any]], str]  # what it did, for people, from that
    # The config section whose `modality` decides whether it reads speech's clips too (a
    # speech retriever's); None: it never does.
    clips_for: str | None = None


@dataclass(frozen=True)
class Context:
    """What a step gets: the config and the results of the steps before it."""

    config: PipelineConfig
    done: dict[str, dict[str, Any]]

    def folder(self, step: str) -> str:
        return step_folder(self.config, step)

    def section(self, key: str) -> Any:
        """The config section `key`, its runs in the pipeline's experiment."""
        return _in_experiment(getattr(self.config, key), self.config)

    def clips(self, step: str) -> str | None:
        """speech's output when `step` reads it (a speech retriever's); None otherwise."""
        return self.folder("speech") if _reads_clips(self.config, step) else None


def _curate(c: Context) -> dict[str, Any]:
    stats, run_id = curation.run(c.config.input, c.folder("curate"), c.section("curate"))
    return {"run_id": run_id, "input": stats["input"], "kept": stats["kept"]}


def _features(c: Context) -> dict[str, Any]:
    summary, run_id = features.run(c.folder("curate"), c.folder("features"), c.section("features"))
    return {"run_id": run_id, "rows": summary["rows"]}


def _train(c: Context) -> dict[str, Any]:
    result = CAPTIONER.train(c.section("train"), c.folder("features"))
    return {k: result[k] for k in ("run_id", "best", "eval_set")}


def _register(c: Context) -> dict[str, Any]:
    return CAPTIONER.publish(c.done["train"], c.config.train, c.config.model_name)


def _evaluate(c: Context) -> dict[str, Any]:
    model = f"runs:/{c.done['train']['run_id']}/model"
    result = CAPTIONER.evaluate(model, c.folder("features"), c.section("evaluate"))
    return {k: result[k] for k in ("run_id", "scores", "baseline", "eval_set", "images")}


def _speech(c: Context) -> dict[str, Any]:
    stats, run_id = speech.run(c.folder("curate"), c.folder("speech"), c.section("speech"))
    return {"run_id": run_id, "input": stats["input"], "clips": stats["kept"]}


def _trained(step: str) -> Callable[[Context], dict[str, Any]]:
    """A family's step (its registry entry's pipeline_step): train on the features (and a
    speech retriever on speech's clips), then register by the champion rule, as its train
    job does."""

    def run(c: Context) -> dict[str, Any]:
        family = STEP_FAMILIES[step]
        result = family.train(c.section(step), c.folder("features"), c.clips(step))
        name = getattr(c.config, NAME_KEYS[step]) if step in NAME_KEYS else None
        registered = family.publish(result, getattr(c.config, step), name)
        return {**{k: result[k] for k in ("run_id", "best", "eval_set")}, "registered": registered}

    return run


def _index(c: Context) -> dict[str, Any]:
    """The index of the version train_retriever registered, which build_index tags with it."""
    registered = c.done["train_retriever"]["registered"]
    model = f"models:/{registered['name']}/{registered['version']}"
    return build_index.run(
        model,
        c.folder("features"),
        c.folder("index"),
        c.section("index"),
        speech_uri=c.clips("index"),
    )


# ---------------------------------------------------------------- what each step says


def _curate_report(c: Context, result: dict[str, Any]) -> str:
    """The curate job's funnel and where its records went (or why none were kept)."""
    stats = storage.read_json(storage.join(c.folder("curate"), "stats.json"))
    text = f"{funnel.render(stats)}\n{where_it_went(stats, c.folder('curate'), c.config.curate)}"
    if "harvest" in stats:  # web archives as input: harvested first, the funnel's top
        text = f"{harvest_stats.render(stats['harvest'])}\n{text}"
    least = c.config.train.min_eval_size
    splits = stats.get("splits", {}).items()
    small = [f"{name} {n}" for name, n in splits if name != "train" and n < least]
    if small and result["kept"]:
        text += (
            f"\nwarning:  held-out splits this small make scores noise ({', '.join(small)} "
            f"records, under train.min_eval_size={least}): more input, or larger "
            "curate.split.val and curate.split.test"
        )
    return text


def _features_report(c: Context, result: dict[str, Any]) -> str:
    return f"features: {storage.join(c.folder('features'), 'features')}  ({result['rows']} rows)"


def _train_report(c: Context, result: dict[str, Any]) -> str:
    best = ", ".join(f"{k} {_rounded(v)}" for k, v in result["best"].items() if k != "epoch")
    return (
        f"trained:  run {result['run_id']}, best epoch {result['best']['epoch']}: {best} "
        f"on {result['eval_set']}"
    )


def _register_report(c: Context, result: dict[str, Any]) -> str:
    return registry.decision_lines(result)


def _evaluate_report(c: Context, result: dict[str, Any]) -> str:
    return held_out_table(result)


def _speech_report(c: Context, result: dict[str, Any]) -> str:
    clips = storage.join(c.folder("speech"), "clips")
    return f"clips:    {clips}  ({result['clips']} clips of {result['input']} captions)"


def _trained_report(c: Context, result: dict[str, Any]) -> str:
    return f"{_train_report(c, result)}\n{registry.decision_lines(result['registered'])}"


def _index_report(c: Context, result: dict[str, Any]) -> str:
    counts = ", ".join(f"{n} {what}" for what, n in result["counts"].items())
    return f"index:    {result['output']}  ({counts})"


def _rounded(value: Any) -> Any:
    """Floats to 4 decimals, through lists and dicts: what the summary file holds."""
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


# The families the pipeline trains with a step of their own, by step (conceptual.pipelines.families),
# and the PipelineConfig key naming the registered model a step's versions join.
STEP_FAMILIES = {f.pipeline_step: f for f in FAMILIES.values() if f.pipeline_step}
NAME_KEYS = {"train_retriever": "retriever_name"}

# The steps in pipeline order (the module's docstring shows this table):
# name: JobStep(prerequisites, folder under OUTPUT, config keys, run, report[, clips_for])
TABLE: dict[str, JobStep] = {
    "curate": JobStep((), "curated", ("curate",), _curate, _curate_report),
    "features": JobStep(("curate",), "features", ("features",), _features, _features_report),
    "train": JobStep(("features",), None, ("train",), _train, _train_report),
    "register": JobStep(("train",), None, ("model_name",), _register, _register_report),
    "evaluate": JobStep(("features", "train"), None, ("evaluate",), _evaluate, _evaluate_report),
    "speech": JobStep(("curate",), "clips", ("speech",), _speech, _speech_report),
    **{
        step: JobStep(
            ("features",),
            None,
            (step, *([NAME_KEYS[step]] if step in NAME_KEYS else [])),
            _trained(step),
            _trained_report,
            clips_for=step,
        )
        for step in STEP_FAMILIES
    },
    # One index folder per retriever: the text and the speech retriever's never overwrite
    # each other, so both can be served from one OUTPUT.
    "index": JobStep(
        ("features", "train_retriever"),
        "index/{retriever}",
        ("index",),
        _index,
        _index_report,
        clips_for="train_retriever",
    ),
}
JOB_STEPS = tuple(TABLE)
DEFAULT_JOB_STEPS = JOB_STEPS[:5]  # the captioner's; the retriever's when listed
SUMMARY = "summary.json"  # OUTPUT/summary.json: every step's result, numbers rounded
# OUTPUT/steps/<step>.json: what each finished step did (OUTPUT/stages/ before this release).
MANIFESTS, OLD_MANIFESTS = "steps", "stages"


class _Pipeline(Config):
    renamed_in = "pipeline.yaml"  # stages -> steps
    input: str | None = None  # candidates, as for the curate job (required)
    output: str | None = None  # the steps' folders and manifests (required)
    # Steps to run, in JOB_STEPS order, each with its prerequisites (the module's table).
    steps: list[str] = list(DEFAULT_JOB_STEPS)
    model_name: str = "captioner"  # the registered model `register` adds a version to
    retriever_name: str | None = None  # train_retriever's; None: retriever-<modality>
    experiment: str = "pipeline"  # every step's run goes here, under the pipeline's run
    curate: CurationConfig = CurationConfig()
    features: FeaturesConfig = FeaturesConfig()
    train: CaptionerTrainConfig = CaptionerTrainConfig()
    evaluate: CaptionerEvalConfig = CaptionerEvalConfig()
    speech: SpeechConfig = SpeechConfig()
    index: BuildIndexConfig = BuildIndexConfig()


def _sections() -> dict[str, Any]:
    """A section per family step, named after it, of its recipe's config."""
    configs = {step: family.recipe().config for step, family in STEP_FAMILIES.items()}
    return {step: (config, config()) for step, config in configs.items()}


# The job's config: the sections above and one per family step (train_retriever, ...).
PipelineConfig = create_model("PipelineConfig", __base__=_Pipeline, **_sections())


def prerequisites(step: str, config: PipelineConfig) -> tuple[str, ...]:
    """The steps whose output `step` reads under `config`, in JOB_STEPS order."""
    row = TABLE[step]
    clips = ("speech",) if _reads_clips(config, step) else ()
    return tuple(s for s in JOB_STEPS if s in row.needs + clips)


def check_steps(config: PipelineConfig) -> None:
    """ValueError, saying what is wrong, unless `steps` lists known steps once each, in
    JOB_STEPS order, each with its prerequisites."""
    steps = config.steps
    unknown = [s for s in steps if s not in TABLE]
    if unknown:
        raise ValueError(f"unknown step {', '.join(unknown)}: the steps are {', '.join(JOB_STEPS)}")
    ordered = [s for s in JOB_STEPS if s in steps]
    if steps != ordered:
        raise ValueError(
            f"steps must be in pipeline order, each once: [{','.join(ordered)}], "
            f"not [{','.join(steps)}]"
        )
    if not config.curate.with_images and (imaged := [s for s in steps if _needs_images(s)]):
        raise ValueError(
            f"step {imaged[0]} reads photos, and curate.with_images=false curates text only "
            "(a text-only curation has no images): set curate.with_images=true, or run "
            "steps=[curate] (or [curate,speech])"
        )
    for step in steps:
        missing = [s for s in prerequisites(step, config) if s not in steps]
        if missing:
            why = (
                " (train_retriever.modality=speech reads its clips; modality=text does not)"
                if "speech" in missing
                else ""
            )
            raise ValueError(
                f"step {step} reads the output of {' and '.join(missing)}{why}: "
                f"add {'it' if len(missing) == 1 else 'them'} to steps=[{','.join(steps)}]"
            )


def _needs_images(step: str) -> bool:
    """Whether `step` reads the features, which only photos have."""
    return step == "features" or "features" in TABLE[step].needs


def fingerprints(config: PipelineConfig, input_fingerprint: str) -> dict[str, str]:
    """Each listed step's fingerprint: a digest of its config keys and of the fingerprints
    of the steps it reads (of the input, for curate); for a step whose result lives only
    in the tracking store (no folder), of that store too, credentials left out: pointed at
    another store, it runs again there."""
    out: dict[str, str] = {}
    store = tracking.printable_tracking_uri()
    for step in config.steps:
        settings = [getattr(config, key) for key in TABLE[step].settings]
        upstream = [out[s] for s in prerequisites(step, config)] or [input_fingerprint]
        tracked = [store] if TABLE[step].folder is None else []
        out[step] = _digest(step, *settings, *upstream, *tracked)
    return out


class PipelineStopped(Exception):
    """A step left nothing for the steps after it (curation kept no candidate)."""


def run(config: PipelineConfig) -> dict[str, Any]:
    """Run (or skip) each configured step, printing what each did; returns `run_id` (the
    pipeline's MLflow run), `steps` (step -> {"skipped": bool, "result": what the step
    reported}) and `summary`, the file holding that, numbers rounded. The pipeline's run ends
    FAILED when a step fails or leaves the next nothing to read (PipelineStopped)."""
    if not config.input or not config.output:
        raise ValueError("the pipeline needs input=URI and output=URI")
    check_steps(config)
    name = f"pipeline {posixpath.basename(config.input.rstrip('/'))} [{','.join(config.steps)}]"
    with tracking.start_run(
        config.experiment, job="pipeline", run_name=tracking.timed_name(name)
    ) as active:
        pipeline_run = active.info.run_id
        tracking.log_config(config)
    client = mlflow.MlflowClient()
    client.update_run(pipeline_run, status="RUNNING")  # until its last step ends
    status = "FAILED"
    try:
        steps = _run_steps(config, pipeline_run)
        status = "FINISHED"
    finally:
        client.set_terminated(pipeline_run, status)
    summary = storage.join(config.output, SUMMARY)
    storage.write_json(summary, _rounded(steps))
    client.log_dict(pipeline_run, steps, "steps.json")
    return {"run_id": pipeline_run, "steps": steps, "summary": summary}


def _run_steps(config: PipelineConfig, pipeline_run: str) -> dict[str, Any]:
    steps: dict[str, Any] = {}
    context = Context(config, done={})
    fingerprint_of = fingerprints(config, input_fingerprint(config.input))
    with tracking.children_of(pipeline_run):
        for step in config.steps:
            fingerprint = fingerprint_of[step]
            manifest_uri = _manifest(config.output, step)
            folder = TABLE[step].folder and context.folder(step)
            manifest = _finished(step, config.output, fingerprint, folder)
            skipped = manifest is not None
            if manifest is None:
                print(f"\npipeline: {step}", flush=True)
                storage.delete(manifest_uri)
                manifest = {
                    "step": step,
                    "fingerprint": fingerprint,
                    "result": TABLE[step].run(context),
                }
                storage.write_json(manifest_uri, manifest)
            else:
                print(f"\npipeline: {step} skipped: done before with the same inputs and config")
            result = manifest["result"]
            print(TABLE[step].report(context, result), flush=True)
            steps[step] = {"skipped": skipped, "result": result}
            context.done[step] = result
            later = config.steps[config.steps.index(step) + 1 :]
            if step == "curate" and not result["kept"] and later:
                raise PipelineStopped(
                    f"curate kept none of the {result['input']} candidates, so {later[0]} has "
                    "nothing to read (the hint above says which setting decides)"
                )
    return steps


def step_folder(config: PipelineConfig, step: str) -> str:
    """OUTPUT/<the step's folder>: the index's under the retriever's registered name."""
    retriever = config.retriever_name or f"retriever-{config.train_retriever.modality}"
    return storage.join(config.output, TABLE[step].folder.format(retriever=retriever))


def input_fingerprint(uri: str) -> str:
    """What the input is: every file's path, size and a digest of its bytes (an input
    rewritten in place with the same size and time is another input)."""
    return _digest("input", storage.content_identity(uri))


def _digest(*parts: Any) -> str:
    text = json.dumps(
        [p.model_dump(mode="json") if isinstance(p, Config) else p for p in parts],
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(text.encode()).hexdigest()


def _manifest(output: str, step: str, folder: str = MANIFESTS) -> str:
    return storage.join(output, folder, f"{step}.json")


def _finished(step: str, output: str, fingerprint: str, folder: str | None) -> dict | None:
    """The step's manifest when it finished with this fingerprint (and its folder is still
    complete); None when it must run. A manifest where the last release wrote it
    (OUTPUT/stages/) still counts."""
    uris = (_manifest(output, step, folder) for folder in (MANIFESTS, OLD_MANIFESTS))
    found = [uri for uri in uris if storage.exists(uri)]
    if not found:
        return None
    manifest = storage.read_json(found[0])
    if manifest.get("fingerprint") != fingerprint:
        return None
    if folder is not None and not storage.exists(storage.join(folder, SUCCESS)):
        return None
    if not _still_recorded(manifest["result"]):
        return None
    return manifest


def _still_recorded(result: dict[str, Any]) -> bool:
    """Whether the MLflow run and the registered version a step's result names are still in
    the tracking store (someone may have deleted them since)."""
    client = mlflow.MlflowClient()
    versions = [r for r in (result, result.get("registered")) if r and "version" in r]
    try:
        if "run_id" in result and client.get_run(result["run_id"]).info.lifecycle_stage != "active":
            return False
        for v in versions:
            if v.get("name"):
                client.get_model_version(v["name"], str(v["version"]))
    except MlflowException:
        return False
    return True


def _in_experiment(section: Config, config: PipelineConfig) -> Any:
    return section.model_copy(update={"experiment": config.experiment})


def _reads_clips(config: PipelineConfig, step: str) -> bool:
    """Whether `step` reads speech's clips: its section's model hears speech."""
    section = TABLE[step].clips_for
    return section is not None and getattr(config, section).modality == "speech"
