"""What a curation run reports once its records are written (pipelines/curation/curation.py, curate):
stats.json's funnel, counted against the files on disk, the rows that failed against the
error budget, the global rules' reports, and the before/after samples."""

from __future__ import annotations

from typing import Any

import pyarrow.parquet as pq
import ray
import ray.data

from conceptual import errors, funnel, storage
from conceptual.errors import INTERNAL_ERROR
from conceptual.pipelines.curation.alignment_rule import alignment_stats
from conceptual.pipelines.curation.curation_config import CurationConfig
from conceptual.pipelines.curation.decontamination import DECONTAMINATE_STAGE
from conceptual.pipelines.curation.near_duplicates import NEAR_DUPLICATES_STAGE
from conceptual.pipelines.dataflow.rows import ENTITY_FREQUENCY_STAGE, chosen_samples


def curation_stats(
    config: CurationConfig,
    output_uri: str,
    names: list[str],
    tallies: dict[str, dict[str, int]],
    reports: dict[str, Any],
    shards: dict[str, Any] | None,
) -> dict[str, Any]:
    """stats.json of the run but for its samples and timings: the funnel of the write pass's
    `tallies` over the stages `names`, the global rules' `reports` and the `shards` written.
    errors.TooManyErrors past errors.*, and funnel.AccountingError unless the files on disk
    hold exactly the rows counted."""
    on_disk = {
        "curated": storage.written_rows(storage.join(output_uri, "curated")),
        "rejected": storage.written_rows(storage.join(output_uri, "rejected")),
    }
    rejected: dict[str, dict[str, int]] = {}
    for key, n in tallies.get("outcome", {}).items():
        stage, reason = key.split("\t")
        if reason:
            rejected.setdefault(stage, {})[reason] = n
    input_count = sum(tallies.get("outcome", {}).values())
    kept = tallies.get("outcome", {}).get("\t", 0)
    failed = {s: r[INTERNAL_ERROR] for s, r in rejected.items() if INTERNAL_ERROR in r}
    if sum(failed.values()) > config.errors.budget(input_count):
        errors.check(failed, input_count, config.errors, failed_ids(output_uri))
    stats = funnel.build(input_count, kept, rejected, names)

    if on_disk != {"curated": kept, "rejected": input_count - kept}:
        raise funnel.AccountingError(
            f"written {on_disk}, expected curated {kept} and rejected {input_count - kept}"
        )
    if shards is not None and shards["samples"] + shards["duplicates"] != kept:
        raise funnel.AccountingError(f"{shards} in shards, {kept} kept")

    stats |= funnel.caption_statistics(tallies)
    stats["splits"] = dict(sorted(tallies.get("split", {}).items()))
    stats["entity_frequency"] = reports[ENTITY_FREQUENCY_STAGE]
    stats |= alignment_stats(config, reports)
    # the rules that compare images, where they ran (an evaluation job reads `decontaminate`)
    stats |= {s: reports[s] for s in (NEAR_DUPLICATES_STAGE, DECONTAMINATE_STAGE) if s in reports}
    if config.with_images:
        stats["image"] = {
            # The funnel must say when no unsafe-content detector looked at the images.
            "unsafe_detector": config.image.unsafe.detector,
            "overlap": config.overlap.enabled,
        }
    if shards is not None:
        stats["shards"] = shards
    return stats


def written(output_uri: str, part: str) -> ray.data.Dataset | None:
    """The records written to OUTPUT/curated or OUTPUT/rejected, or None when none were
    (the run cleared both, and `write_outcomes` writes no empty file)."""
    uri = storage.join(output_uri, part)
    if not storage.exists(uri):
        return None
    fs, path = storage.resolve(uri)
    return ray.data.read_parquet(path, filesystem=fs)


def failed_ids(output_uri: str) -> dict[str, list[str]]:
    """Up to three ids of the rows that failed in each stage, for the error line."""
    rejected = written(output_uri, "rejected")
    failed = rejected.filter(lambda row: row["reason"] == INTERNAL_ERROR).select_columns(
        ["id", "stage"]
    )
    found: dict[str, list[str]] = {}
    for row in failed.take(1000):
        ids = found.setdefault(row["stage"], [])
        if len(ids) < 3:
            ids.append(row["id"])
    return found


def samples(counts: Any, output_uri: str, n: int) -> dict[str, list[dict[str, Any]]]:
    """Before/after pairs of kept candidates (the first `n` of the curated output), and up
    to three examples of each rejection: drawn by the write pass as it wrote them
    (rows.sample_tally), not read back. Only the images of those kept, which the pass
    left in their files, are read: the few files that hold them, one column."""
    if n <= 0:
        return {"kept": [], "rejected": []}
    kept, rejected, images = chosen_samples(counts, n)
    if images:
        fs, path = storage.resolve(storage.join(output_uri, "curated"))
        columns: dict[str, list] = {}
        for file in sorted({file for file, _ in images}):
            with fs.open_input_file(f"{path}/{file}") as f:
                columns[file] = pq.read_table(f, columns=["image"])["image"].to_pylist()
        pending = iter(images)
        for record in kept:
            if record.get("image") is not None:
                file, row = next(pending)
                record["image"] = columns[file][row]
    return {"kept": kept, "rejected": rejected}
