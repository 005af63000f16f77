"""The curation pipeline on Ray Data (text side of spec/curation.md):

    read -> [text filters -> syntax filters -> hypernymization]  (one NLP actor pool)
         -> entity-type frequency (a global count, then a filter)
         -> curated/ and rejected/ Parquet, stats.json, _SUCCESS

Rejected candidates travel with the kept ones, marked with stage/reason/detail, so the two
outputs are a partition of the input by construction; the written files are counted again
before the run is declared complete.

Output layout under OUTPUT (a path or s3:// URI):
    curated/*.parquet   records.CURATED
    rejected/*.parquet  records.REJECTED
    stats.json          funnel, rejections by stage and reason, caption statistics
    _SUCCESS            written last; its absence means the output is incomplete
"""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import mlflow
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import ray.data

from conceptual import funnel, storage, tracking
from conceptual.candidates import FORMATS, READ_STAGE
from conceptual.config import Config
from conceptual.pipelines.readers import IN_FLIGHT, read_candidates
from conceptual.records import CURATED, ENTITY, REJECTED
from conceptual.text.curate import STAGES as TEXT_STAGES
from conceptual.text.curate import TextCurationConfig, TextCurator

ENTITY_FREQUENCY_STAGE = "entity_frequency"
STAGES = (READ_STAGE, *TEXT_STAGES, ENTITY_FREQUENCY_STAGE)
SUCCESS = "_SUCCESS"

PROCESSED = (
    IN_FLIGHT.append(pa.field("caption", pa.string()))
    .append(pa.field("entities", pa.list_(ENTITY)))
    .append(pa.field("types", pa.list_(pa.string())))
)


class EntityFrequencyConfig(Config):
    """Spec §5: keep a caption only if every concept it mentions occurs more than
    `more_than` times among all captions that reached this stage (the paper: 100)."""

    enabled: bool = True
    more_than: int = 100


class ResourcesConfig(Config):
    """How the NLP stage runs; the executor decides placement."""

    nlp_actors: int | None = None  # None: as many as the cluster has CPUs for
    cpus_per_actor: float = 1.0
    batch_size: int = 512  # candidates per call of an NLP actor
    # Bytes of input per read task and block: the unit the NLP actors balance over.
    split_bytes: int = 1 << 20


class CurationConfig(Config):
    input_format: Literal[FORMATS] = "auto"  # type: ignore[valid-type]
    text: TextCurationConfig = TextCurationConfig()
    entity_frequency: EntityFrequencyConfig = EntityFrequencyConfig()
    resources: ResourcesConfig = ResourcesConfig()
    samples: int = 50  # before/after pairs logged to MLflow
    experiment: str = "curation"


class NlpStage:
    """Ray Data actor: loads the filters, spaCy and WordNet once, then curates batches."""

    def __init__(self, config: TextCurationConfig):
        self.curator = TextCurator(config)

    def __call__(self, batch: pa.Table) -> pa.Table:
        rows = batch.to_pylist()
        pending = [i for i, row in enumerate(rows) if row["reason"] is None]
        outcomes = self.curator.process([rows[i]["alt_text"] for i in pending])
        for row in rows:
            row.update(caption=None, entities=[], types=[])
        for i, outcome in zip(pending, outcomes):
            rows[i].update(
                stage=outcome.stage,
                reason=outcome.reason,
                detail=outcome.detail,
                caption=outcome.caption,
                entities=outcome.entities,
                types=outcome.types,
            )
        return pa.Table.from_pylist(rows, schema=PROCESSED)


def is_kept(batch: pa.Table) -> pa.ChunkedArray:
    return pc.is_null(batch["reason"])


def counted(kind: str, values: pa.Array | pa.ChunkedArray) -> pa.Table:
    """(kind, key, n) rows: how often each value occurs, as partial counts of one batch."""
    counts = (
        pa.table({"key": pc.cast(values, pa.string())})
        .group_by("key")
        .aggregate([([], "count_all")])
    )
    return pa.table(
        {
            "kind": pa.array([kind] * counts.num_rows, pa.string()),
            "key": counts["key"],
            "n": counts["count_all"],
        }
    )


def concept_tally(batch: pa.Table) -> pa.Table:
    """The concepts of the captions still in the running, for the entity-frequency rule."""
    return counted("type", pc.list_flatten(batch.filter(is_kept(batch))["types"]))


def outcome_tally(batch: pa.Table) -> pa.Table:
    """Everything stats.json reports, in one pass: outcomes, caption lengths, tokens."""
    tokens = pc.utf8_split_whitespace(batch.filter(is_kept(batch))["caption"])
    stage, reason = pc.fill_null(batch["stage"], ""), pc.fill_null(batch["reason"], "")
    return pa.concat_tables(
        [
            counted("outcome", pc.binary_join_element_wise(stage, reason, "\t")),
            counted("length", pc.list_value_length(tokens)),
            counted("token", pc.list_flatten(tokens)),
        ]
    )


