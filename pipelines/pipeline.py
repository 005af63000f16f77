"""The stages in order, as one resumable job: curate, features, train, register, evaluate
and, when configured, speech, train_retriever and index.

    stage            reads                           writes (OUTPUT/...)  config
    curate           INPUT                           curated/             curate
    features         curate                          features/            features
    train            features                        an MLflow run        train
    register         train                           a registry version   model_name
    evaluate         features, train                 an MLflow run        evaluate
    speech           curate                          clips/               speech
    train_retriever  features (+ speech)             a registry version   train_retriever,
                                                                          retriever_name
    index            features, train_retriever       index/               index
                     (+ speech)
    OUTPUT/stages/<stage>.json  one manifest per finished stage

TABLE is that table. train registers nothing itself (register does, by the champion rule);
train_retriever trains a dual encoder and registers it by the same rule, as its job does;
index embeds the features (and, for a speech retriever, the clips) with that version and
tags it with the index. A speech retriever (train_retriever.modality=speech, the default)
also reads speech's clips: `(+ speech)`.

`stages` lists the stages to run, in this order; by default the first five. Each listed
stage's prerequisites (the stages it reads) must be listed too: they are skipped when done.

A stage is skipped when its manifest says it finished with the same fingerprint: a digest
of its config keys and of what it reads (the input's files, their sizes and times, for
curation; the fingerprints of the stages it reads otherwise), and, for stages that write
a folder, when that folder's `_SUCCESS` is still there. A rerun after any failure so
continues where it stopped, and a changed key reruns that stage and every stage that reads
it, directly or not (a train_retriever key: train_retriever and index; not speech, nor the
captioner's stages). Every stage's MLflow run is a child of one pipeline run, in the
pipeline's experiment.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mlflow

from conceptual import storage, tracking
from conceptual.config import Config
from conceptual.pipelines import build_index, curation, features, speech, train_retriever
from conceptual.pipelines.build_index import BuildIndexConfig
from conceptual.pipelines.curation import CurationConfig
from conceptual.pipelines.evaluate_captioner import EvalConfig, evaluate
from conceptual.pipelines.features import FeaturesConfig
from conceptual.pipelines.speech import SpeechConfig
from conceptual.pipelines.train_captioner import TrainConfig, publish, train
from conceptual.pipelines.train_retriever import RetrieverTrainConfig
from conceptual.storage import SUCCESS


@dataclass(frozen=True)
class JobStage:
    """One row of TABLE: what a stage of the pipeline job reads, writes and is configured by,
    and its step (not a curation `stages.Stage`, which is a row of the funnel)."""

    needs: tuple[str, ...]  # the stages whose output it reads (listed before it)
    folder: str | None  # OUTPUT/<folder>, done when its _SUCCESS is there; None: no folder
    settings: tuple[str, ...]  # the PipelineConfig keys its fingerprint covers
    step: Callable[[Context], dict[str, Any]]  # runs it; returns what its manifest records
    reads_clips: bool = False  # needs speech too, when train_retriever.modality is speech


@dataclass(frozen=True)
class Context:
    """What a step gets: the config and the results of the stages before it."""

    config: PipelineConfig
    done: dict[str, dict[str, Any]]

    def folder(self, stage: str) -> str:
        return storage.join(self.config.output, TABLE[stage].folder)

    def section(self, key: str) -> Any:
        """The config section `key`, its runs in the pipeline's experiment."""
        return _in_experiment(getattr(self.config, key), self.config)

    def clips(self) -> str | None:
        """speech's output for a speech retriever; None for a text retriever."""
        return self.folder("speech") if _speech_retriever(self.config) else None


def _curate(c: Context) -> dict[str, Any]:
    stats, run_id = curation.run(c.config.input, c.folder("curate"), c.section("curate"))
    return {"run_id": run_id, "input": stats["input"], "kept": stats["kept"]}


def _features(c: Context) -> dict[str, Any]:
    summary, run_id = features.run(c.folder("curate"), c.folder("features"), c.section("features"))
    return {"run_id": run_id, "rows": summary["rows"]}


def _train(c: Context) -> dict[str, Any]:
    result = train(c.folder("features"), c.section("train"))
    return {k: result[k] for k in ("run_id", "best", "eval_set")}


