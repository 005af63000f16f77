"""The training core's step loop and schedule (pipelines/training/training.py), and the captioner's
examples as the input path hands them to it; no Ray cluster."""

import math

import numpy as np
import pyarrow as pa
import pytest
import torch
from torch import nn

from conceptual.models.captioner import features_tensor
from conceptual.models.vocab import PAD, Vocabulary
from conceptual.pipelines.families.captioner.train_captioner import CaptionerTrainConfig, _examples
from conceptual.pipelines.training import training, training_metrics
from conceptual.records import FEATURES


class SquaredError(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.linear = nn.Linear(3, 1)

    def forward(self, x, y):
        return {"loss": ((self.linear(x).squeeze(1) - y) ** 2).mean()}


def batches(count, size=4):
    generator = torch.Generator().manual_seed(1)
    return [
        {
            "x": torch.randn(size, 3, generator=generator),
            "y": torch.randn(size, generator=generator),
        }
        for _ in range(count)
    ]


def config(**changes):
    return CaptionerTrainConfig(**{"optimizer": "adamw", "lr": 0.1, "grad_clip": 0, **changes})


def epoch_losses_by_term(model, data, **changes):
    """One epoch of `model` over `data` with the config's `changes`: each term at every step."""
    optimizer = training.make_optimizer(config(), model, torch.device("cpu"))
    return training.train_epoch(model, optimizer, data, config(**changes), torch.device("cpu"))


def epoch_losses(model, data, **changes):
    """Each step's total loss."""
    return epoch_losses_by_term(model, data, **changes)["loss"]


def test_accumulating_two_batches_steps_as_one_batch_of_both():
    data = batches(4)
    accumulated = SquaredError()
    losses = epoch_losses(accumulated, data, grad_accumulation=2)
    whole = SquaredError()
    pairs = [{k: torch.cat([a[k], b[k]]) for k in a} for a, b in zip(data[::2], data[1::2])]
    expected = epoch_losses(whole, pairs)
    assert losses.shape == (2,)
    torch.testing.assert_close(losses, expected)
    for got, want in zip(accumulated.parameters(), whole.parameters()):
        torch.testing.assert_close(got, want)


class IntoBuffer(torch.autograd.Function):
    """The loss written into `out`, which is returned: the same memory every call."""

    @staticmethod
    def forward(ctx, loss, out):
        return out.copy_(loss)

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class OneOutputBuffer(SquaredError):
    """Returns its loss in the same memory every call, as a CUDA graph's replay does
    (compile_mode=reduce-overhead)."""

    def __init__(self):
        super().__init__()
        self.out = torch.zeros(())

    def forward(self, x, y):
        return {"loss": IntoBuffer.apply(super().forward(x, y)["loss"], self.out)}


def test_accumulated_losses_survive_a_step_that_reuses_its_output():
    data = batches(4)
    losses = epoch_losses(OneOutputBuffer(), data, grad_accumulation=2)
    expected = epoch_losses(SquaredError(), data, grad_accumulation=2)
    torch.testing.assert_close(losses, expected)


class TwoTerms(SquaredError):
    """A total and a part of it by its own name, as a loss with a teacher returns them."""

    def forward(self, x, y):
        part = self.linear(x).abs().mean()
        return {"loss": super().forward(x, y)["loss"] + 0.5 * part, "part_loss": part}


def test_every_term_comes_back_as_its_mean_over_each_steps_batches():
    data = batches(3)
    terms = epoch_losses_by_term(TwoTerms(), data, grad_accumulation=2)
    assert set(terms) == {"loss", "part_loss"} and terms["part_loss"].shape == (2,)
    model = TwoTerms()  # the same start: its first step sees the same weights
    first = [model(**batch)["part_loss"] for batch in data[:2]]
    torch.testing.assert_close(terms["part_loss"][0], torch.stack(first).mean().detach())


def test_a_term_is_logged_by_its_name_once_an_epoch():
    metrics = {"epoch": 2, "loss": 0.5, "lr": 0.1, "distill_loss": 0.25}
    entries = training_metrics.epoch_metrics(10, [0.6, 0.4], metrics)
    assert [(key, value, step) for key, value, _, step in entries] == [
        ("loss", 0.6, 10),
        ("loss", 0.4, 11),
        ("epoch", 2, 2),
        ("lr", 0.1, 2),
        ("distill_loss", 0.25, 2),
        ("epoch_loss", 0.5, 2),
    ]


def test_an_epoch_ends_with_a_step_over_the_batches_left():
    model = SquaredError()
    optimizer = training.make_optimizer(config(), model, torch.device("cpu"))
    losses = training.train_epoch(
        model, optimizer, batches(5), config(grad_accumulation=2), torch.device("cpu")
    )
    assert len(losses["loss"]) == 3


@pytest.mark.parametrize("scaling, factor", [("none", 1.0), ("linear", 4.0), ("sqrt", 2.0)])
def test_the_learning_rate_scales_with_the_effective_batch(scaling, factor):
    settings = {"lr": 0.01, "lr_batch": 25, "lr_scaling": scaling, "epochs": 4}
    scaled = config(**settings, batch_size=50, grad_accumulation=2)
    assert training.epoch_learning_rate(scaled, 0) == pytest.approx(0.01 * factor)
    cosine = scaled.model_copy(update={"lr_schedule": "cosine"})
    halfway = 0.01 * factor * (1 + math.cos(math.pi / 2)) / 2
    assert training.epoch_learning_rate(cosine, 2) == pytest.approx(halfway)


def test_the_exponential_schedule_and_the_task_follow_the_optimizer_step():
    """Before each optimizer step (not each batch), the rate decays by step and the task's
    at_step sees the step's number, counted on from where the epoch starts."""
    model = SquaredError()
    settings = config(
        optimizer="adam",
        lr_schedule="exponential",
        lr_decay=0.5,
        lr_decay_steps=2,
        grad_accumulation=2,
    )
    optimizer = training.make_optimizer(settings, model, torch.device("cpu"))
    seen = []

    def at_step(step):
        seen.append((step, optimizer.param_groups[0]["lr"]))

    task = training.Task(model, model, evaluate=None, save=None, at_step=at_step)
    lr = training.epoch_learning_rate(settings, 0)
    assert lr == 0.1  # the epoch's rate is the base rate; the steps decay it
    before_step = lambda step: training._before_step(task, settings, optimizer, lr, step)  # noqa: E731
    losses = training.train_epoch(
        model, optimizer, batches(8), settings, torch.device("cpu"), 3, before_step
    )
    assert len(losses["loss"]) == 4
    assert seen == [(3, 0.05), (4, 0.025), (5, 0.025), (6, 0.0125)]


def test_examples_are_the_train_rows_features_and_padded_tokens():
    rng = np.random.default_rng(0)
    grids = rng.normal(size=(3, 8, 8, 5)).astype(np.float32)
    rows = pa.Table.from_pylist(
        [
            {
                "split": split,
                "caption": caption,
                "pooled": grid.mean(axis=(0, 1)),
                "grid": grid.ravel(),
            }
            for split, caption, grid in zip(
                ["train", "val", "train"], ["a dog", "a cat", "a dog on the grass"], grids
            )
        ],
        schema=pa.schema([FEATURES.field(n) for n in ("split", "caption", "pooled", "grid")]),
    )
    vocab = Vocabulary.build(["a dog on the grass"], min_count=1)
    model = CaptionerTrainConfig().model.model_copy(update={"max_tokens": 5})
    examples = _examples(rows, vocab, model, (64, 5), np.float16)

    train = [0, 2]
    expected = features_tensor(
        [grids[i].mean(axis=(0, 1)) for i in train], [grids[i].ravel() for i in train], "8x8"
    )
    assert examples["features"].dtype == np.float16
    np.testing.assert_array_equal(examples["features"], expected.numpy().astype(np.float16))
    assert examples["tokens"].tolist() == [
        vocab.encode("a dog") + [PAD],
        vocab.encode("a dog on the grass", 3) + [PAD],  # cut: no <eos>
    ]


def test_a_models_parameter_groups_take_their_share_of_the_learning_rate():
    """A model with optimizer_groups() (a pretrained part at a lower rate) keeps each
    group's share whenever the core sets the learning rate; others get one group."""

    class TwoParts(nn.Module):
        def __init__(self):
            super().__init__()
            self.pretrained, self.head = nn.Linear(2, 2), nn.Linear(2, 1)

        def optimizer_groups(self):
            return [
                {"params": list(self.head.parameters())},
                {"params": list(self.pretrained.parameters()), "lr_scale": 0.1},
            ]

    config = training.TrainingConfig(optimizer="adam", lr=0.01, experiment="test")
    optimizer = training.make_optimizer(config, TwoParts(), torch.device("cpu"))
    training.set_learning_rate(optimizer, 0.02)
    assert [group["lr"] for group in optimizer.param_groups] == [0.02, pytest.approx(0.002)]
    single = training.make_optimizer(config, nn.Linear(2, 1), torch.device("cpu"))
    training.set_learning_rate(single, 0.02)
    assert [group["lr"] for group in single.param_groups] == [0.02]


def test_the_progress_lines_name_every_epoch_even_between_two_looks(platform_home, capsys):
    """Epochs faster than its polling were skipped (`epoch 2/4`, `epoch 4/4`): it prints
    each one from the run's metric histories."""
    import mlflow

    from conceptual.tracking import send_metrics, start_run

    with start_run("progress-test") as run:
        run_id = run.info.run_id
    with training_metrics.EpochProgress(run_id, 4, "rnn-1x1", "CIDEr", every_s=3600):
        for epoch in range(1, 5):  # all four before its first (and only, at exit) look
            metrics = {"epoch": epoch, "loss": 1.0 / epoch, "CIDEr": epoch / 10}
            assert not send_metrics(
                run_id, training_metrics.epoch_metrics(epoch * 10, [1.0], metrics)
            )
    lines = [line.strip() for line in capsys.readouterr().out.splitlines()]
    assert lines == [
        "training rnn-1x1: 4 epochs",
        "epoch 1/4  loss 1.000  dev CIDEr 0.100",
        "epoch 2/4  loss 0.500  dev CIDEr 0.200",
        "epoch 3/4  loss 0.333  dev CIDEr 0.300",
        "epoch 4/4  loss 0.250  dev CIDEr 0.400",
    ]
    assert mlflow.get_run(run_id).data.metrics["epoch"] == 4


def test_runs_sort_by_the_registered_checkpoints_score_beside_each_epochs(platform_home):
    """MLflow shows a metric's last value: a run whose best epoch is not its last showed the
    last (CIDEr 7.027) and not the model registered (7.306). `best.<key>` is the best epoch's,
    the per-epoch curve stays under the plain key."""
    import mlflow

    from conceptual.tracking import send_metrics, start_run

    def trained(curve: list[float]) -> str:
        with start_run("best-test") as run:
            for epoch, cider in enumerate(curve, 1):
                metrics = {"epoch": epoch, "loss": 1.0 / epoch, "CIDEr": cider, "R@10": cider}
                send_metrics(run.info.run_id, training_metrics.epoch_metrics(epoch, [1.0], metrics))
            best = max(range(len(curve)), key=curve.__getitem__)
            scores = {"CIDEr": curve[best], "R@10": curve[best], "lr": None}
            training_metrics.log_outcome(run.info.run_id, "CIDEr", {"epoch": best + 1, **scores})
        return run.info.run_id

    peaked, steady = trained([0.2, 0.5, 0.4]), trained([0.3, 0.45])
    logged = mlflow.get_run(peaked).data.metrics
    assert logged["best.CIDEr"] == 0.5 and logged["best.epoch"] == 2 and logged["CIDEr"] == 0.4
    assert logged["best.R_10"] == 0.5 and "best.lr" not in logged
    history = mlflow.MlflowClient().get_metric_history(peaked, "CIDEr")
    assert [(m.step, m.value) for m in history] == [(1, 0.2), (2, 0.5), (3, 0.4)]
    by_best = mlflow.search_runs(
        experiment_names=["best-test"], order_by=["metrics.`best.CIDEr` DESC"]
    )
    assert list(by_best["run_id"]) == [peaked, steady]  # by the last epoch, steady is first
    assert "learning_curve.png" in {a.path for a in mlflow.MlflowClient().list_artifacts(peaked)}
