"""How stages run on a Ray cluster, for every pipeline: fixed actor pools, actors that hold
the CNN (on GPUs when the cluster has them), and the Resources of a pipeline's step."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import ray

if TYPE_CHECKING:  # not imported here: it imports torch, which no text or pass worker needs
    from conceptual.vision.cnn import CnnConfig


def actor_pool(size: int | None, per_actor: float, resource: str = "CPU", most: int | None = None):
    """A fixed pool, all started at once: an actor spends seconds loading its models, and a
    pool that grows on demand pays that late, one actor at a time. `size` None: as many as
    the cluster has room for, but no more than `most` (the blocks the input comes in, when
    known: an actor more would only load its models; 1,000 candidates are one block)."""
    if not size:
        size = int(ray.cluster_resources().get(resource, 1) // per_actor)
        size = min(size, most) if most is not None else size
    return ray.data.ActorPoolStrategy(size=max(size, 1))


def cnn_actors(
    cnn: CnnConfig, actors: int | None, cpus_per_actor: float, most: int | None = None
) -> dict[str, Any]:
    """Where actors holding the CNN run: one GPU each when the cluster has GPUs (and the CNN
    may use one), else `cpus_per_actor` each: the vision stage of curation and the features
    job."""
    gpus = ray.cluster_resources().get("GPU", 0) if cnn.device != "cpu" else 0
    if gpus:
        return {"compute": actor_pool(actors, 1, "GPU", most), "num_gpus": 1}
    return {"compute": actor_pool(actors, cpus_per_actor, most=most), "num_cpus": cpus_per_actor}


@dataclass(frozen=True)
class Resources:
    """How a step runs: a fixed pool of `workers` actors (None: as many as the cluster has
    room for) of `cpus` each, or of one GPU each when they hold the `cnn` and the cluster has
    GPUs; with `tasks`, at most `workers` tasks at once, of `cpus` each. `batch_size` rows
    per call. `most`: the most actors worth starting when `workers` is None (the blocks the
    step's input comes in, when known)."""

    batch_size: int
    workers: int | None = None
    cpus: float = 1.0
    tasks: bool = False
    cnn: CnnConfig | None = None
    most: int | None = None

    def placement(self) -> dict[str, Any]:
        """map_batches's compute strategy and what each worker reserves."""
        if self.tasks:
            return {"compute": ray.data.TaskPoolStrategy(size=self.workers), "num_cpus": self.cpus}
        if self.cnn is not None:
            return cnn_actors(self.cnn, self.workers, self.cpus, self.most)
        return {
            "compute": actor_pool(self.workers, self.cpus, most=self.most),
            "num_cpus": self.cpus,
        }
