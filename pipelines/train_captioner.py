"""Captioner training on Ray Train (docs/spec/captioning.md, "Training" and "Evaluation"):
synchronous data-parallel workers over precomputed CNN features, one MLflow run, the
checkpoint with the best dev CIDEr as the run's model.

    FEATURES/features/*.parquet (records.FEATURES)  ->  MLflow run (params, loss per step,
                                                        dev metrics per epoch, learning
                                                        curve, the best model under model/)

The driver builds the vocabulary from the train captions and collects the dev images (small);
each worker trains on its shard of the train rows (every crop is a training example); rank 0
decodes the dev images with beam search after every epoch, scores them against all their
reference captions, logs to MLflow and writes the checkpoint. A restarted worker group
(FailureConfig) resumes from the latest checkpoint, epoch counter included. Ray Train learns
of a report by polling the workers (every 2 s): a worker that dies just after reporting may
resume from the checkpoint before, and that epoch then runs, and is logged, twice.

Checkpoint layout: model/ (models.saving: safetensors + JSON), progress.json (epochs done,
step, history), captions.json (the dev captions scored) and optimizer.pt. The optimizer state is the one torch.save file: it holds
tensors and numbers only and is read back with torch.load(weights_only=True), which refuses
anything else; the model itself is never pickled.
"""

from __future__ import annotations

import json
import math
import os
import signal
import tempfile
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Literal

import mlflow
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import ray
import ray.train
import ray.train.torch
import torch
from matplotlib.figure import Figure
from mlflow.entities import Metric
from pydantic import Field, field_validator
from safetensors.torch import load_file
from torch import nn

from conceptual import registry, storage, tracking
from conceptual.config import Config
from conceptual.metrics import CAPTION_METRICS, caption_scores
from conceptual.models.captioner import Captioner, CaptionerConfig, features_tensor, tokens_tensor
from conceptual.models.saving import WEIGHTS, save_model
from conceptual.models.vocab import Vocabulary
from conceptual.paths import state_dir
from conceptual.pipelines.caption_features import (
    TRAIN_SPLIT,
    eval_set_name,
    feature_files,
    split_images,
    train_captions,
)
from conceptual.pipelines.evaluate_captioner import EVAL_METRICS, caption_images, log_samples
from conceptual.pipelines.readers import READ_CPUS, read_row_groups, read_tasks
from conceptual.runtime import init_ray

MODEL_DIR, PROGRESS, OPTIMIZER = "model", "progress.json", "optimizer.pt"
CAPTIONS = "captions.json"
# Fault injection for the resume test: a worker exits after its first step of this epoch,
# once (the marker file records that it did). Unset, nothing happens.
FAIL_AT_EPOCH_ENV, FAIL_MARKER_ENV = "CONCEPTUAL_TEST_FAIL_AT_EPOCH", "CONCEPTUAL_TEST_FAIL_MARKER"


class TrainConfig(Config):
    architecture: Literal["rnn", "transformer"] = "transformer"
    features: Literal["1x1", "8x8"] = "8x8"
    d_model: int = 512
    layers: int = 6
    heads: int = 8
    ffn: int = 2048
    dropout: float = 0.1
    min_count: int = 4  # vocabulary: words seen at least this often in the train captions
    max_tokens: int = 15  # training captions are cut to this many words
    optimizer: Literal["adagrad", "adamw"] = "adagrad"
    lr: float = 0.01
    # "cosine": each epoch starts at lr * (1 + cos(pi * epoch / epochs)) / 2, so the last
    # epochs take small steps and the best-by-dev checkpoint is a settled model.
    lr_schedule: Literal["constant", "cosine"] = "constant"
    weight_decay: float = 0.0
    label_smoothing: float = Field(default=0.0, ge=0.0, lt=1.0)
    batch_size: int = 25  # per worker
    epochs: int = 10
    grad_clip: float = 1.0  # max gradient norm; 0 turns clipping off
    workers: int = 1
    cpus_per_worker: float = 1.0  # below 1 on small machines, or Ray Data gets no CPU
    use_gpu: bool | None = None  # None: when the cluster has GPUs (bf16 autocast there)
    beam: int = 4
    eval_split: str = "val"
    eval_max_images: int | None = None  # None: every dev image
    # Scored every epoch; METEOR starts Java (seconds per call) and is skipped without it.
    eval_metrics: list[str] = EVAL_METRICS
    samples: int = 12  # dev photos shown with their generated captions in samples.png
    max_failures: int = 2  # worker group restarts, each resuming from the latest checkpoint
    storage: str | None = None  # Ray Train storage_path; None: <state dir>/train
    seed: int = 0
    experiment: str = "captioning"

    @field_validator("eval_metrics")
    @classmethod
    def _scores_cider(cls, metrics: list[str]) -> list[str]:
        unknown = set(metrics) - set(CAPTION_METRICS)
        if unknown or "CIDEr" not in metrics:
            raise ValueError(
                f"must include CIDEr (it selects the best checkpoint) and only {CAPTION_METRICS}"
            )
        return metrics


