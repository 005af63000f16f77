"""The harvest on Ray Data: web archives (WARC, WAT; local paths, globs, folders, s3://
prefixes) in, candidates out, one read task per file.

Each task streams its file's records through conceptual.harvest and writes the candidates
itself, a Parquet row group at a time, to OUTPUT/candidates/part-<file>.parquet; what it
returns is one row of counts. So the driver lists the files and sums the counts, and never
holds a candidate: a monthly Common Crawl (about 90,000 WAT files) is 90,000 tasks spread
over whatever the cluster has, each holding one record and one row group at a time. A task
retried after a lost worker writes its file again under the same name.

Output layout under OUTPUT (a path or s3:// URI):
    candidates/part-NNNNN.parquet   records.HARVESTED (a file without candidates writes none)
    stats.json                      the harvest's funnel (conceptual.harvest.stats)
    _SUCCESS                        written last; its absence means the output is incomplete
"""

from __future__ import annotations

import glob as globbing
import json
import logging
import posixpath
import time
import uuid
from collections import Counter
from collections.abc import Iterable
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import ray
import ray.data

from conceptual import lineage, storage, tracking
from conceptual.config import Config
from conceptual.funnel import AccountingError
from conceptual.harvest import HarvestRules, harvest_archive
from conceptual.harvest import stats as harvest_stats
from conceptual.records import HARVESTED
from conceptual.storage import SUCCESS, StorageError

log = logging.getLogger(__name__)

CANDIDATES = "candidates"
STREAM_BUFFER = 8 << 20  # bytes fetched per read of an archive (one request each on S3)
# Names that say a file is a web archive (`.warc`, `.wat`, gzip or not): what a folder or
# prefix is listed for. A file named on its own is read whatever its name, by its content.
ARCHIVE_SUFFIXES = (".warc", ".warc.gz", ".wat", ".wat.gz", ".arc.gz")


class HarvestConfig(Config):
    """The harvest job's settings (configs/harvest.yaml)."""

    harvest: HarvestRules = HarvestRules()
    # Candidates per Parquet row group: what a task holds before writing them.
    rows_per_group: int = 16384
    experiment: str = "harvest"


def archive_files(inputs: Iterable[str]) -> list[str]:
    """The archives the inputs name, as URIs, in order and each once: a file as it is; a
    folder or s3:// prefix, the files under it whose names say WARC or WAT; a glob
    (`crawl/*.warc.gz`, `s3://bucket/crawl/*.wat.gz`), the files it matches. StorageError
    for an input that names none."""
    found: dict[str, None] = {}
    for uri in inputs:
        matched = _matches(uri)
        if not matched:
            raise StorageError(f"no web archives (.warc, .wat, gzipped or not) at {uri}")
        found.update(dict.fromkeys(matched))
    return list(found)


def _matches(uri: str) -> list[str]:
    remote = storage.is_remote(uri)
    if globbing.has_magic(uri):  # the files it matches (storage.list_files)
        return [f"s3://{p}" if remote else p for p in storage.list_files(uri) if _is_data(p)]
    if not storage.exists(uri):
        return []
    fs, path = storage.resolve(uri)
    if fs.get_file_info(path).type.name == "File":
        return [uri]
    paths = [p for p in storage.list_files(uri) if _is_data(p) and _is_archive_name(p)]
    return [f"s3://{p}" if remote else p for p in paths]


def _is_data(path: str) -> bool:
    """Markers and hidden files (`_SUCCESS`, `.crc`) are not data."""
    return not posixpath.basename(path).startswith(("_", "."))


def _is_archive_name(path: str) -> bool:
    return path.lower().endswith(ARCHIVE_SUFFIXES)


def is_archive_input(uri: str) -> bool:
    """Whether an input names web archives rather than candidate files (curate's choice):
    an archive's name, or a glob or folder holding only archives."""
    try:
        files = _matches(uri)
        if files and not globbing.has_magic(uri) and storage.exists(uri):
            # a folder: only when it holds nothing else (candidate files beside archives
            # are a mistake to say, not to skip); _matches kept only the archives
            files = [p for p in storage.list_files(uri) if _is_data(p)]
    except (StorageError, OSError):
        return False
    return bool(files) and all(_is_archive_name(f) for f in files)