def tally(ds: ray.data.Dataset, fn) -> dict[str, dict[str, int]]:
    """{kind: {key: n}} over a whole dataset. Partial counts per batch run on the cluster
    and are small, so they are combined here rather than shuffled (a hash shuffle costs
    seconds of fixed overhead, more than the counting itself)."""
    partials = ds.map_batches(fn, batch_format="pyarrow").iter_batches(
        batch_size=None, batch_format="pyarrow"
    )
    tables = [t for t in partials if t.num_rows]
    result: dict[str, dict[str, int]] = {}
    if tables:
        combined = pa.concat_tables(tables).group_by(["kind", "key"]).aggregate([("n", "sum")])
        for kind, key, n in zip(*(combined[c].to_pylist() for c in ("kind", "key", "n_sum"))):
            result.setdefault(kind, {})[key] = n
    return result


def apply_entity_frequency(batch: pa.Table, rare: frozenset[str], more_than: int) -> pa.Table:
    rows = batch.to_pylist()
    for row in rows:
        if row["reason"] is None and (below := sorted(set(row["types"]) & rare)):
            row.update(
                stage=ENTITY_FREQUENCY_STAGE,
                reason="rare_type",
                detail=f"occur {more_than} times or fewer: {', '.join(below[:10])}",
                caption=None,
            )
    return pa.Table.from_pylist(rows, schema=PROCESSED)


def to_curated(batch: pa.Table) -> pa.Table:
    return batch.filter(is_kept(batch)).select(CURATED.names).cast(CURATED)


def to_rejected(batch: pa.Table) -> pa.Table:
    return batch.filter(pc.invert(is_kept(batch))).select(REJECTED.names).cast(REJECTED)


