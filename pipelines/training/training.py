"""The training core every model of the platform trains through (docs/design.md: one shared core,
a model-specific step): Ray Train wiring, the input path, the step loop, checkpoints, MLflow.

A model family is a `Recipe` (pipelines/families/captioner/train_captioner.py's RECIPE is one): its config, how
a version is named and registered, how it prepares a run from its data (`Prepared`: the
params, what the workers read, the training rows as a Ray Dataset of fixed-shape columns,
each named as the loss module's forward argument that reads it), and its workers' loop,
which builds a `Task` (its model, its loss as a module of models/losses.py, its dev
evaluation and its saved form) and calls `run()`. `train()` and `publish()` are the one
driver of every family.

Driver: `fit()` runs a TorchTrainer (one worker per CPU slot or GPU, synchronous data
parallel: gloo on CPUs, NCCL on GPUs), prints the epochs as they are logged, and logs the
best model by the dev metric, its metrics (`best.*`) and the learning curve to the run.

Workers: `run()` per epoch: the learning rate of the epoch (a function of the epoch, or of
the optimizer step with the exponential schedule, so a resumed run keeps its place), the
batches (pipelines/training/input_path.py: the rows shuffled in windows cut into batches, or kept
from the first epoch and permuted in memory or on the GPU), `train_epoch` (bf16
autocast on GPUs, gradient accumulation, the losses kept on the device until the epoch's
end), then rank 0 evaluates, logs and writes the checkpoint. A restarted worker group
(FailureConfig) resumes from the latest checkpoint. Ray Train learns of a report by
polling the workers (every 2 s): a worker that dies just after reporting may resume from
the checkpoint before, and that epoch then runs, and is logged, twice.

Checkpoint layout: model/ (the task's saved form; its weights in models.saving's
safetensors file), progress.json (epochs done, step, history), optimizer.pt and the task's
evaluation files. The optimizer state is the one torch.save file: it holds tensors and
numbers only and is read back with torch.load(weights_only=True), which refuses anything
else; the model itself is never pickled.

Batch size and learning rate: `lr` is the rate at `lr_batch` examples per optimizer step.
The effective batch is batch_size x grad_accumulation x workers; `lr_scaling=linear`
scales the rate with it (plain SGD, Adagrad), `sqrt` with its square root (Adam, AdamW),
`none` (the default) takes `lr` as given.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal

import mlflow
import ray
import ray.train
import ray.train.torch
import torch
from pydantic import Field
from safetensors.torch import load_file
from torch import Tensor, nn

from conceptual import lineage, registry, storage, tracking
from conceptual.config import Config
from conceptual.models.losses import TOTAL
from conceptual.models.saving import WEIGHTS, Saved
from conceptual.paths import state_dir
from conceptual.pipelines.training.input_path import Batches, DataSettings, trainer_data
from conceptual.pipelines.training.training_metrics import (
    EpochProgress,
    epoch_metrics,
    log_outcome,
    small_eval_warning,
)
from conceptual.runtime import require_shared

MODEL_DIR, PROGRESS, OPTIMIZER = "model", "progress.json", "optimizer.pt"
# Fault injection for the resume test: a worker exits as it reads the second batch of this
# epoch, once (the marker file records that it did). Unset, nothing happens.
FAIL_AT_EPOCH_ENV, FAIL_MARKER_ENV = "CONCEPTUAL_TEST_FAIL_AT_EPOCH", "CONCEPTUAL_TEST_FAIL_MARKER"


class TrainingConfig(Config):
    """The keys every trainer has; a model family's config adds its own."""

    # adam: Adam with L2 weight decay (in the gradient); adamw: decoupled weight decay; sgd:
    # mini-batch SGD with `momentum`
    optimizer: Literal["adagrad", "adam", "adamw", "sgd"] = "adagrad"
    momentum: float = Field(default=0.0, ge=0, lt=1)  # sgd (the fluency paper's captioner's)
    lr: float = 0.01
    # "cosine": each epoch starts at lr * (1 + cos(pi * epoch / epochs)) / 2, so the last
    # epochs take small steps and the best-by-dev checkpoint is a settled model.
    # "exponential": lr * lr_decay ** (step // lr_decay_steps), by optimizer step.
    # "exponential_epochs": lr * lr_decay ** (epoch // lr_decay_epochs) (the fluency paper's
    # x0.999 every ten epochs, whatever the data's size).
    lr_schedule: Literal["constant", "cosine", "exponential", "exponential_epochs"] = "constant"
    lr_decay: float = Field(default=0.999, gt=0, le=1)
    lr_decay_steps: int = Field(default=1000, ge=1)
    lr_decay_epochs: int = Field(default=10, ge=1)
    lr_scaling: Literal["none", "linear", "sqrt"] = "none"  # see the module's docstring
    lr_batch: int = Field(default=25, ge=1)  # the effective batch `lr` is meant for
    weight_decay: float = 0.0
    adam_betas: tuple[float, float] = (0.9, 0.999)  # adam, adamw
    adam_eps: float = 1e-8  # adam, adamw
    batch_size: int = Field(default=25, ge=1)  # per worker
    grad_accumulation: int = Field(default=1, ge=1)  # batches per optimizer step
    epochs: int = 10
    grad_clip: float = 1.0  # max gradient norm; 0 turns clipping off
    workers: int = 1
    # How workers spread over nodes (Ray's placement strategies): STRICT_SPREAD puts each
    # worker on a node of its own, PACK fills one node first.
    placement_strategy: Literal["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"] = "PACK"
    cpus_per_worker: float = 1.0  # below 1 on small machines, or Ray Data gets no CPU
    use_gpu: bool | None = None  # None: when the cluster has GPUs (bf16 autocast there)
    compile: bool | None = None  # torch.compile the step; None: on GPUs
    # torch.compile's mode: "reduce-overhead" replays the step's kernels as CUDA graphs
    # (fewer launches from the host, for steps the launches outlast)
    compile_mode: Literal["default", "reduce-overhead", "max-autotune"] = "default"
    prefetch_batches: int = Field(default=2, ge=0)  # batches read and copied ahead of the step
    data: DataSettings = DataSettings()  # the input path (pipelines/training/input_path.py)
    max_failures: int = 2  # worker group restarts, each resuming from the latest checkpoint
    # Ray Train's checkpoints and results: a path or s3:// URI; None: <state dir>/train, which
    # a cluster of several nodes refuses (runtime.require_shared)
    storage: str | None = None
    keep_checkpoints: bool = False  # after a finished run (resuming needs them until then)
    seed: int = 0
    # The dev set's size under which its scores say little: a warning as the run starts, and
    # the version registered is not made the champion (registry.promote_if_better).
    min_eval_size: int = Field(default=20, ge=0)
    experiment: str