# ---------------------------------------------------------------- the driver


def train(
    features_uri: str, config: TrainConfig, tags: dict[str, str] | None = None
) -> dict[str, Any]:
    """Train, evaluate every epoch and keep the best model by dev CIDEr. Returns the MLflow
    `run_id`, `model_dir` (a local copy of the best model), `best` (its epoch and dev
    metrics), `history` (one entry per epoch: loss and dev metrics) and `eval_set` (the
    name of the dev set the scores belong to). `tags` go on the run."""
    init_ray()
    files = feature_files(features_uri)
    vocab = Vocabulary.build(train_captions(files, features_uri), min_count=config.min_count)
    eval_set = split_images(files, features_uri, config.eval_split, config.eval_max_images)
    model_config = captioner_config(config, len(vocab), eval_set["feature_dim"])
    config = resolved(config)

    run_tags = {"stage": "train_captioner", "variant": variant(config), **(tags or {})}
    with tracking.start_run(config.experiment, tags=run_tags) as active:
        run_id = active.info.run_id
        tracking.log_config(config, skip=unused_keys(config))
        mlflow.log_params(
            {
                "features_uri": features_uri,
                "vocab_size": len(vocab),
                "eval_images": len(eval_set["keys"]),
            }
        )
        loop_config = {
            "config": config.model_dump(mode="json"),
            "model": asdict(model_config),
            "vocab": vocab.to_json(),
            "eval_set": ray.put(eval_set),  # rank 0 fetches it; the driver keeps it alive
            "run_id": run_id,
            "tracking_uri": tracking.tracking_uri(),
        }
        trainer = make_trainer(features_uri, files, config, loop_config, run_id)
        with EpochProgress(run_id, config.epochs, variant(config)):
            result = fit_keeping_sigint(trainer)
        best_checkpoint, best_metrics = max(result.best_checkpoints, key=lambda c: c[1]["CIDEr"])
        best_dir = Path(best_checkpoint.to_directory(str(state_dir() / "models" / run_id)))
        model_dir = best_dir / MODEL_DIR
        with result.checkpoint.as_directory() as latest:  # its history has every epoch
            history = json.loads((Path(latest) / PROGRESS).read_text())["history"]
        mlflow.log_artifacts(str(model_dir), "model")
        mlflow.log_figure(learning_curve(run_id), "learning_curve.png")
        generated = json.loads((best_dir / CAPTIONS).read_text())
        log_samples(eval_set, generated, features_uri, config.samples)
        best = {
            k: v for k, v in best_metrics.items() if k in ("epoch", "loss", *config.eval_metrics)
        }
        mlflow.log_dict({"best": best, "history": history}, "training.json")
    return {
        "run_id": run_id,
        "model_dir": str(model_dir),
        "best": best,
        "history": history,
        "eval_set": eval_set_name(features_uri, config.eval_split, eval_set),
    }


def publish(result: dict[str, Any], config: TrainConfig, name: str = registry.MODEL_NAME) -> dict:
    """Register a train() result's model as a version of `name` tagged with its variant, and
    move `champion` to it if it beats the champion on the same dev set (the decision is
    logged to the training run). Returns the decision, with the new `version`."""
    with mlflow.start_run(run_id=result["run_id"]):
        version = registry.register(result["run_id"], tags={"variant": variant(config)}, name=name)
        decision = registry.promote_if_better(
            version, result["best"]["CIDEr"], result["eval_set"], name=name
        )
    return {**decision, "version": version.version}