def _register(c: Context) -> dict[str, Any]:
    return publish(c.done["train"], c.config.train, name=c.config.model_name)


def _evaluate(c: Context) -> dict[str, Any]:
    model = f"runs:/{c.done['train']['run_id']}/model"
    result = evaluate(model, c.folder("features"), c.section("evaluate"))
    return {k: result[k] for k in ("run_id", "scores", "baseline", "eval_set", "images")}


def _speech(c: Context) -> dict[str, Any]:
    stats, run_id = speech.run(c.folder("curate"), c.folder("speech"), c.section("speech"))
    return {"run_id": run_id, "input": stats["input"], "clips": stats["kept"]}


def _train_retriever(c: Context) -> dict[str, Any]:
    """Train, then register by the champion rule, as the train_retriever job does."""
    result = train_retriever.train(c.folder("features"), c.section("train_retriever"), c.clips())
    registered = train_retriever.publish(result, c.config.train_retriever, c.config.retriever_name)
    return {**{k: result[k] for k in ("run_id", "best", "eval_set")}, "registered": registered}


def _index(c: Context) -> dict[str, Any]:
    """The index of the version train_retriever registered, which build_index tags with it."""
    registered = c.done["train_retriever"]["registered"]
    model = f"models:/{registered['name']}/{registered['version']}"
    return build_index.run(
        model, c.folder("features"), c.folder("index"), c.section("index"), c.clips()
    )


# The stages in pipeline order (the module's docstring shows this table):
# name: JobStage(prerequisites, folder under OUTPUT, config keys, step[, reads_clips])
TABLE: dict[str, JobStage] = {
    "curate": JobStage((), "curated", ("curate",), _curate),
    "features": JobStage(("curate",), "features", ("features",), _features),
    "train": JobStage(("features",), None, ("train",), _train),
    "register": JobStage(("train",), None, ("model_name",), _register),
    "evaluate": JobStage(("features", "train"), None, ("evaluate",), _evaluate),
    "speech": JobStage(("curate",), "clips", ("speech",), _speech),
    "train_retriever": JobStage(
        ("features",),
        None,
        ("train_retriever", "retriever_name"),
        _train_retriever,
        reads_clips=True,
    ),
    "index": JobStage(
        ("features", "train_retriever"), "index", ("index",), _index, reads_clips=True
    ),
}
STAGES = tuple(TABLE)
DEFAULT_STAGES = STAGES[:5]  # the captioner's; the retriever's when listed


class PipelineConfig(Config):
    input: str | None = None  # candidates, as for the curate job (required)
    output: str | None = None  # the stages' folders and manifests (required)
    # Stages to run, in STAGES order, each with its prerequisites (the module's table).
    stages: list[str] = list(DEFAULT_STAGES)
    model_name: str = "captioner"  # the registered model `register` adds a version to
    retriever_name: str | None = None  # train_retriever's; None: retriever-<modality>
    experiment: str = "pipeline"  # every stage's run goes here, under the pipeline's run
    curate: CurationConfig = CurationConfig()
    features: FeaturesConfig = FeaturesConfig()
    train: TrainConfig = TrainConfig()
    evaluate: EvalConfig = EvalConfig()
    speech: SpeechConfig = SpeechConfig()
    train_retriever: RetrieverTrainConfig = RetrieverTrainConfig()
    index: BuildIndexConfig = BuildIndexConfig()


def prerequisites(stage: str, config: PipelineConfig) -> tuple[str, ...]:
    """The stages whose output `stage` reads under `config`, in STAGES order."""
    row = TABLE[stage]
    clips = ("speech",) if row.reads_clips and _speech_retriever(config) else ()
    return tuple(s for s in STAGES if s in row.needs + clips)