def _open_at(uri: str):
    """`open_at(offset)` for harvest_archive: the file's bytes as stored (no decompression by
    its name's suffix), from `offset`, read in STREAM_BUFFER pieces."""
    fs, path = storage.resolve(uri)

    def open_at(offset: int):
        if not offset:
            return fs.open_input_stream(path, compression=None, buffer_size=STREAM_BUFFER)
        stream = fs.open_input_file(path)  # only after a corrupt stretch: seek past it
        stream.seek(offset)
        return stream

    return open_at


def _harvest_files(
    batch: pa.Table, output: str, rules: HarvestRules, rows_per_group: int
) -> pa.Table:
    """One task: the archives of `batch` (one, as planned) harvested into Parquet files under
    `output`; a row of JSON counts for each."""
    fs, directory = storage.resolve(output)
    rows = []
    for item in batch.to_pylist():
        counts: Counter = Counter(files=1)
        target = posixpath.join(directory, f"part-{item['index']:05d}.parquet")
        try:
            candidates = harvest_archive(_open_at(item["uri"]), item["uri"], rules, counts)
            counts["candidates"] = write_parquet(candidates, fs, target, rows_per_group)
        except Exception as exc:  # no file ends the job: counted, and the job goes on
            if not isinstance(exc, OSError):  # not the file's storage: a bug, to be shown
                log.exception("%s could not be harvested", item["uri"])
            counts = Counter(files=1, unreadable_file=1)
            rows.append({"uri": item["uri"], "counts": json.dumps(counts), "error": str(exc)})
            continue
        rows.append({"uri": item["uri"], "counts": json.dumps(counts), "error": None})
    return pa.Table.from_pylist(
        rows,
        schema=pa.schema([("uri", pa.string()), ("counts", pa.string()), ("error", pa.string())]),
    )


def write_parquet(rows: Iterable[dict], fs, path: str, rows_per_group: int) -> int:
    """`rows` (HARVESTED dicts, streamed) as one Parquet file at `path`, a row group each
    `rows_per_group` rows, under a temporary name until complete (an S3 object appears only
    when complete anyway); no file when there are none. Returns the number of rows."""
    writer, written, pending = None, 0, []
    target = path if fs.type_name == "s3" else f"{path}.{uuid.uuid4().hex}.tmp"
    try:
        for row in rows:
            pending.append(row)
            if len(pending) >= rows_per_group:
                writer = writer or _writer(fs, target)
                writer.write_table(pa.Table.from_pylist(pending, schema=HARVESTED))
                written, pending = written + len(pending), []
        if pending:
            writer = writer or _writer(fs, target)
            writer.write_table(pa.Table.from_pylist(pending, schema=HARVESTED))
            written += len(pending)
    except BaseException:
        if writer is not None:
            writer.close()
            fs.delete_file(target)
        raise
    if writer is not None:
        writer.close()
        if target != path:
            fs.move(target, path)
    return written


def _writer(fs, path: str) -> pq.ParquetWriter:
    fs.create_dir(posixpath.dirname(path), recursive=True)
    return pq.ParquetWriter(fs.open_output_stream(path, compression=None), HARVESTED)