def unused_keys(config: TrainConfig) -> tuple[str, ...]:
    """Keys that do not apply to the configured architecture (not logged as its params)."""
    return ("heads", "ffn") if config.architecture == "rnn" else ()


def fit_keeping_sigint(trainer: ray.train.torch.TorchTrainer) -> ray.train.Result:
    """`trainer.fit()`, then the SIGINT handler as it was: Ray Train installs its own and
    leaves it, after which one Ctrl-C no longer stops the process (the demo serves on)."""
    handler = signal.getsignal(signal.SIGINT)
    try:
        return trainer.fit()
    finally:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, handler)


class EpochProgress(threading.Thread):
    """Prints `epoch 3/8  loss 0.58  dev CIDEr 0.27` as rank 0 logs each epoch to MLflow
    (the driver is blocked in fit() meanwhile; the run's metrics are what it can see)."""

    def __init__(self, run_id: str, epochs: int, label: str, every_s: float = 2.0):
        super().__init__(daemon=True, name="epoch-progress")
        self.run_id, self.epochs, self.label, self.every_s = run_id, epochs, label, every_s
        self.stopped = threading.Event()
        self.printed = -1

    def __enter__(self) -> EpochProgress:
        print(f"training {self.label}: {self.epochs} epochs", flush=True)
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.join()

    def run(self) -> None:
        client = mlflow.MlflowClient()
        while True:
            final = self.stopped.wait(self.every_s)
            history = client.get_run(self.run_id).data.metrics  # latest values
            epoch = int(history.get("epoch", -1))
            if epoch > self.printed:
                self.printed = epoch
                print(
                    f"  epoch {epoch + 1}/{self.epochs}  loss {history.get('epoch_loss', float('nan')):.3f}"
                    f"  dev CIDEr {history.get('CIDEr', float('nan')):.3f}",
                    flush=True,
                )
            if final:
                return


def variant(config: TrainConfig) -> str:
    """The model family and its features, as registered versions are tagged: rnn-1x1 etc."""
    return f"{config.architecture}-{config.features}"


def resolved(config: TrainConfig) -> TrainConfig:
    """The config with its defaults decided (GPUs, storage), as the run logs it."""
    use_gpu = config.use_gpu
    if use_gpu is None:
        use_gpu = ray.cluster_resources().get("GPU", 0) > 0
    storage_path = config.storage or str(state_dir() / "train")
    return config.model_copy(update={"use_gpu": use_gpu, "storage": storage_path})


def captioner_config(config: TrainConfig, vocab_size: int, feature_dim: int) -> CaptionerConfig:
    return CaptionerConfig(
        architecture=config.architecture,
        features=config.features,
        vocab_size=vocab_size,
        feature_dim=feature_dim,
        d_model=config.d_model,
        layers=config.layers,
        heads=config.heads,
        ffn=config.ffn,
        dropout=config.dropout,
        max_tokens=config.max_tokens + 2,  # with <bos> and <eos>
    )


def train_dataset(uri: str, files: list[str]) -> ray.data.Dataset:
    fs, _ = storage.resolve(uri)
    rows = read_row_groups(fs, files, columns=["split", "caption", "pooled", "grid"])
    return rows.map_batches(
        _train_rows, batch_format="pyarrow", num_cpus=READ_CPUS, compute=read_tasks()
    )


def _train_rows(batch: pa.Table) -> pa.Table:
    return batch.filter(pc.field("split") == TRAIN_SPLIT).drop_columns(["split"])


def make_trainer(
    uri: str,
    files: list[str],
    config: TrainConfig,
    loop_config: dict[str, Any],
    run_id: str,
) -> ray.train.torch.TorchTrainer:
    use_gpu = bool(config.use_gpu)
    # Workers may have started before this process set its CONCEPTUAL_*/MLFLOW_* variables.
    forwarded = {k: v for k, v in os.environ.items() if k.startswith(("CONCEPTUAL_", "MLFLOW_"))}
    return ray.train.torch.TorchTrainer(
        train_loop,
        train_loop_config=loop_config,
        datasets={"train": train_dataset(uri, files)},
        scaling_config=ray.train.ScalingConfig(
            num_workers=config.workers,
            use_gpu=use_gpu,
            resources_per_worker={"CPU": config.cpus_per_worker, **({"GPU": 1} if use_gpu else {})},
        ),
        run_config=ray.train.RunConfig(
            name=f"{config.experiment}-{run_id}",
            storage_path=config.storage,
            failure_config=ray.train.FailureConfig(max_failures=config.max_failures),
            checkpoint_config=ray.train.CheckpointConfig(
                num_to_keep=2,  # the best by CIDEr and the latest (to resume from) survive
                checkpoint_score_attribute="CIDEr",
                checkpoint_score_order="max",
            ),
            worker_runtime_env={"env_vars": forwarded},
        ),
    )