@dataclass
class Task:
    """What a model family brings to the training loop, per worker."""

    model: nn.Module  # what checkpoints hold
    # forward(**batch) -> the batch's named terms, through `model` (models/losses.py: the
    # total under "loss" is backpropagated, each other term logged by its name as the
    # epoch's mean; DDP synchronizes the gradients of what runs in the wrapped forward)
    loss: nn.Module
    # rank 0, after every epoch: the dev metrics and text files for the checkpoint
    evaluate: Callable[[], tuple[dict[str, float], dict[str, str]]]
    save: Callable[[Path], None]  # writes the model's saved form into a directory
    # called with the optimizer step's number before its first batch (a schedule of the
    # loss, such as the retrievers' growing margin); a function of the step, so a resumed
    # run continues where it was
    at_step: Callable[[int], None] | None = None
    # The rows' examples are the same every epoch (no random draws in the read tasks): the
    # input path may keep the first epoch's and shuffle them in memory (data.keep).
    examples_fixed: bool = False


@dataclass
class Prepared:
    """One training run as a recipe prepares it from its data, on the driver."""

    # What the workers read, by the option that names it ({"--features": uri}): resolved()
    # checks that every node of a cluster sees it.
    data: dict[str, str | None]
    params: dict[str, Any]  # logged beside the config
    loop_config: dict[str, Any]  # the workers' (the resolved config is added as "config")
    rows: Callable[[Any], ray.data.Dataset]  # the resolved config -> the training rows
    eval_size: int  # the dev set's (small_eval_warning)
    eval_set: str  # the dev set's name: scores are compared on the same set only
    metrics: dict[str, float] = field(default_factory=dict)  # logged as the run starts
    artifacts: dict[str, Any] = field(default_factory=dict)  # JSON files, as it starts
    # Text files saved beside the best model's weights, by name (a text retriever's caption
    # language model): made once from the data on the driver, not by every checkpoint.
    model_files: dict[str, str] = field(default_factory=dict)
    # In the run, after fit(), given the best checkpoint's directory: what else the run logs
    # from the best model; returns entries for the result and training.json.
    finish: Callable[[Path], dict[str, Any]] = lambda best_dir: {}