def harvest(
    inputs: list[str], output_uri: str, config: HarvestConfig, listed: bool = False
) -> dict[str, Any]:
    """Harvest the archives `inputs` name into OUTPUT (module docstring); returns the stats
    written to OUTPUT/stats.json. `listed`: the inputs are archives as they are (a crawl's
    list of files, conceptual.harvest.crawls), not looked up one by one first (90,000
    requests for a monthly crawl); one that cannot be read is counted as unreadable_file."""
    storage.refuse_overlap({"the output": output_uri}, {f"input {i}": i for i in inputs})
    started = time.monotonic()
    storage.delete(storage.join(output_uri, SUCCESS))
    for part in (CANDIDATES, "stats.json"):
        storage.delete(storage.join(output_uri, part))
    files = list(dict.fromkeys(inputs)) if listed else archive_files(inputs)
    items = [{"index": i, "uri": uri} for i, uri in enumerate(files)]
    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
    counted = ray.data.from_items(items, override_num_blocks=len(items)).map_batches(
        _harvest_files,
        fn_kwargs={
            "output": storage.join(output_uri, CANDIDATES),
            "rules": config.harvest,
            "rows_per_group": config.rows_per_group,
        },
        batch_size=1,
        batch_format="pyarrow",
        num_cpus=1,  # parsing is CPU work: one file per CPU at a time
        compute=ray.data.TaskPoolStrategy(size=min(cpus, len(items))),
    )
    totals: Counter = Counter()
    unreadable: dict[str, str] = {}
    for row in counted.iter_rows():  # one small row per file; the candidates stay in tasks
        totals.update(json.loads(row["counts"]))
        if row["error"]:
            unreadable[row["uri"]] = row["error"]
    stats = harvest_stats.build(totals)
    on_disk = storage.written_rows(storage.join(output_uri, CANDIDATES))
    if on_disk != stats["images"]["harvested"]:
        raise AccountingError(
            f"{on_disk} candidates written, {stats['images']['harvested']} counted"
        )
    if unreadable:
        stats["files"]["errors"] = dict(list(unreadable.items())[:20])  # the first, for people
    stats["seconds"] = round(time.monotonic() - started, 2)
    storage.write_json(storage.join(output_uri, "stats.json"), stats)
    storage.write_json(storage.join(output_uri, SUCCESS), {"candidates": on_disk})
    return stats


def run(
    inputs: list[str], output_uri: str, config: HarvestConfig, listed: bool = False
) -> tuple[dict[str, Any], str]:
    """The harvest job: one MLflow run around the harvest (`listed`: as harvest takes it).
    Returns (stats, run id)."""
    with tracking.start_run(config.experiment, job="harvest") as active:
        tracking.log_config(config)
        stats = harvest(inputs, output_uri, config, listed)
        stats["mlflow_run_id"] = active.info.run_id
        tracking.log_params({"input_uri": " ".join(inputs)[:6000], "output_uri": output_uri})
        log_harvest(stats)
        lineage.log_written(output_uri)  # so that lineage finds this run behind a curation
        return stats, active.info.run_id


def log_harvest(stats: dict[str, Any], prefix: str = "") -> None:
    """Into the active MLflow run: the harvest's funnel as metrics (under `prefix`, a
    curation's `harvest.`), and as JSON and text artifacts."""
    import mlflow

    mlflow.log_metrics(harvest_stats.metrics(stats, prefix))
    mlflow.log_dict(stats, f"{prefix}stats.json")
    mlflow.log_text(harvest_stats.render(stats), f"{prefix}funnel.txt")


HARVEST_FOLDER = "harvest"  # where a curation of web archives harvests them: OUTPUT/harvest/


def harvest_first(
    inputs: list[str], output_uri: str, rules: HarvestRules
) -> tuple[str, dict[str, Any] | None]:
    """A curation's input: (its candidates, None), or, when the inputs name web archives,
    (the candidates harvested from them into OUTPUT/harvest/, the harvest's stats)."""
    if not all(is_archive_input(uri) for uri in inputs):
        if len(inputs) > 1:
            raise StorageError(
                f"{len(inputs)} inputs given: a curation reads one folder or file of "
                "candidates, or any number of web archives (.warc, .wat), not a mix (a "
                "key=value right after --input's values is read as one: put --output there)"
            )
        return inputs[0], None
    folder = storage.join(output_uri, HARVEST_FOLDER)
    stats = harvest(inputs, folder, HarvestConfig(harvest=rules))
    print(f"  harvested {stats['images']['harvested']} candidates into {folder}", flush=True)
    if not stats["images"]["harvested"]:
        raise StorageError(
            f"the web archives gave no candidates to curate:\n{harvest_stats.render(stats)}"
        )
    return storage.join(folder, CANDIDATES), stats
