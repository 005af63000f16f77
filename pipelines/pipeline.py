"""The stages in order, as one resumable job: curate, features, train, register, evaluate.

    INPUT -> OUTPUT/curated/    (curation output)
          -> OUTPUT/features/   (features output)
          -> train              (an MLflow run with the best model)
          -> register           (a registry version; the champion rule decides)
          -> evaluate           (the trained model on the held-out split, beside the baseline)
    OUTPUT/stages/<stage>.json  one manifest per finished stage

A stage is skipped when its manifest says it finished with the same fingerprint: a digest
of its own config section and of what it reads (the input's files, their sizes and times,
for curation; the fingerprint of the stage before it otherwise), and, for stages that write
a folder, when that folder's `_SUCCESS` is still there. A rerun after any failure so
continues where it stopped, and a changed key reruns that stage and everything after it.
Every stage's MLflow run is a child of one pipeline run.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

import mlflow

from conceptual import storage, tracking
from conceptual.config import Config
from conceptual.pipelines import curation, features
from conceptual.pipelines.curation import CurationConfig
from conceptual.pipelines.evaluate_captioner import EvalConfig, evaluate
from conceptual.pipelines.features import FeaturesConfig
from conceptual.pipelines.train_captioner import TrainConfig, publish, train
from conceptual.storage import SUCCESS

STAGES = ("curate", "features", "train", "register", "evaluate")


class PipelineConfig(Config):
    input: str | None = None  # candidates, as for the curate job (required)
    output: str | None = None  # the stages' folders and manifests (required)
    stages: list[str] = list(STAGES)  # a prefix of STAGES: stop early by leaving some out
    model_name: str = "captioner"  # the registered model `register` adds a version to
    experiment: str = "pipeline"  # every stage's run goes here, under the pipeline's run
    curate: CurationConfig = CurationConfig()
    features: FeaturesConfig = FeaturesConfig()
    train: TrainConfig = TrainConfig()
    evaluate: EvalConfig = EvalConfig()


def run(config: PipelineConfig) -> dict[str, Any]:
    """Run (or skip) each configured stage; returns `run_id` (the pipeline's MLflow run) and
    `stages`: stage -> {"skipped": bool, "result": what the stage reported}."""
    if not config.input or not config.output:
        raise ValueError("the pipeline needs input=URI and output=URI")
    if config.stages != list(STAGES[: len(config.stages)]):
        raise ValueError(f"stages must be a prefix of {list(STAGES)}; got {config.stages}")
    curated_uri = storage.join(config.output, "curated")
    features_uri = storage.join(config.output, "features")
    folders = {"curate": curated_uri, "features": features_uri}
    steps: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
        "curate": lambda _: _curate(config.input, curated_uri, config),
        "features": lambda _: _features(curated_uri, features_uri, config),
        "train": lambda _: _train(features_uri, config),
        "register": lambda done: _register(done["train"], config),
        "evaluate": lambda done: _evaluate(done["train"], features_uri, config),
    }
    # What each stage's fingerprint covers besides what it reads.
    settings = {
        "curate": config.curate,
        "features": config.features,
        "train": config.train,
        "register": config.model_name,
        "evaluate": config.evaluate,
    }
    with tracking.start_run(config.experiment, run_name="pipeline", tags={"stage": "pipeline"}):
        pipeline_run = mlflow.active_run().info.run_id
        tracking.log_config(config)
    stages: dict[str, Any] = {}
    done: dict[str, dict[str, Any]] = {}
    upstream = input_fingerprint(config.input)
    with tracking.children_of(pipeline_run):
        for stage in config.stages:
            fingerprint = _digest(stage, settings[stage], upstream)
            manifest_uri = storage.join(config.output, "stages", f"{stage}.json")
            manifest = _finished(manifest_uri, fingerprint, folders.get(stage))
            skipped = manifest is not None
            if manifest is None:
                print(f"pipeline: {stage}", flush=True)
                storage.delete(manifest_uri)
                manifest = {
                    "stage": stage,
                    "fingerprint": fingerprint,
                    "result": steps[stage](done),
                }
                storage.write_json(manifest_uri, manifest)
            else:
                print(f"pipeline: {stage} skipped: done before with the same inputs and config")
            stages[stage] = {"skipped": skipped, "result": manifest["result"]}
            done[stage] = manifest["result"]
            upstream = fingerprint
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


def _curate(input_uri: str, output_uri: str, config: PipelineConfig) -> dict[str, Any]:
    stats, run_id = curation.run(input_uri, output_uri, _in_experiment(config.curate, config))
    return {"run_id": run_id, "input": stats["input"], "kept": stats["kept"]}


def _features(data_uri: str, output_uri: str, config: PipelineConfig) -> dict[str, Any]:
    summary, run_id = features.run(data_uri, output_uri, _in_experiment(config.features, config))
    return {"run_id": run_id, "rows": summary["rows"]}


def _train(features_uri: str, config: PipelineConfig) -> dict[str, Any]:
    result = train(features_uri, _in_experiment(config.train, config))
    return {k: result[k] for k in ("run_id", "best", "eval_set")}


def _register(trained: dict[str, Any], config: PipelineConfig) -> dict[str, Any]:
    return publish(trained, config.train, name=config.model_name)


def _evaluate(trained: dict[str, Any], features_uri: str, config: PipelineConfig) -> dict:
    model = f"runs:/{trained['run_id']}/model"
    result = evaluate(model, features_uri, _in_experiment(config.evaluate, config))
    return {k: result[k] for k in ("run_id", "scores", "baseline", "eval_set", "images")}