@dataclass(frozen=True)
class Recipe:
    """A model family as the platform trains, registers and compares it."""

    job: str  # the job that trains it, its runs' `job` tag: train_captioner
    config: type[TrainingConfig]
    saved: type[Saved]  # the form its models are saved in, and read back as
    select_by: str  # the dev metric that picks the best checkpoint and the champion
    model_name: Callable[[Any], str]  # config -> the registered model it joins by default
    variant: Callable[[Any], str]  # config -> the tag of its runs and versions: rnn-1x1
    # (config, the family's data arguments) -> Prepared; a ValueError for data it refuses
    prepare: Callable[..., Prepared]
    # Ray Train's per-worker loop (importable, so workers find it in the installed package):
    # builds the Task from the loop config and calls run()
    train_loop: Callable[[dict[str, Any]], None]
    # (config, metric) -> whether the result's `best` reports that metric of the best epoch
    reports: Callable[[Any, str], bool]
    # config -> keys that do not apply to it (not logged as the run's params)
    unused_keys: Callable[[Any], tuple[str, ...]] = lambda config: ()


# ---------------------------------------------------------------- the driver


def resolved(config: TrainingConfig, data: Mapping[str, str]) -> TrainingConfig:
    """The config with its defaults decided (GPUs, compilation, storage), as the run logs it.
    `data` names what the workers read (`{"--features": uri}`): like the storage, it must be
    where every node of a cluster sees it."""
    use_gpu = config.use_gpu
    if use_gpu is None:
        use_gpu = ray.cluster_resources().get("GPU", 0) > 0
    storage_uri = config.storage or str(state_dir() / "train")
    require_shared({**data, "storage": storage_uri})
    return config.model_copy(
        update={
            "use_gpu": use_gpu,
            "compile": use_gpu if config.compile is None else config.compile,
            "storage": storage_uri,
        }
    )


