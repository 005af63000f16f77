"""alignment.keep_fraction as a global step (pipelines/dataflow/steps.py, GlobalStep): the top
fraction of the run's scored pairs is kept, DataComp's rule, which needs the scores of every
pair before any is judged. `score_tally` gives each batch's scores, `alignment_threshold` the
score of the last pair kept, `mark_low_alignment` rejects the pairs below it; `keep_top`
builds the step for curation's `global_steps`.

The fraction is of every pair that was scored (each that reached the vision step and whose
image passed the filters), rejected by the label rule or not, so that `keep_fraction=0.3`
means the same cut whatever overlap.rule is: with `alignment` the run keeps that top 30%;
with `both` the pairs of it that the label rule kept too (fewer, the label rule having
rejected its own at the vision step); with `either` the top 30% and every other pair the
label rule kept (its matched words), so the label rule's rejections wait for this step.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from conceptual.pipelines.curation.curation_config import CurationConfig
from conceptual.pipelines.dataflow.rows import is_kept, rejecting
from conceptual.pipelines.dataflow.steps import GlobalStep
from conceptual.records import Rejection, Stage
from conceptual.vision.alignment import ALIGNMENT_STAGE, LOW_ALIGNMENT, low_alignment

ALIGNMENT = Stage(
    ALIGNMENT_STAGE,
    (LOW_ALIGNMENT,),
    "alignment.min_score or alignment.keep_fraction (overlap.rule=labels turns it off)",
)
# What an `either` pair that this step rejects failed at the vision step too.
NO_LABEL_MATCH = Rejection("no_label_overlap", "no caption word matched the image's labels")


def score_tally(batch: pa.Table) -> pa.Table:
    """The scores of the batch's scored pairs, whether still in the running or not."""
    scores = batch["alignment_score"]
    return pa.table({"score": scores.filter(pc.is_valid(scores))})


def alignment_threshold(
    scores: pa.Table, keep_fraction: float, rule: str, scorer: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """`mark_low_alignment`'s arguments from the scores of every batch: the threshold is the
    score of the ceil(keep_fraction x scored)-th best pair (pairs tied with it are kept too),
    None when nothing was scored. And what stats.json reports of the rule."""
    values = np.sort(scores["score"].to_numpy())[::-1]
    keep = math.ceil(keep_fraction * len(values))
    threshold = float(values[keep - 1]) if keep else None
    report = {
        "scorer": scorer,
        "rule": rule,
        "keep_fraction": keep_fraction,
        "scored": len(values),
        "threshold": threshold,
    }
    return {"threshold": threshold, "rule": rule}, report


def mark_low_alignment(batch: pa.Table, threshold: float | None, rule: str) -> pa.Table:
    """The pairs still in the running that score below `threshold` rejected, low_alignment;
    with rule `either`, only those the label rule did not keep (no matched word)."""
    if threshold is None:
        return batch
    scores = batch["alignment_score"]
    low = pc.and_(is_kept(batch), pc.fill_null(pc.less(scores, threshold), False))
    if rule == "either":
        low = pc.and_(low, pc.equal(pc.list_value_length(batch["matched"]), 0))
    rows = np.flatnonzero(low.to_numpy(zero_copy_only=False))
    values = scores.take(pa.array(rows)).to_pylist()
    labels = NO_LABEL_MATCH if rule == "either" else None
    details = {
        int(i): low_alignment(score, threshold, labels).detail for i, score in zip(rows, values)
    }
    return rejecting(batch, ALIGNMENT_STAGE, LOW_ALIGNMENT, details)


def keep_top(config: CurationConfig, batch_size: int) -> tuple[GlobalStep, ...]:
    """The keep_fraction step, where the config asks for it (min_score is the vision
    step's). It goes first of the global steps: its tally counts every scored pair anyway,
    and the others then skip the pairs it rejects."""
    if config.alignment.keep_fraction is None or not config.with_images:
        return ()
    kwargs = {
        "keep_fraction": config.alignment.keep_fraction,
        "rule": config.overlap.rule,
        "scorer": config.alignment.scorer,
    }
    step = GlobalStep(
        (ALIGNMENT,),
        score_tally,
        alignment_threshold,
        mark_low_alignment,
        kwargs,
        batch_size,
        needs=("alignment_score", "matched"),
    )
    return (step,)


def per_row(config: CurationConfig) -> tuple[Stage, ...]:
    """The vision step's own alignment stage: with min_score, it rejects there."""
    return (ALIGNMENT,) if config.alignment.min_score is not None else ()


def alignment_stats(config: CurationConfig, reports: dict[str, Any]) -> dict[str, Any]:
    """stats.json's `alignment`, when a scorer ran: keep_fraction's report (the threshold
    it came to), or the settings."""
    if config.alignment.scorer is None:
        return {}
    settings = {"scorer": config.alignment.scorer, "rule": config.overlap.rule}
    return {"alignment": reports.get(ALIGNMENT_STAGE) or settings | config.alignment.model_dump()}
