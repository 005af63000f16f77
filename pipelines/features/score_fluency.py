"""Fluency scores of translated captions, as Ray Data batch inference (docs/spec/fluency.md):
every curated Chinese record gets the fluency classifier's score in its `fluency` column.

    DATA/curated/*.parquet (records.CURATED_LANGUAGE)  ->  OUTPUT/curated/*.parquet (the same
                                                           records, `fluency` set)
                                                           OUTPUT/rejected/*.parquet, when a
                                                           record failed
                                                           OUTPUT/fluency.json, OUTPUT/_SUCCESS

OUTPUT is curated data like DATA (the features job and the captioner read it the same way).
Actors hold the classifier, the spaCy tagger and jieba's dictionary (one actor per CPU):
segmenting and tagging take most of the time, the four LSTMs over a 20-word sentence little.
A translation is scored on its four views; a native sentence (no `original`) on its two
Chinese views, and a record without a Chinese text on its English ones
(conceptual.fluency.model says why). fluency.json counts the records scored, the share
fluent (score > 0.5) by source, and the rate: sentences scored per second of the whole
run (reading, scoring and writing, the actors' loading included) with the actors it had.

A record whose scoring raises is rejected (pipelines/dataflow/set_aside.py): stage `score_fluency`,
reason `internal_error`, the whole record in OUTPUT/rejected (the job replays it from there
with `--data OUTPUT/rejected allow_incomplete=true`); the other records of its batch are
scored as they would have been. Past `errors.max_rate` of the records (or
`errors.max_count`) the job fails instead.
"""

from __future__ import annotations

import time
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from conceptual import registry, storage
from conceptual.errors import INTERNAL_ERROR
from conceptual.fluency.model import FLUENT_ABOVE
from conceptual.fluency.scorer import FluencyScorer
from conceptual.models.saving import SavedFluency, load
from conceptual.pipelines.dataflow import set_aside
from conceptual.pipelines.dataflow.readers import read_row_groups
from conceptual.records import CURATED_LANGUAGE, Stage
from conceptual.storage import SUCCESS

SUMMARY = "fluency.json"
# The job's one stage: a record is rejected only when its scoring raises.
SCORE = Stage("score_fluency", (INTERNAL_ERROR,), "errors.max_rate, errors.max_count")


class ScoreConfig(set_aside.RewriteConfig):
    """score_fluency's keys: those of every rewrite_guarded job."""


class FluencyOperator:
    """Loads the model once per actor (a `models:/` or `runs:/` URI is downloaded by each
    actor itself, so the actors need not share the driver's disk)."""

    def __init__(self, model_uri: str):
        self.scorer = FluencyScorer(registry.resolve(model_uri))

    def __call__(self, batch: pa.Table) -> pa.Table:
        fluency = self.scorer.score(batch["text"].to_pylist(), batch["original"].to_pylist())
        if "fluency" in batch.column_names:
            batch = batch.drop_columns(["fluency"])
        batch = batch.append_column("fluency", pa.array(fluency, pa.float32()))
        return batch.select(CURATED_LANGUAGE.names).cast(CURATED_LANGUAGE)


def operator(model_uri: str) -> tuple[type, dict[str, Any]]:
    """The operator scoring the records, and its constructor's arguments."""
    return FluencyOperator, {"model_uri": model_uri}


def score(model_uri: str, data_uri: str, output_uri: str, config: ScoreConfig) -> dict[str, Any]:
    """Write every record of DATA with its fluency under OUTPUT/curated; return the summary."""
    started = time.monotonic()
    data = storage.output_part(data_uri, "curated", config.allow_incomplete)
    curated_uri = storage.join(output_uri, "curated")
    rejected_uri = storage.join(output_uri, set_aside.REJECTED)
    if data.rstrip("/") in (curated_uri.rstrip("/"), rejected_uri.rstrip("/")):
        raise ValueError(f"--output {output_uri} would overwrite its input: write elsewhere")
    fs, _ = storage.resolve(data)
    files = [f for f in storage.list_files(data) if f.endswith(".parquet")]
    check_language_records(fs, files, data)
    # A URI that is no fluency classifier fails here, before anything is deleted.
    load(registry.resolve(model_uri), kind=SavedFluency)
    storage.delete(storage.join(output_uri, SUCCESS))
    storage.delete(curated_uri)
    storage.delete(rejected_uri)

    cls, kwargs = operator(model_uri)
    actors = set_aside.rewrite_guarded(
        read_row_groups(fs, files), cls, kwargs, SCORE.name, rejected_uri, curated_uri, config
    )
    seconds = time.monotonic() - started
    rejected, samples = set_aside.tally(rejected_uri)
    records = storage.written_rows(data)
    set_aside.check(rejected, records, config.errors, samples)

    summary = {
        "data": data,
        "model": model_uri,
        "input": records,
        **counts(curated_uri),
        "rejected": rejected,  # {stage: {reason: n}}: the records in rejected/
        "actors": actors,
        "seconds": round(seconds, 2),
    }
    summary["sentences_per_second"] = round(summary["scored"] / seconds, 1)
    storage.write_json(storage.join(output_uri, SUMMARY), summary)
    storage.write_json(storage.join(output_uri, SUCCESS), {"rows": summary["records"]})
    return summary


def check_language_records(fs, files: list[str], data: str) -> None:
    """Fail before any work on data that is not curated Chinese records (an English curation
    has no `text` or `original` to score)."""
    if not files:
        raise ValueError(f"no Parquet files under {data}")
    with fs.open_input_file(files[0]) as f:
        names = set(pq.read_schema(f).names)
    missing = [name for name in CURATED_LANGUAGE.names if name not in names and name != "fluency"]
    if missing:
        raise ValueError(
            f"{data} is not curated Chinese captions (records.CURATED_LANGUAGE; import them "
            f"with conceptual.jobs.import_flickr8k_cn): no {', '.join(missing)} column"
        )


def counts(curated_uri: str) -> dict[str, Any]:
    """The records written, how many have a score, the share fluent, by source."""
    fs, _ = storage.resolve(curated_uri)
    files = [f for f in storage.list_files(curated_uri) if f.endswith(".parquet")]
    columns = ["source", "original", "fluency"]
    parts = [pq.read_table(f, columns=columns, filesystem=fs) for f in files]
    table = pa.concat_tables(parts) if parts else CURATED_LANGUAGE.empty_table().select(columns)
    fluency = table["fluency"].to_numpy(zero_copy_only=False)
    sources = table["source"].to_pylist()
    by_source = {}
    for source in sorted(set(sources), key=str):
        mine = fluency[[s == source for s in sources]]
        by_source[str(source)] = {"records": len(mine), "fluent": _share(mine)}
    return {
        "records": table.num_rows,
        "scored": int(np.isfinite(fluency).sum()),
        "without_original": table["original"].null_count,
        "fluent": _share(fluency),
        "mean_fluency": round(float(np.nanmean(fluency)), 4) if len(fluency) else None,
        "fluent_by_source": by_source,
    }


def _share(fluency: np.ndarray) -> float | None:
    return round(float(np.mean(fluency > FLUENT_ABOVE)), 4) if len(fluency) else None


def run(
    model_uri: str, data_uri: str, output_uri: str, config: ScoreConfig
) -> tuple[dict[str, Any], str]:
    """The score_fluency job: one MLflow run around the scoring. Returns (summary, run id)."""
    work = partial(score, model_uri, data_uri, output_uri, config)
    params = {"model_uri": model_uri}
    return set_aside.tracked_rewrite(SCORE, config, data_uri, output_uri, params, SUMMARY, work)