def learning_curve(run_id: str) -> Figure:
    """Training loss per step and dev CIDEr per epoch, from the run's logged metrics."""
    client = mlflow.MlflowClient()
    loss = client.get_metric_history(run_id, "loss")
    cider = client.get_metric_history(run_id, "CIDEr")
    figure = Figure(figsize=(10, 4))  # no pyplot: no GUI backend, no global figure state
    left, right = figure.subplots(1, 2)
    left.plot([m.step for m in loss], [m.value for m in loss])
    left.set(xlabel="step", ylabel="training loss (rank 0)", title="loss")
    right.plot([m.step for m in cider], [m.value for m in cider], marker="o")
    right.set(xlabel="epoch", ylabel="CIDEr", title="dev CIDEr")
    figure.tight_layout()
    return figure


# ---------------------------------------------------------------- the workers


class CaptionLoss(nn.Module):
    """The captioner's loss as a forward pass: DDP synchronizes the gradients of what runs
    through the wrapped module's forward, and Captioner.loss is a method beside it."""

    def __init__(self, captioner: Captioner, label_smoothing: float = 0.0):
        super().__init__()
        self.captioner = captioner
        self.label_smoothing = label_smoothing

    def forward(self, features: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        return self.captioner.loss(features, tokens, self.label_smoothing)


def train_loop(loop_config: dict[str, Any]) -> None:
    """Ray Train's per-worker loop (importable, so workers find it in the installed package)."""
    config = TrainConfig.model_validate(loop_config["config"])
    vocab = Vocabulary.from_json(loop_config["vocab"])
    rank = ray.train.get_context().get_world_rank()
    device = ray.train.torch.get_device()
    torch.manual_seed(config.seed)

    captioner = Captioner(CaptionerConfig(**loop_config["model"])).to(device)
    optimizer = make_optimizer(config, captioner)
    progress = resume(captioner, optimizer, device)
    step_loss = ray.train.torch.prepare_model(CaptionLoss(captioner, config.label_smoothing))
    eval_set = ray.get(loop_config["eval_set"]) if rank == 0 else None
    if rank == 0:
        mlflow.set_tracking_uri(loop_config["tracking_uri"])
    shard = ray.train.get_dataset_shard("train")

    for epoch in range(progress["epochs_done"], config.epochs):
        lr = epoch_learning_rate(config, epoch)
        set_learning_rate(optimizer, lr)
        step_loss.train()
        losses = []
        for batch in shard.iter_batches(
            batch_size=config.batch_size,
            batch_format="numpy",
            local_shuffle_buffer_size=config.batch_size * 8,
            local_shuffle_seed=config.seed + epoch,
        ):
            losses.append(train_step(step_loss, optimizer, batch, vocab, config, device))
            fail_once_for_tests(epoch)
        first_step = progress["step"]
        progress["step"] += len(losses)
        progress["epochs_done"] = epoch + 1
        if rank != 0:
            ray.train.report({})
            continue
        generated = caption_images(captioner, vocab, eval_set, config.beam, device)
        scores = dev_scores(generated, eval_set, config.eval_metrics)
        loss = float(np.mean(losses)) if losses else None
        metrics = {"epoch": epoch, "loss": loss, "lr": lr, **scores}
        progress["history"].append(metrics)
        log_epoch(loop_config["run_id"], first_step, losses, metrics)
        with tempfile.TemporaryDirectory() as directory:
            write_checkpoint(directory, captioner, vocab, optimizer, progress)
            (Path(directory) / CAPTIONS).write_text(json.dumps(generated, indent=1))
            ray.train.report(metrics, checkpoint=ray.train.Checkpoint.from_directory(directory))


def make_optimizer(config: TrainConfig, model: nn.Module) -> torch.optim.Optimizer:
    if config.optimizer == "adagrad":
        return torch.optim.Adagrad(
            model.parameters(), lr=config.lr, weight_decay=config.weight_decay
        )
    return torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)