def fit(
    train_loop: Callable[[dict[str, Any]], None],
    loop_config: dict[str, Any],
    rows: ray.data.Dataset,
    config: TrainingConfig,
    run_id: str,
    label: str,
    select_by: str,
    eval_size: int | None = None,
    model_files: Mapping[str, str] | None = None,
) -> tuple[Path, dict[str, Any], list[dict[str, Any]]]:
    """Train in the active MLflow run (`run_id`) and log the best model by the dev metric
    `select_by` (higher is better) under model/ and the learning curve. Returns the best
    checkpoint's local directory, its metrics and the history of every epoch. `eval_size`,
    the dev set's, is checked against config.min_eval_size (small_eval_warning); `model_files`
    (name -> text) are saved beside the best model's weights."""
    if eval_size is not None and (
        warning := small_eval_warning(eval_size, config.min_eval_size, select_by)
    ):
        print(warning, flush=True)
    # Workers may have started before this process set its CONCEPTUAL_*/MLFLOW_* variables.
    forwarded = {k: v for k, v in os.environ.items() if k.startswith(("CONCEPTUAL_", "MLFLOW_"))}
    use_gpu = bool(config.use_gpu)
    storage_path, filesystem = config.storage, None
    if storage.is_remote(storage_path):
        filesystem, storage_path = storage.resolve(storage_path)
    trainer = ray.train.torch.TorchTrainer(
        train_loop,
        train_loop_config={
            **loop_config,
            "run_id": run_id,
            "tracking_uri": tracking.tracking_uri(),
        },
        **trainer_data(rows, config.data, config.seed),
        scaling_config=ray.train.ScalingConfig(
            num_workers=config.workers,
            use_gpu=use_gpu,
            placement_strategy=config.placement_strategy,
            resources_per_worker={"CPU": config.cpus_per_worker, **({"GPU": 1} if use_gpu else {})},
        ),
        run_config=ray.train.RunConfig(
            name=trainer_name(config, run_id),
            # the platform's S3 settings (endpoint, credentials), not Ray's guess from AWS
            storage_path=storage_path,
            storage_filesystem=filesystem,
            failure_config=ray.train.FailureConfig(max_failures=config.max_failures),
            checkpoint_config=ray.train.CheckpointConfig(
                num_to_keep=2,  # the best by the dev metric and the latest (to resume from)
                checkpoint_score_attribute=select_by,
                checkpoint_score_order="max",
            ),
            worker_runtime_env={"env_vars": forwarded},
        ),
    )
    with tracking.impatient(), EpochProgress(run_id, config.epochs, label, select_by):
        result = fit_keeping_sigint(trainer)
    best_checkpoint, best = max(result.best_checkpoints, key=lambda c: c[1][select_by])
    best_dir = Path(best_checkpoint.to_directory(str(state_dir() / "models" / run_id)))
    with result.checkpoint.as_directory() as latest:  # its history has every epoch
        progress = json.loads((Path(latest) / PROGRESS).read_text())
    history = progress["history"]
    # What rank 0 could not log while the tracking server was down goes now, once it is up.
    tracking.wait_for_store(str(best_dir / MODEL_DIR))
    if tracking.send_metrics(run_id, progress.get("unlogged", [])):
        raise tracking.TrackingUnreachable(
            f"the tracking server took none of the run's last metrics; the trained model is "
            f"saved at {best_dir / MODEL_DIR}"
        )
    for name, text in (model_files or {}).items():
        (best_dir / MODEL_DIR / name).write_text(text)
    mlflow.log_artifacts(str(best_dir / MODEL_DIR), "model")
    log_outcome(run_id, select_by, best)
    # A finished run resumes nothing: its checkpoints (two models with their optimizer
    # state) and the local copy's optimizer state are only disk, hundreds of MB a run.
    (best_dir / OPTIMIZER).unlink(missing_ok=True)
    if not config.keep_checkpoints:
        storage.delete(storage.join(config.storage, trainer_name(config, run_id)))
    return best_dir, best, history


def train(recipe: Recipe, config: TrainingConfig, *data: Any) -> dict[str, Any]:
    """Train a model of `recipe`'s family on `data` (its prepare's arguments), evaluate every
    epoch and keep the best model by the dev recipe.select_by. Returns the MLflow `run_id`,
    `model_dir` (a local copy of the best model), `best` (its epoch and dev metrics),
    `history` (one entry per epoch: loss and dev metrics), `eval_set` (the name of the dev
    set the scores belong to) and what the recipe's finish adds."""
    prepared = recipe.prepare(config, *data)
    config = resolved(config, prepared.data)
    label = recipe.variant(config)
    tags = {"variant": label}
    with tracking.start_run(config.experiment, job=recipe.job, tags=tags) as active:
        run_id = active.info.run_id
        tracking.log_config(config, skip=recipe.unused_keys(config))
        tracking.log_params(prepared.params)
        read = ["train", getattr(config, "eval_split", "val")]  # for training and validation
        for option, uri in prepared.data.items():
            if uri:
                lineage.log_read(uri, splits=read, part=lineage.OPTION_PARTS.get(option))
        if prepared.metrics:
            mlflow.log_metrics(prepared.metrics)
        for name, content in prepared.artifacts.items():
            mlflow.log_dict(content, name)
        loop_config = {"config": config.model_dump(mode="json"), **prepared.loop_config}
        rows = prepared.rows(config)
        best_dir, best_metrics, history = fit(
            recipe.train_loop,
            loop_config,
            rows,
            config,
            run_id,
            label,
            recipe.select_by,
            prepared.eval_size,
            prepared.model_files,
        )
        more = prepared.finish(best_dir)
        best = {k: v for k, v in best_metrics.items() if recipe.reports(config, k)}
        mlflow.log_dict({"best": best, "history": history, **more}, "training.json")
    return {
        "run_id": run_id,
        "model_dir": str(best_dir / MODEL_DIR),
        "best": best,
        "history": history,
        "eval_set": prepared.eval_set,
        **more,
    }


