"""Conceptual Spoken Captions on Ray Data: every caption of a dataset read aloud, each clip
with its own engine and voice (espeak-ng, Flite or Festival: synthesis.voices), rate, pitch
and gain (conceptual.speech.synthesis).

    INPUT/{curated,features,candidates}/*.parquet   caption records (one clip each)
      -> shards of `clips_per_shard` records (a file's row group, cut in row ranges)
      -> one Ray task per shard: text checks, the drawn engine, 16 kHz FLAC
      -> OUTPUT/clips/SHARD.parquet     records.CLIP
         OUTPUT/rejected/SHARD.parquet  records.REJECTED (stage "synthesize"; the caption is
                                        in alt_text), when a record of the shard was rejected
         OUTPUT/shards/SHARD.tar        WebDataset: <id>.flac, <id>.txt, <id>.json
         OUTPUT/done/SHARD.json         the shard's counts, written last
      -> OUTPUT/stats.json, OUTPUT/_SUCCESS

Resuming: shard names come from the input file, row group and first row, so they are the
same in every run of the same input; each file is written whole (a temporary name, then a
rename; an S3 PUT is atomic by itself), and a shard whose done/ file exists is not redone.
A rerun after a crash therefore redoes only unfinished shards and overwrites whatever they
had left, so nothing is duplicated or lost. `plan.json` holds the input, the shards and
the config: a run whose plan differs from the one in its output starts that output afresh.

INPUT must be a finished output (its _SUCCESS marker), unless allow_incomplete=true, and
every engine and voice the pool draws must be installed: otherwise the job stops before it
starts, naming the Debian packages (synthesis.check_engines).

Accounting as in curation: records in = clips + rejections, checked against the files
written before `_SUCCESS`. A features output has a row per crop: only crop 0 is a caption.

A record whose synthesis raises (rather than failing as an engine can: synthesis_failed) is
rejected as `internal_error` with the exception as its detail, and its shard goes on. A
rerun into the same OUTPUT redoes the shards that had such rows (after a fix, they are
replayed), and only those. Past `errors.max_rate` of the records (or `errors.max_count`)
the job fails instead, without its `_SUCCESS` marker.
"""

from __future__ import annotations

import io
import json
import posixpath
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

import mlflow
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import ray.data

from conceptual import errors, funnel, lineage, storage, tracking
from conceptual.config import Config
from conceptual.errors import INTERNAL_ERROR, ErrorsConfig, describe
from conceptual.models.variants import language_code
from conceptual.pipelines.curation.shards import add_member
from conceptual.pipelines.dataflow.readers import candidate_files
from conceptual.records import CLIP, REJECTED, Rejection, Stage
from conceptual.speech.audio import duration
from conceptual.speech.clips import synthesized_clip
from conceptual.speech.synthesis import (
    SynthesisConfig,
    SynthesisError,
    check_engines,
    draw_parameters,
    render,
    speakable,
)
from conceptual.storage import SUCCESS
from conceptual.text.bounds import BOUND_REASONS, out_of_bounds

# The job's one stage; its first rejections are those of the text filters (text/bounds.py).
SYNTHESIZE = Stage(
    "synthesize",
    (*BOUND_REASONS, "unsupported_language", "synthesis_failed", INTERNAL_ERROR),
    "max_chars, max_seconds (synthesis.* for how it sounds)",
)
# The voices (SynthesisConfig.voices) are English: a record of another language (its
# `language` column, records.LANGUAGE_FIELDS) is refused, not spelled out letter by letter.
# espeak-ng's Mandarin voice (cmn) exists, but as commonly packaged (without the extended
# dictionary) it reads hanzi as pinyin with the tone digits spoken as English numbers.
LANGUAGES = ("en",)
# Caption records, in the order they are looked for under INPUT.
RECORD_FOLDERS = ("curated", "features", "candidates")
COLUMNS = (
    "id",
    "caption",
    "alt_text",
    "language",
    "split",
    "image",
    "image_url",
    "image_id",
    "crop",
)
# The files a shard writes, by folder.
SHARD_FILES = (
    ("done", ".json"),
    ("clips", ".parquet"),
    ("rejected", ".parquet"),
    ("shards", ".tar"),
)