def epoch_learning_rate(config: TrainConfig, epoch: int) -> float:
    """The learning rate of an epoch: a function of the epoch alone, so a resumed run
    continues the schedule without saving any scheduler state."""
    if config.lr_schedule == "constant":
        return config.lr
    return config.lr * (1 + math.cos(math.pi * epoch / config.epochs)) / 2


def set_learning_rate(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr


def train_step(
    step_loss: nn.Module,
    optimizer: torch.optim.Optimizer,
    batch: dict[str, np.ndarray],
    vocab: Vocabulary,
    config: TrainConfig,
    device: torch.device,
) -> float:
    features = features_tensor(batch["pooled"], batch["grid"], config.features).to(device)
    encoded = [vocab.encode(caption, config.max_tokens) for caption in batch["caption"]]
    tokens = tokens_tensor(encoded).to(device)
    # bf16 autocast on GPUs only: CPU autocast is slower than float32 for these models.
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
        loss = step_loss(features, tokens)
    optimizer.zero_grad()
    loss.backward()
    if config.grad_clip > 0:
        nn.utils.clip_grad_norm_(step_loss.parameters(), config.grad_clip)
    optimizer.step()
    return loss.item()


def dev_scores(
    generated: dict[str, str], eval_set: dict[str, Any], metrics: list[str]
) -> dict[str, float]:
    """The dev captions scored against all their references; the metrics that cannot run
    here (METEOR without Java) are left out. CIDEr always counts: it picks the best epoch."""
    scores = caption_scores(generated, eval_set["references"], metrics=metrics)
    return {m: scores[m] for m in metrics if scores[m] is not None}


def log_epoch(run_id: str, first_step: int, losses: list[float], metrics: dict[str, Any]) -> None:
    """Rank 0's loss at every step of the epoch and the epoch's dev metrics, in one call."""
    now = int(time.time() * 1000)
    entries = [Metric("loss", v, now, first_step + i) for i, v in enumerate(losses)]
    entries += [
        Metric(name, value, now, metrics["epoch"])
        for name, value in metrics.items()
        if name != "loss" and value is not None
    ]
    if metrics["loss"] is not None:  # the epoch's mean, beside the per-step `loss`
        entries.append(Metric("epoch_loss", metrics["loss"], now, metrics["epoch"]))
    mlflow.MlflowClient().log_batch(run_id, metrics=entries)


def write_checkpoint(
    directory: str,
    captioner: Captioner,
    vocab: Vocabulary,
    optimizer: torch.optim.Optimizer,
    progress: dict[str, Any],
) -> None:
    save_model(captioner, vocab, Path(directory) / MODEL_DIR)
    torch.save(optimizer.state_dict(), Path(directory) / OPTIMIZER)
    (Path(directory) / PROGRESS).write_text(json.dumps(progress, indent=2))


def resume(
    captioner: Captioner, optimizer: torch.optim.Optimizer, device: torch.device
) -> dict[str, Any]:
    """Restore the latest checkpoint into the model and optimizer, if there is one, and return
    the progress to continue from (a fresh run starts at epoch 0, step 0)."""
    checkpoint = ray.train.get_checkpoint()
    if checkpoint is None:
        return {"epochs_done": 0, "step": 0, "history": []}
    with checkpoint.as_directory() as directory:
        weights = load_file(Path(directory) / MODEL_DIR / WEIGHTS, device=str(device))
        captioner.load_state_dict(weights)
        state = torch.load(Path(directory) / OPTIMIZER, map_location=device, weights_only=True)
        optimizer.load_state_dict(state)
        return json.loads((Path(directory) / PROGRESS).read_text())


def fail_once_for_tests(epoch: int) -> None:
    """Exit the worker process during the epoch in $CONCEPTUAL_TEST_FAIL_AT_EPOCH, once: the
    marker file in $CONCEPTUAL_TEST_FAIL_MARKER says it already happened."""
    fail_at, marker = os.environ.get(FAIL_AT_EPOCH_ENV), os.environ.get(FAIL_MARKER_ENV)
    if fail_at is None or marker is None or int(fail_at) != epoch or Path(marker).exists():
        return
    Path(marker).write_text(f"worker exited during epoch {epoch}\n")
    os._exit(1)
