"""How stages run on a Ray cluster, for every pipeline: fixed actor pools, and actors that
hold the CNN (on GPUs when the cluster has them)."""

from __future__ import annotations

from typing import Any

import ray

from conceptual.vision.cnn import CnnConfig


def actor_pool(size: int | None, per_actor: float, resource: str = "CPU"):
    """A fixed pool, all started at once: an actor spends seconds loading its models, and a
    pool that grows on demand pays that late, one actor at a time."""
    size = size or int(ray.cluster_resources().get(resource, 1) // per_actor)
    return ray.data.ActorPoolStrategy(size=max(size, 1))


def cnn_actors(cnn: CnnConfig, actors: int | None, cpus_per_actor: float) -> dict[str, Any]:
    """Where actors holding the CNN run: one GPU each when the cluster has GPUs (and the CNN
    may use one), else `cpus_per_actor` each: the vision stage of curation and the features
    job."""
    gpus = ray.cluster_resources().get("GPU", 0) if cnn.device != "cpu" else 0
    if gpus:
        return {"compute": actor_pool(actors, 1, "GPU"), "num_gpus": 1}
    return {"compute": actor_pool(actors, cpus_per_actor), "num_cpus": cpus_per_actor}
