"""The training core's compiled step as it runs under Ray Train (issue 50 §3): DDP over 2
gloo workers, gradient accumulation (DDP synchronizes the last batch of each optimizer
step only), `compile=true compile_mode=reduce-overhead` (CUDA graphs on GPUs; on CPUs the
same torch.compile path without them). Its losses match the eager step's, step by step."""

import json
import sys
from pathlib import Path

import pytest
import torch

# Slow (a minute, most of it compiling): test-slow; the eager DDP path runs by default.
pytestmark = [pytest.mark.integration, pytest.mark.slow]

STEPS, ACCUMULATION, BATCH = 3, 2, 8


def train_loop(loop_config: dict) -> None:
    """Ray Train's worker loop: the captioner's loss through the core's wrapping
    (prepare_model, then compiled) and train_epoch, on batches of this worker's own."""
    import ray.train
    import ray.train.torch

    from conceptual.models.captioner import Captioner, CaptionerConfig
    from conceptual.models.losses import CaptionLoss
    from conceptual.pipelines.families.captioner.train_captioner import CaptionerTrainConfig
    from conceptual.pipelines.training import training

    config = CaptionerTrainConfig.model_validate(loop_config["config"])
    rank = ray.train.get_context().get_world_rank()
    torch.manual_seed(0)  # the same weights on both workers, as DDP also broadcasts them
    model = Captioner(
        CaptionerConfig(
            feature_map="8x8", vocab_size=24, feature_dim=16, d_model=32, layers=1,
            heads=2, ffn=64, dropout=0.0, max_tokens=8,
        )
    )  # fmt: skip
    device = torch.device("cpu")
    step_loss = training.compiled(ray.train.torch.prepare_model(CaptionLoss(model)), config)
    optimizer = training.make_optimizer(config, model, device)
    generator = torch.Generator().manual_seed(rank)
    batches = [
        {
            "features": torch.randn(BATCH, 64, 16, generator=generator),
            "tokens": torch.randint(4, 24, (BATCH, 8), generator=generator),
        }
        for _ in range(STEPS * ACCUMULATION)
    ]
    losses = training.train_epoch(step_loss, optimizer, batches, config, device)
    if rank == 0:  # a report without a checkpoint leaves no metrics in the result
        graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
        written = {"losses": losses["loss"].tolist(), "graphs": graphs}
        Path(loop_config["out"]).write_text(json.dumps(written))


def step_losses(storage, compiled: bool) -> dict:
    """Rank 0's loss at each optimizer step, and how many graphs torch.compile made."""
    import ray.cloudpickle
    import ray.train
    import ray.train.torch

    from conceptual.pipelines.families.captioner.train_captioner import CaptionerTrainConfig

    out = Path(storage) / f"losses-{compiled}.json"
    # the workers cannot import a test module: the loop travels by value
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    config = CaptionerTrainConfig(
        optimizer="adamw", lr=0.01, batch_size=BATCH, grad_accumulation=ACCUMULATION,
        workers=2, compile=compiled, compile_mode="reduce-overhead", experiment="test",
    )  # fmt: skip
    trainer = ray.train.torch.TorchTrainer(
        train_loop,
        train_loop_config={"config": config.model_dump(mode="json"), "out": str(out)},
        scaling_config=ray.train.ScalingConfig(num_workers=2, resources_per_worker={"CPU": 0.5}),
        run_config=ray.train.RunConfig(storage_path=str(storage), name=f"compiled-{compiled}"),
    )
    trainer.fit()
    return json.loads(out.read_text())


def test_the_compiled_step_under_ddp_with_accumulation_matches_eager(ray_local, tmp_path):
    eager = step_losses(tmp_path, compiled=False)
    compiled = step_losses(tmp_path, compiled=True)
    assert eager["graphs"] == 0 and compiled["graphs"] > 0  # it compiled
    assert len(eager["losses"]) == STEPS
    assert eager["losses"][-1] < eager["losses"][0]  # it learns: the steps differ
    torch.testing.assert_close(compiled["losses"], eager["losses"], rtol=1e-4, atol=1e-4)
