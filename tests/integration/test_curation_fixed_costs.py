"""A small curation on a local Ray of 2 CPUs pays only for what its input needs: one NLP
actor for a one-block input (each loads spaCy, WordNet and the gazetteers: seconds of CPU),
and no second pass over the output for its samples. Its records and stats are the run's
either way (tests/unit/curation/test_curation_fixed_cost_rules.py: the samples are those a read of the
output gives)."""

from __future__ import annotations

import pytest
import ray

from conceptual.pipelines.curation import curation
from conceptual.pipelines.curation.curation_config import CurationConfig
from conceptual_demo.corpus import generate_candidates, write_candidates

pytestmark = pytest.mark.integration


def nlp_actors() -> set[str]:
    """The ids of every NLP actor this Ray has started (alive or not)."""
    actors = ray._private.state.actors()  # the GCS's table: no dashboard needed
    return {
        actor_id
        for actor_id, actor in actors.items()
        if "MapWorker" in actor.get("ActorClassName", "")  # Ray Data's actor of a map step
    }


def test_a_one_block_input_starts_one_nlp_actor_and_reads_no_output_back(
    ray_local, tmp_path, monkeypatch
):
    assert ray.cluster_resources()["CPU"] == 2
    write_candidates(generate_candidates(300, seed=3), str(tmp_path / "in.tsv"), fmt="cc_tsv")
    config = CurationConfig.model_validate(
        {"with_images": False, "entity_frequency": {"more_than": 0}, "samples": 5}
    )

    def no_second_read(*args, **kwargs):
        raise AssertionError("the output was read again")

    monkeypatch.setattr(curation, "written", no_second_read)
    before = nlp_actors()
    stats = curation.curate(str(tmp_path / "in.tsv"), str(tmp_path / "out"), config)
    assert len(nlp_actors() - before) == 1
    assert stats["input"] == 300 and len(stats["samples"]["kept"]) == min(5, stats["kept"])
    reasons = {(r["stage"], r["reason"]) for r in stats["samples"]["rejected"]}
    assert reasons == {(stage, reason) for stage, rs in stats["rejected"].items() for reason in rs}