def publish(
    recipe: Recipe, result: dict[str, Any], config: TrainingConfig, name: str | None = None
) -> dict[str, Any]:
    """Register a train() result's model as a version of `name` (by default the recipe's
    model_name) tagged with its variant, and apply the champion rule on its dev
    recipe.select_by with config.min_eval_size (registry.publish). Returns the decision,
    with the model's `name` and the new `version`."""
    metric = recipe.select_by
    return registry.publish(
        result["run_id"],
        recipe.variant(config),
        result["best"][metric],
        result["eval_set"],
        metric,
        name or recipe.model_name(config),
        config.min_eval_size,
    )


def trainer_name(config: TrainingConfig, run_id: str) -> str:
    """Ray Train's folder for the run under config.storage, its checkpoints in it."""
    return f"{config.experiment}-{run_id}"


def fit_keeping_sigint(trainer: ray.train.torch.TorchTrainer) -> ray.train.Result:
    """`trainer.fit()`, then the SIGINT handler as it was: Ray Train installs its own and
    leaves it, after which one Ctrl-C no longer stops the process (the demo serves on)."""
    handler = signal.getsignal(signal.SIGINT)
    try:
        return trainer.fit()
    finally:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, handler)


# ---------------------------------------------------------------- the workers


def dev_data(ref: ray.ObjectRef, elsewhere: Any = None) -> Any:
    """What a train loop's dev evaluation reads, fetched by rank 0, which evaluates; the other
    workers get `elsewhere`."""
    return ray.get(ref) if ray.train.get_context().get_world_rank() == 0 else elsewhere


def run(task: Task, config: TrainingConfig, loop_config: dict[str, Any]) -> None:
    """The per-worker loop of fit(), for any task (call it from the model's train loop)."""
    rank = ray.train.get_context().get_world_rank()
    device = ray.train.torch.get_device()
    model = task.model.to(device)
    optimizer = make_optimizer(config, model, device)
    progress = resume(model, optimizer, device)
    step_loss = compiled(ray.train.torch.prepare_model(task.loss), config)
    if rank == 0:
        mlflow.set_tracking_uri(loop_config["tracking_uri"])
        os.environ.update(tracking.IMPATIENT)  # a store that is down must not stall training
    shard = ray.train.get_dataset_shard("train")
    feed = Batches(
        config.data,
        config.batch_size,
        device,
        config.seed,
        rank,
        config.prefetch_batches,
        task.examples_fixed,
    )

    for epoch in range(progress["epochs_done"], config.epochs):
        lr = epoch_learning_rate(config, epoch)
        set_learning_rate(optimizer, lr)
        number = epoch + 1  # epochs are counted from 1 wherever people see them
        batches = _failing_once_for_tests(feed.epoch(shard, epoch), number)
        before_step = partial(_before_step, task, config, optimizer, lr)
        terms = train_epoch(
            step_loss, optimizer, batches, config, device, progress["step"], before_step
        )
        # every term at every step, read in one sync an epoch
        steps = dict(zip(terms, torch.stack(list(terms.values())).tolist())) if terms else {}
        losses = steps.get(TOTAL, [])
        first_step = progress["step"]
        progress["step"] += len(losses)
        progress["epochs_done"] = epoch + 1
        if rank != 0:
            ray.train.report({})
            continue
        scores, files = task.evaluate()
        means = {name: sum(values) / len(values) for name, values in steps.items()}
        metrics = {"epoch": number, "loss": means.pop(TOTAL, None), "lr": lr, **scores, **means}
        progress["history"].append(metrics)
        unlogged = progress.get("unlogged", []) + epoch_metrics(first_step, losses, metrics)
        progress["unlogged"] = tracking.send_metrics(loop_config["run_id"], unlogged)
        with tempfile.TemporaryDirectory() as directory:
            write_checkpoint(Path(directory), task, optimizer, progress, files)
            ray.train.report(metrics, checkpoint=ray.train.Checkpoint.from_directory(directory))