class SpeechConfig(Config):
    synthesis: SynthesisConfig = SynthesisConfig()
    max_chars: int = 1000  # too_long: longer captions are not synthesized at all
    max_seconds: float = 30.0  # too_long: nor kept, when their clip lasts longer
    clips_per_shard: int = 128  # the unit of work, of output files and of resuming
    cpus_per_task: float = 1.0  # an engine uses one core while it renders
    webdataset: bool = True  # shards/*.tar beside the Parquet
    examples: int = 4  # clips logged to MLflow as audio files
    experiment: str = "speech"
    allow_incomplete: bool = False  # read an input whose job left no _SUCCESS marker
    errors: ErrorsConfig = ErrorsConfig()  # records that may fail before the job does


def records_uri(input_uri: str, allow_incomplete: bool = False) -> str:
    """The caption records of INPUT: a curation, import or features output (or that part of
    it), which must be finished (its _SUCCESS) unless `allow_incomplete`."""
    name = posixpath.basename(input_uri.rstrip("/"))
    part = next(
        (p for p in RECORD_FOLDERS if p == name or storage.exists(storage.join(input_uri, p))),
        RECORD_FOLDERS[0],
    )
    return storage.output_part(input_uri, part, allow_incomplete)


def plan_shards(uri: str, rows_per_shard: int) -> list[dict[str, Any]]:
    """Every row of every file of records under `uri` in exactly one shard, with a name
    stable across runs."""
    fs, root = storage.resolve(uri)
    shards = []
    for path in candidate_files(uri):
        with fs.open_input_file(path) as f:
            metadata = pq.ParquetFile(f).metadata
        stem = posixpath.relpath(path, root).removesuffix(".parquet").replace("/", "_")
        for group in range(metadata.num_row_groups):
            rows = metadata.row_group(group).num_rows
            for start in range(0, rows, rows_per_shard):
                shards.append(
                    {
                        "name": f"{stem}-{group:04d}-{start:07d}",
                        "path": path,
                        "row_group": group,
                        "start": start,
                        "stop": min(start + rows_per_shard, rows),
                    }
                )
    return shards


def read_shard(fs, shard: dict[str, Any]) -> list[dict[str, Any]]:
    """The caption records of a shard: `caption` (a candidate's alt_text when it has none)."""
    with fs.open_input_file(shard["path"]) as f:
        parquet = pq.ParquetFile(f)
        columns = [c for c in COLUMNS if c in parquet.schema_arrow.names]
        table = parquet.read_row_group(shard["row_group"], columns=columns)
    table = table.slice(shard["start"], shard["stop"] - shard["start"])
    if "crop" in table.column_names:  # features: one row per crop, one caption per record
        table = table.filter(pc.equal(table["crop"], 0))
    records = table.to_pylist()
    for record in records:
        record.setdefault("caption", record.get("alt_text"))
    return records


def text_rejection(
    caption: str | None, config: SpeechConfig, language: str | None = None
) -> Rejection | None:
    """Why a caption gets no clip before synthesis: `empty` (nothing speakable once
    espeak-ng's commands and control characters are removed, synthesis.speakable) or
    `too_long`, as the text filters say it, or in a language the voices do not speak (a
    record without `language` is English)."""
    if caption and not speakable(caption):
        caption = None
    if rejection := out_of_bounds(caption, config.max_chars, "no text to speak"):
        return rejection
    if language and language_code(language) not in LANGUAGES:
        detail = f"language {language[:20]!r}: the voices speak {', '.join(LANGUAGES)}"
        return Rejection("unsupported_language", detail)
    return None


def speak(record: dict[str, Any], config: SpeechConfig) -> dict[str, Any] | Rejection:
    """The clip record of a caption, or why there is none."""
    rejection = text_rejection(record["caption"], config, record.get("language"))
    if rejection:
        return rejection
    parameters = draw_parameters(record["id"], config.synthesis)
    try:
        rendered = render(record["caption"], parameters, config.synthesis.timeout_seconds)
    except SynthesisError as exc:
        return Rejection("synthesis_failed", str(exc)[:500])
    seconds = duration(rendered.samples)
    if seconds > config.max_seconds:
        return Rejection("too_long", f"{seconds:.1f} s > max_seconds={config.max_seconds}")
    return synthesized_clip(record, parameters, rendered)