def length_statistics(histogram: Mapping[int, int]) -> dict[str, float]:
    """Mean, std and median of caption lengths from an exact {tokens: count} histogram."""
    total = sum(histogram.values())
    if not total:
        return {"count": 0, "tokens_mean": 0.0, "tokens_std": 0.0, "tokens_median": 0.0}
    mean = sum(k * n for k, n in histogram.items()) / total
    var = sum(n * (k - mean) ** 2 for k, n in histogram.items()) / total
    ordered = sorted(histogram.items())

    def nth(index: int) -> int:  # the index-th smallest length, 0-based
        seen = 0
        for length, n in ordered:
            seen += n
            if index < seen:
                return length
        raise IndexError(index)

    median = (nth((total - 1) // 2) + nth(total // 2)) / 2
    return {
        "count": total,
        "tokens_mean": round(mean, 3),
        "tokens_std": round(math.sqrt(var), 3),
        "tokens_median": median,
    }


def written_rows(uri: str) -> int:
    if not storage.exists(uri):
        return 0
    fs, _ = storage.resolve(uri)
    total = 0
    for path in storage.list_files(uri):
        if path.endswith(".parquet"):
            with fs.open_input_file(path) as f:
                total += pq.ParquetFile(f).metadata.num_rows
    return total


def nlp_compute(resources: ResourcesConfig) -> ray.data.ActorPoolStrategy:
    """A fixed pool, all started at once: an actor spends seconds loading spaCy and WordNet,
    and a pool that grows on demand pays that late, one actor at a time."""
    size = resources.nlp_actors or int(
        ray.cluster_resources().get("CPU", 1) // resources.cpus_per_actor
    )
    return ray.data.ActorPoolStrategy(size=max(size, 1))


def curate(
    input_uri: str, output_uri: str, config: CurationConfig, run_id: str | None = None
) -> dict[str, Any]:
    """Run the pipeline; return the stats that were written to OUTPUT/stats.json (with the
    MLflow run id when the run is tracked)."""
    if storage.resolve(output_uri) == storage.resolve(input_uri):
        raise ValueError("output must not be the input")
    started = time.monotonic()
    # A previous run's marker goes first: from here on, the output is visibly incomplete.
    storage.delete(storage.join(output_uri, SUCCESS))
    for part in ("curated", "rejected", "stats.json"):
        storage.delete(storage.join(output_uri, part))

    candidates = read_candidates(input_uri, config.input_format, config.resources.split_bytes)
    processed = candidates.map_batches(
        NlpStage,
        fn_constructor_kwargs={"config": config.text},
        batch_size=config.resources.batch_size,
        batch_format="pyarrow",
        compute=nlp_compute(config.resources),
        num_cpus=config.resources.cpus_per_actor,
        # Ray Data restarts a lost actor and retries its batches (max_restarts=-1 by default).
    ).materialize()

    ef = config.entity_frequency
    type_count = tally(processed, concept_tally).get("type", {})
    rare = (
        frozenset(t for t, n in type_count.items() if n <= ef.more_than)
        if ef.enabled
        else frozenset()
    )
    final = processed.map_batches(
        apply_entity_frequency,
        fn_kwargs={"rare": rare, "more_than": ef.more_than},
        batch_format="pyarrow",
    ).materialize()
    del processed

    fs, path = storage.resolve(output_uri)
    final.map_batches(to_curated, batch_format="pyarrow").write_parquet(
        f"{path}/curated", filesystem=fs
    )
    final.map_batches(to_rejected, batch_format="pyarrow").write_parquet(
        f"{path}/rejected", filesystem=fs
    )

    tallies = tally(final, outcome_tally)
    rejected: dict[str, dict[str, int]] = {}
    for key, n in tallies.get("outcome", {}).items():
        stage, reason = key.split("\t")
        if reason:
            rejected.setdefault(stage, {})[reason] = n
    input_count = sum(tallies.get("outcome", {}).values())
    kept = tallies.get("outcome", {}).get("\t", 0)
    stats = funnel.build(input_count, kept, rejected, STAGES)

    on_disk = {
        "curated": written_rows(storage.join(output_uri, "curated")),
        "rejected": written_rows(storage.join(output_uri, "rejected")),
    }
    if on_disk != {"curated": kept, "rejected": input_count - kept}:
        raise funnel.AccountingError(
            f"written {on_disk}, expected curated {kept} and rejected {input_count - kept}"
        )

    lengths = {int(k): n for k, n in tallies.get("length", {}).items()}
    stats["captions"] = {
        **length_statistics(lengths),
        "vocabulary_size": len(tallies.get("token", {})),
    }
    stats["entity_frequency"] = {
        "enabled": ef.enabled,
        "more_than": ef.more_than,
        "types": len(type_count),
        "types_kept": len(type_count) - len(rare),
    }
    stats["seconds"] = round(time.monotonic() - started, 2)
    if run_id:
        stats["mlflow_run_id"] = run_id
    stats["samples"] = _samples(final, config.samples)
    storage.write_json(storage.join(output_uri, "stats.json"), without_samples(stats))
    storage.write_json(storage.join(output_uri, SUCCESS), {"input": input_count, "kept": kept})
    return stats


def without_samples(stats: Mapping[str, Any]) -> dict[str, Any]:
    """What stats.json holds: everything but the sample records (those go to MLflow)."""
    return {k: v for k, v in stats.items() if k != "samples"}


def _samples(final: ray.data.Dataset, n: int) -> dict[str, list[dict[str, Any]]]:
    """Before/after pairs of kept candidates, and up to three examples of each rejection."""
    if n <= 0:
        return {"kept": [], "rejected": []}
    kept = final.map_batches(to_curated, batch_format="pyarrow").take(n)
    rejected: dict[tuple[str, str], list[dict]] = {}
    for row in final.map_batches(to_rejected, batch_format="pyarrow").take(5000):
        examples = rejected.setdefault((row["stage"], row["reason"]), [])
        if len(examples) < 3:
            examples.append(row)
    return {"kept": kept, "rejected": [r for rows in rejected.values() for r in rows]}


def log_to_mlflow(stats: Mapping[str, Any], input_uri: str, output_uri: str) -> None:
    """Funnel counts as metrics; stats, the funnel plot and sample tables as artifacts."""
    metrics = {
        "input": stats["input"],
        "kept": stats["kept"],
        "kept_fraction": stats["kept"] / max(stats["input"], 1),
    }
    for row in stats["funnel"]:
        metrics[tracking.metric_key("funnel", row["stage"], "leaving")] = row["leaving"]
    for stage, reasons in stats["rejected"].items():
        for reason, count in reasons.items():
            metrics[tracking.metric_key("rejected", stage, reason)] = count
    metrics.update({f"captions.{k}": v for k, v in stats["captions"].items()})
    mlflow.log_metrics(metrics)
    mlflow.log_params({"input_uri": input_uri, "output_uri": output_uri})
    mlflow.log_dict(without_samples(stats), "stats.json")
    mlflow.log_text(funnel.render(stats), "funnel.txt")
    with tempfile.TemporaryDirectory() as tmp:
        plot_path = Path(tmp) / "funnel.png"
        funnel.plot(stats, plot_path)
        mlflow.log_artifact(str(plot_path))
    kept = stats["samples"]["kept"]
    mlflow.log_table(
        {
            "alt_text": [r["alt_text"] for r in kept],
            "caption": [r["caption"] for r in kept],
            "entities": [
                ", ".join(f"{e['text']}->{e['replacement'] or '-'}" for e in r["entities"])
                for r in kept
            ],
        },
        artifact_file="samples/kept.json",
    )
    rejected = stats["samples"]["rejected"]
    mlflow.log_table(
        {key: [r[key] for r in rejected] for key in ("stage", "reason", "detail", "alt_text")},
        artifact_file="samples/rejected.json",
    )


def run(input_uri: str, output_uri: str, config: CurationConfig) -> tuple[dict[str, Any], str]:
    """The curation job: one MLflow run around the pipeline. Returns (stats, run id)."""
    with tracking.start_run(config.experiment, tags={"stage": "curate"}) as active:
        tracking.log_config(config)
        stats = curate(input_uri, output_uri, config, run_id=active.info.run_id)
        log_to_mlflow(stats, input_uri, output_uri)
        return stats, active.info.run_id