def make_optimizer(
    config: TrainingConfig, model: nn.Module, device: torch.device
) -> torch.optim.Optimizer:
    groups, lr, decay = parameter_groups(model), config.lr, config.weight_decay
    if config.optimizer == "adagrad":
        return torch.optim.Adagrad(groups, lr=lr, weight_decay=decay)
    if config.optimizer == "sgd":
        return torch.optim.SGD(groups, lr=lr, momentum=config.momentum, weight_decay=decay)
    adam = torch.optim.Adam if config.optimizer == "adam" else torch.optim.AdamW
    betas, eps = config.adam_betas, config.adam_eps
    fused = device.type == "cuda"  # one kernel for every parameter's update
    return adam(groups, lr=lr, betas=betas, eps=eps, weight_decay=decay, fused=fused)


def parameter_groups(model: nn.Module) -> list[dict[str, Any]]:
    """The optimizer's parameter groups, each with the share of the learning rate it takes
    (`lr_scale`): the model's own when it has `optimizer_groups()` (a pretrained part
    fine-tuned at a lower rate), else one group of every parameter."""
    if hasattr(model, "optimizer_groups"):
        groups = model.optimizer_groups()
    else:
        groups = [{"params": list(model.parameters())}]
    return [{"lr_scale": 1.0, **group} for group in groups]


def compiled(step_loss: nn.Module, config: TrainingConfig) -> nn.Module:
    """The step's module, compiled when the config says so (the first step then compiles)."""
    return torch.compile(step_loss, mode=config.compile_mode) if config.compile else step_loss