def rejected_row(record: dict[str, Any], rejection: Rejection) -> dict[str, Any]:
    return {
        "id": record["id"],
        "stage": SYNTHESIZE.name,
        "reason": rejection.reason,
        "detail": rejection.detail,
        "image_url": record.get("image_url"),
        "page_url": None,
        "alt_text": record["caption"],
    }


def parquet_bytes(rows: list[dict[str, Any]], schema: pa.Schema) -> bytes:
    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), buffer)
    return buffer.getvalue()


def tar_bytes(clips: list[dict[str, Any]]) -> bytes:
    """A WebDataset shard of clips: the FLAC, the caption, and the rest as JSON."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for clip in clips:
            add_member(tar, f"{clip['id']}.flac", clip["audio"])
            add_member(tar, f"{clip['id']}.txt", clip["caption"].encode())
            meta = {k: v for k, v in clip.items() if k != "audio"}
            add_member(tar, f"{clip['id']}.json", json.dumps(meta).encode())
    return buffer.getvalue()


def synthesize_shard(
    shard: dict[str, Any], fs, output_uri: str, config: SpeechConfig, speak=speak
) -> dict:
    """Synthesize one shard and write its files, the done/ marker last; return its counts.
    A record whose `speak` raises is rejected as internal_error; the shard goes on."""
    started = time.monotonic()
    clips, rejected = [], []
    records = read_shard(fs, shard)
    for record in records:
        try:
            outcome = speak(record, config)
        except Exception as exc:  # noqa: BLE001 - one record's failure is that record's
            outcome = Rejection(INTERNAL_ERROR, describe(exc))
        if isinstance(outcome, Rejection):
            rejected.append(rejected_row(record, outcome))
        else:
            clips.append(outcome)
    name = shard["name"]
    if clips:
        storage.write_bytes(
            storage.join(output_uri, "clips", f"{name}.parquet"), parquet_bytes(clips, CLIP)
        )
        if config.webdataset:
            storage.write_bytes(storage.join(output_uri, "shards", f"{name}.tar"), tar_bytes(clips))
    if rejected:
        storage.write_bytes(
            storage.join(output_uri, "rejected", f"{name}.parquet"),
            parquet_bytes(rejected, REJECTED),
        )
    reasons: dict[str, int] = {}
    for row in rejected:
        reasons[row["reason"]] = reasons.get(row["reason"], 0) + 1
    counts = {
        "shard": name,
        "rows": shard["stop"] - shard["start"],
        "input": len(records),
        "clips": len(clips),
        "rejected": reasons,
        "audio_seconds": round(sum(c["duration"] for c in clips), 3),
        "seconds": round(time.monotonic() - started, 3),
    }
    storage.write_json(storage.join(output_uri, "done", f"{name}.json"), counts)
    return counts


def _synthesize_batch(
    batch: pa.Table, fs, output_uri: str, config: SpeechConfig, speak=speak
) -> pa.Table:
    done = [synthesize_shard(shard, fs, output_uri, config, speak) for shard in batch.to_pylist()]
    return pa.table({"shard": [d["shard"] for d in done]})


def start_or_resume(output_uri: str, plan: dict[str, Any]) -> set[str]:
    """The shards already done in OUTPUT when its plan is this one; otherwise OUTPUT is
    cleared and the plan written. `_SUCCESS` goes first either way. A shard done with a
    record that failed (internal_error) is not done: its files go, and it is done again."""
    storage.delete(storage.join(output_uri, SUCCESS))
    plan_uri = storage.join(output_uri, "plan.json")
    if storage.exists(plan_uri) and storage.read_json(plan_uri) == plan:
        done_uri = storage.join(output_uri, "done")
        fs, _ = storage.resolve(done_uri)
        done = set()
        for path in storage.list_files(done_uri) if storage.exists(done_uri) else []:
            name = posixpath.basename(path).removesuffix(".json")
            with fs.open_input_stream(path) as f:
                failed = json.loads(f.read())["rejected"].get(INTERNAL_ERROR)
            if not failed:
                done.add(name)
                continue
            for part, suffix in SHARD_FILES:  # done/ first: a crash here leaves it to redo
                storage.delete(storage.join(output_uri, part, f"{name}{suffix}"))
        return done
    for part in ("clips", "rejected", "shards", "done", "stats.json", "plan.json"):
        storage.delete(storage.join(output_uri, part))
    storage.write_json(plan_uri, plan)
    return set()


def synthesize(input_uri: str, output_uri: str, config: SpeechConfig) -> dict[str, Any]:
    """Run (or resume) the job's Ray Data pipeline; return what stats.json holds."""
    started = time.monotonic()
    check_engines(config.synthesis.voices)
    records = records_uri(input_uri, config.allow_incomplete)
    shards = plan_shards(records, config.clips_per_shard)
    plan = {
        "input": records,
        # New captions written into the same folder make a new plan: nothing is resumed.
        "input_files": storage.content_identity(records),
        "shards": [s["name"] for s in shards],
        "config": config.model_dump(
            mode="json",
            exclude={"examples", "experiment", "cpus_per_task", "allow_incomplete", "errors"},
        ),
    }
    done = start_or_resume(output_uri, plan)
    todo = [s for s in shards if s["name"] not in done]
    print(f"speech: {len(shards)} shards, {len(done)} already done, {len(todo)} to do", flush=True)
    if todo:
        fs, _ = storage.resolve(input_uri)
        ray.data.from_items(todo, override_num_blocks=len(todo)).map_batches(
            _synthesize_batch,
            fn_kwargs={"fs": fs, "output_uri": output_uri, "config": config, "speak": speak},
            batch_size=1,
            batch_format="pyarrow",
            num_cpus=config.cpus_per_task,
        ).materialize()
    stats = account(output_uri, shards)
    failed = stats["rejected"].get(SYNTHESIZE.name, {}).get(INTERNAL_ERROR, 0)
    if failed > config.errors.budget(stats["input"]):
        samples = {SYNTHESIZE.name: failed_ids(output_uri)}
        errors.check({SYNTHESIZE.name: failed}, stats["input"], config.errors, samples)
    stats["resumed_shards"] = len(done)
    stats["seconds"] = round(time.monotonic() - started, 2)
    storage.write_json(storage.join(output_uri, "stats.json"), stats)
    storage.write_json(
        storage.join(output_uri, SUCCESS), {"input": stats["input"], "clips": stats["kept"]}
    )
    return stats