def check_stages(config: PipelineConfig) -> None:
    """ValueError, saying what is wrong, unless `stages` lists known stages once each, in
    STAGES order, each with its prerequisites."""
    stages = config.stages
    unknown = [s for s in stages if s not in TABLE]
    if unknown:
        raise ValueError(f"unknown stage {', '.join(unknown)}: the stages are {', '.join(STAGES)}")
    ordered = [s for s in STAGES if s in stages]
    if stages != ordered:
        raise ValueError(
            f"stages must be in pipeline order, each once: [{','.join(ordered)}], "
            f"not [{','.join(stages)}]"
        )
    for stage in stages:
        missing = [s for s in prerequisites(stage, config) if s not in stages]
        if missing:
            why = (
                " (train_retriever.modality=speech reads its clips; modality=text does not)"
                if "speech" in missing
                else ""
            )
            raise ValueError(
                f"stage {stage} reads the output of {' and '.join(missing)}{why}: "
                f"add {'it' if len(missing) == 1 else 'them'} to stages=[{','.join(stages)}]"
            )


def fingerprints(config: PipelineConfig, input_fingerprint: str) -> dict[str, str]:
    """Each listed stage's fingerprint: a digest of its config keys and of the fingerprints
    of the stages it reads (of the input, for curate)."""
    out: dict[str, str] = {}
    for stage in config.stages:
        settings = [getattr(config, key) for key in TABLE[stage].settings]
        upstream = [out[s] for s in prerequisites(stage, config)] or [input_fingerprint]
        out[stage] = _digest(stage, *settings, *upstream)
    return out


def run(config: PipelineConfig) -> dict[str, Any]:
    """Run (or skip) each configured stage; returns `run_id` (the pipeline's MLflow run) and
    `stages`: stage -> {"skipped": bool, "result": what the stage reported}."""
    if not config.input or not config.output:
        raise ValueError("the pipeline needs input=URI and output=URI")
    check_stages(config)
    with tracking.start_run(config.experiment, run_name="pipeline", tags={"stage": "pipeline"}):
        pipeline_run = mlflow.active_run().info.run_id
        tracking.log_config(config)
    stages: dict[str, Any] = {}
    done: dict[str, dict[str, Any]] = {}
    context = Context(config, done)
    fingerprint_of = fingerprints(config, input_fingerprint(config.input))
    with tracking.children_of(pipeline_run):
        for stage in config.stages:
            fingerprint = fingerprint_of[stage]
            manifest_uri = storage.join(config.output, "stages", f"{stage}.json")
            folder = TABLE[stage].folder and context.folder(stage)
            manifest = _finished(manifest_uri, fingerprint, folder)
            skipped = manifest is not None
            if manifest is None:
                print(f"pipeline: {stage}", flush=True)
                storage.delete(manifest_uri)
                manifest = {
                    "stage": stage,
                    "fingerprint": fingerprint,
                    "result": TABLE[stage].step(context),
                }
                storage.write_json(manifest_uri, manifest)
            else:
                print(f"pipeline: {stage} skipped: done before with the same inputs and config")
            stages[stage] = {"skipped": skipped, "result": manifest["result"]}
            done[stage] = manifest["result"]
    with mlflow.start_run(run_id=pipeline_run):
        mlflow.log_dict(stages, "stages.json")
    return {"run_id": pipeline_run, "stages": stages}


def input_fingerprint(uri: str) -> str:
    """What the input is, cheaply: every file's path, size and modification time."""
    fs, _ = storage.resolve(uri)
    listing = [
        (info.path, info.size, info.mtime_ns) for info in fs.get_file_info(storage.list_files(uri))
    ]
    return _digest("input", listing)


def _digest(*parts: Any) -> str:
    text = json.dumps(
        [p.model_dump(mode="json") if isinstance(p, Config) else p for p in parts],
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(text.encode()).hexdigest()


def _finished(manifest_uri: str, fingerprint: str, folder: str | None) -> dict | None:
    """The stage's manifest when it finished with this fingerprint (and its folder is still
    complete); None when it must run."""
    if not storage.exists(manifest_uri):
        return None
    manifest = storage.read_json(manifest_uri)
    if manifest.get("fingerprint") != fingerprint:
        return None
    if folder is not None and not storage.exists(storage.join(folder, SUCCESS)):
        return None
    return manifest


def _in_experiment(section: Config, config: PipelineConfig) -> Any:
    return section.model_copy(update={"experiment": config.experiment})


def _speech_retriever(config: PipelineConfig) -> bool:
    return config.train_retriever.modality == "speech"