def epoch_learning_rate(config: TrainingConfig, epoch: int) -> float:
    """The learning rate of an epoch: a function of the epoch alone, so a resumed run
    continues the schedule without saving any scheduler state."""
    effective_batch = config.batch_size * config.grad_accumulation * config.workers
    exponent = {"none": 0.0, "linear": 1.0, "sqrt": 0.5}[config.lr_scaling]
    lr = config.lr * (effective_batch / config.lr_batch) ** exponent
    if config.lr_schedule == "exponential_epochs":
        return lr * config.lr_decay ** (epoch // config.lr_decay_epochs)
    if config.lr_schedule != "cosine":  # exponential: the epoch's steps decay it further
        return lr
    return lr * (1 + math.cos(math.pi * epoch / config.epochs)) / 2


def set_learning_rate(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr * group.get("lr_scale", 1.0)


def _before_step(
    task: Task,
    config: TrainingConfig,
    optimizer: torch.optim.Optimizer,
    epoch_lr: float,
    step: int,
) -> None:
    """What depends on the optimizer step: the exponential schedule's rate, the task's own."""
    if config.lr_schedule == "exponential":
        set_learning_rate(optimizer, epoch_lr * config.lr_decay ** (step // config.lr_decay_steps))
    if task.at_step is not None:
        task.at_step(step)


def train_epoch(
    step_loss: nn.Module,
    optimizer: torch.optim.Optimizer,
    batches: Iterable[dict[str, Tensor]],
    config: TrainingConfig,
    device: torch.device,
    first_step: int = 0,
    before_step: Callable[[int], None] | None = None,
) -> dict[str, Tensor]:
    """One pass over `batches`, an optimizer step every `grad_accumulation` batches (and
    after the last); `before_step(n)` runs before optimizer step n's first batch (steps
    counted from `first_step`). Returns each of the loss's terms at every optimizer step
    (its mean over the step's batches: (steps,) by name, "loss" the total), still on the
    device: reading a loss waits for the GPU, so the caller reads them all at once."""
    step_loss.train()
    steps: list[dict[str, Tensor]] = []
    pending: list[dict[str, Tensor]] = []
    for batch, last in _marking_the_last(batches):
        if not pending and before_step is not None:
            before_step(first_step + len(steps))
        stepping = last or len(pending) + 1 == config.grad_accumulation
        # bf16 autocast on GPUs only: CPU autocast is slower than float32 for these models.
        with (
            torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"),
            contextlib.nullcontext() if stepping else _no_sync(step_loss),
        ):
            terms = step_loss(**batch)
        (terms[TOTAL] / config.grad_accumulation).backward()
        # copies: a CUDA graph's replay for the next batch reuses the outputs' memory
        pending.append({name: term.detach().clone() for name, term in terms.items()})
        if stepping:
            if config.grad_clip > 0:
                nn.utils.clip_grad_norm_(step_loss.parameters(), config.grad_clip)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            steps.append({name: torch.stack([p[name] for p in pending]).mean() for name in terms})
            pending = []
    return {name: torch.stack([step[name] for step in steps]) for name in steps[0]} if steps else {}


def _no_sync(step_loss: nn.Module) -> contextlib.AbstractContextManager:
    """DDP's gradient synchronization off for a batch whose gradients only accumulate
    (one worker has no DDP wrapper, and nothing to synchronize)."""
    return getattr(step_loss, "no_sync", contextlib.nullcontext)()


def _marking_the_last(batches: Iterable[dict[str, Tensor]]) -> Iterator[tuple[Any, bool]]:
    """(batch, is it the last), reading one batch ahead (the prefetch does so anyway)."""
    iterator = iter(batches)
    current = next(iterator, None)
    while current is not None:
        following = next(iterator, None)
        yield current, following is None
        current = following


def write_checkpoint(
    directory: Path,
    task: Task,
    optimizer: torch.optim.Optimizer,
    progress: dict[str, Any],
    files: dict[str, str],
) -> None:
    task.save(directory / MODEL_DIR)
    torch.save(optimizer.state_dict(), directory / OPTIMIZER)
    (directory / PROGRESS).write_text(json.dumps(progress, indent=2))
    for name, text in files.items():
        (directory / name).write_text(text)


def resume(
    model: nn.Module, optimizer: torch.optim.Optimizer, device: torch.device
) -> dict[str, Any]:
    """Restore the latest checkpoint into the model and optimizer, if there is one, and return
    the progress to continue from (a fresh run starts at epoch 0, step 0)."""
    checkpoint = ray.train.get_checkpoint()
    if checkpoint is None:
        return {"epochs_done": 0, "step": 0, "history": [], "unlogged": []}
    with checkpoint.as_directory() as directory:
        model.load_state_dict(load_file(Path(directory) / MODEL_DIR / WEIGHTS, device=str(device)))
        state = torch.load(Path(directory) / OPTIMIZER, map_location=device, weights_only=True)
        optimizer.load_state_dict(state)
        return json.loads((Path(directory) / PROGRESS).read_text())


def _failing_once_for_tests(batches: Iterable[Any], epoch: int) -> Iterator[Any]:
    """The batches; but the worker process exits as it reads the second one of the epoch
    in $CONCEPTUAL_TEST_FAIL_AT_EPOCH, once: the marker file in $CONCEPTUAL_TEST_FAIL_MARKER
    says it already happened."""
    fail_at, marker = os.environ.get(FAIL_AT_EPOCH_ENV), os.environ.get(FAIL_MARKER_ENV)
    for i, batch in enumerate(batches):
        if i == 1 and fail_at is not None and marker is not None and int(fail_at) == epoch:
            if not Path(marker).exists():
                Path(marker).write_text(f"worker exited during epoch {epoch}\n")
                os._exit(1)
        yield batch