def account(output_uri: str, shards: list[dict[str, Any]]) -> dict[str, Any]:
    """Stats from every shard's counts, checked against the planned rows and the files."""
    counts = [
        storage.read_json(storage.join(output_uri, "done", f"{s['name']}.json")) for s in shards
    ]
    if sum(c["rows"] for c in counts) != sum(s["stop"] - s["start"] for s in shards):
        raise funnel.AccountingError("the shards' counts do not cover the planned rows")
    rejected: dict[str, int] = {}
    for c in counts:
        for reason, n in c["rejected"].items():
            rejected[reason] = rejected.get(reason, 0) + n
    records, clips = sum(c["input"] for c in counts), sum(c["clips"] for c in counts)
    stats = funnel.build(
        records, clips, {SYNTHESIZE.name: rejected} if rejected else {}, (SYNTHESIZE.name,)
    )
    on_disk = {
        "clips": storage.written_rows(storage.join(output_uri, "clips")),
        "rejected": storage.written_rows(storage.join(output_uri, "rejected")),
    }
    if on_disk != {"clips": clips, "rejected": records - clips}:
        raise funnel.AccountingError(f"written {on_disk}, expected {clips} clips")
    audio = sum(c["audio_seconds"] for c in counts)
    work = sum(c["seconds"] for c in counts)
    stats["audio"] = {
        "hours": round(audio / 3600, 4),
        "mean_seconds": round(audio / max(clips, 1), 3),
        # Seconds of work per second of audio, summed over the tasks (one core each).
        "real_time_factor": round(work / max(audio, 1e-9), 4),
        "clips_per_task_second": round(clips / max(work, 1e-9), 2),
    }
    stats["parameters"] = parameter_statistics(output_uri) if clips else {}
    return stats


def failed_ids(output_uri: str, n: int = 3) -> list[str]:
    """The ids of up to `n` records rejected as internal_error, for the error line."""
    fs, _ = storage.resolve(output_uri)
    ids: list[str] = []
    for path in storage.list_files(storage.join(output_uri, "rejected")):
        with fs.open_input_file(path) as f:
            table = pq.read_table(f, columns=["id", "reason"])
        ids += [i for i, r in zip(*(table[c].to_pylist() for c in ("id", "reason")))
                if r == INTERNAL_ERROR]  # fmt: skip
        if len(ids) >= n:
            break
    return ids[:n]


def parameter_statistics(output_uri: str) -> dict[str, Any]:
    """What was drawn, over all clips: clips per engine, voices used, and mean/sd/min/max of
    rate, pitch, gain."""
    fs, _ = storage.resolve(output_uri)
    tables = []
    for path in storage.list_files(storage.join(output_uri, "clips")):
        with fs.open_input_file(path) as f:
            tables.append(pq.read_table(f, columns=["source", "voice", "rate", "pitch", "gain"]))
    table = pa.concat_tables(tables)
    engines = table["source"].value_counts().to_pylist()
    out: dict[str, Any] = {
        "engines": {e["values"]: e["counts"] for e in sorted(engines, key=lambda e: e["values"])},
        "voices": len(set(zip(table["source"].to_pylist(), table["voice"].to_pylist()))),
    }
    for name in ("rate", "pitch", "gain"):
        values = table[name].to_numpy()
        out[name] = {
            "mean": round(float(values.mean()), 4),
            "sd": round(float(values.std()), 4),
            "min": round(float(values.min()), 4),
            "max": round(float(values.max()), 4),
        }
    return out


def example_clips(output_uri: str, n: int) -> list[dict[str, Any]]:
    """The first `n` clips, in shard order (a few, for people to listen to)."""
    clips_uri = storage.join(output_uri, "clips")
    if n <= 0 or not storage.exists(clips_uri):
        return []
    fs, _ = storage.resolve(clips_uri)
    examples: list[dict[str, Any]] = []
    for path in storage.list_files(clips_uri):
        with fs.open_input_file(path) as f:
            examples.extend(pq.read_table(f).slice(0, n - len(examples)).to_pylist())
        if len(examples) == n:
            break
    return examples


def log_to_mlflow(stats: dict[str, Any], output_uri: str, config: SpeechConfig) -> None:
    """The funnel as metrics and funnel.txt, stats.json, and example clips as FLAC files
    (examples/<clip id>.flac beside examples/<clip id>.json with its parameters)."""
    metrics = {
        "input": stats["input"],
        "clips": stats["kept"],
        "resumed_shards": stats["resumed_shards"],
    }
    for reason, n in stats["rejected"].get(SYNTHESIZE.name, {}).items():
        metrics[tracking.metric_key("rejected", SYNTHESIZE.name, reason)] = n
    metrics.update({f"audio.{k}": v for k, v in stats["audio"].items()})
    metrics["seconds"] = stats["seconds"]
    mlflow.log_metrics(metrics)
    mlflow.log_dict(stats, "stats.json")
    mlflow.log_text(funnel.render(stats), "funnel.txt")
    with tempfile.TemporaryDirectory() as tmp:
        for clip in example_clips(output_uri, config.examples):
            (Path(tmp) / f"{clip['id']}.flac").write_bytes(clip["audio"])
            meta = {k: v for k, v in clip.items() if k != "audio"}
            (Path(tmp) / f"{clip['id']}.json").write_text(json.dumps(meta, indent=2))
        mlflow.log_artifacts(tmp, artifact_path="examples")


def run(input_uri: str, output_uri: str, config: SpeechConfig) -> tuple[dict[str, Any], str]:
    """The speech synthesis job: one MLflow run around the pipeline. Returns (stats, run id)."""
    with tracking.start_run(config.experiment, job="synthesize_speech") as active:
        tracking.log_config(config)
        tracking.log_params({"input_uri": input_uri, "output_uri": output_uri})
        stats = synthesize(input_uri, output_uri, config)
        lineage.log_read(input_uri)
        lineage.log_written(output_uri, part="clips")  # the folder may hold others
        log_to_mlflow(stats, output_uri, config)
        return stats, active.info.run_id
