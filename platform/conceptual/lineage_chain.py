"""The chain behind a model or a dataset, from what conceptual.lineage recorded: the model
version, the run that trained it, the datasets it read (with their digests, checked against
the files as they are now), the runs that wrote those (features, curation, harvest), back to
the raw inputs and the report beside each (a curation's funnel, a harvest's, an import's
counts). Each dataset is shown by its own folder (OUTPUT/features, OUTPUT/curated).

A dataset whose files no longer give the digest a run recorded is `changed`: the model was
trained on other data than the folder now holds. One whose folder is gone, or not reachable
from here, is `missing`. The run that a report beside the data names (a curation's
stats.json) is its writer only where the digest that run recorded is the data's: otherwise
the data changed since, and the chain says so. What `render` prints comes from files and
runs anyone may have written, so control characters in it are shown escaped.
"""

from __future__ import annotations

import re
from typing import Any

from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from conceptual import lineage, registry, storage
from conceptual.tracking import configure, job_of

RUN_ID = re.compile(r"[0-9a-f]{32}")
REPORT_FILES = {kind: name for name, kind in lineage.REPORTS.items()} | {"harvest": "stats.json"}
# What the chain shows of the report beside a dataset: its counts, not its samples.
REPORT_KEYS = {
    # `harvest`: the funnel of web archives given to curate itself, harvested first
    # near_duplicates and decontaminate: what the evaluation jobs check (pipelines/evaluation/evaluation.py)
    "curation": (
        "input",
        "kept",
        "funnel",
        "rejected",
        "splits",
        "harvest",
        "mlflow_run_id",
        "near_duplicates",
        "decontaminate",
    ),
    "harvest": ("files", "records", "images", "mlflow_run_id"),
    "import": ("input_captions", "images", "captions", "skipped", "skipped_by_reason", "splits"),
    "features": ("records", "images", "rows", "model", "image_size", "curated"),
}


def trace(target: str, verify: bool = True) -> dict[str, Any]:
    """The chain behind `target`: a model URI (`models:/name@alias`, `models:/name/N`,
    `runs:/ID/path`), a run id, or a dataset's URI. `verify` recomputes each dataset's digest
    from its files (reading them all) to tell whether it changed since."""
    configure()
    tracer = Tracer(MlflowClient(), verify)
    if target.startswith("models:/"):
        version = registry.registered_version(target)
        if version is None:
            raise ValueError(f"{target}: no such registered model version")
        model = {
            "uri": target,
            "name": version.name,
            "version": str(version.version),
            "variant": version.tags.get("variant"),
            "aliases": list(getattr(version, "aliases", []) or []),
            "run_id": version.run_id,
        }
        return {"model": model, "run": tracer.run(version.run_id)}
    if target.startswith("runs:/"):
        run_id = target.removeprefix("runs:/").split("/", 1)[0]
        return {"model": {"uri": target, "run_id": run_id}, "run": tracer.run(run_id)}
    if RUN_ID.fullmatch(target):
        return {"run": tracer.run(target)}
    if not storage.exists(target):
        raise storage.StorageError(f"{target}: no such dataset (nor a model URI or run id)")
    described = lineage.describe(target)
    recorded = {
        "name": described.name,
        "uri": described.uri,
        "part": described.part,
        "digest": described.digest,
        "splits": described.splits,
        "read": {},
    }
    return {"dataset": tracer.dataset(recorded)}


class Tracer:
    """Follows runs and datasets, each run once (a run read by two others is shown twice
    only by its id the second time)."""

    def __init__(self, client: MlflowClient, verify: bool):
        self.client, self.verify = client, verify
        self.seen: set[str] = set()

    def run(self, run_id: str) -> dict[str, Any]:
        try:
            run = self.client.get_run(run_id)
        except MlflowException as exc:
            raise ValueError(f"run {run_id}: not in the tracking store ({exc.message})") from None
        node: dict[str, Any] = {
            "run_id": run_id,
            "name": run.info.run_name,
            "job": job_of(run),
            "experiment": self.experiment(run.info.experiment_id),
            "status": run.info.status,
        }
        if run_id in self.seen:
            return {**node, "shown_above": True}
        self.seen.add(run_id)
        node["reads"] = [self.dataset(item) for item in lineage.inputs_of(run)]
        return node

    def experiment(self, experiment_id: str) -> str:
        return self.client.get_experiment(experiment_id).name

    def dataset(self, recorded: dict[str, Any]) -> dict[str, Any]:
        """A dataset a run read (lineage.inputs_of), checked against its files now, with the
        run that wrote it and the report beside it."""
        node = dict(recorded)
        node["status"], node["current_digest"] = self.check(recorded)
        part = recorded.get("part")
        node["path"] = storage.join(recorded["uri"], part) if part else recorded["uri"]
        missing = node["status"] == "missing"
        origin = {} if missing else lineage.origin(recorded["uri"], part)
        if origin.get("kind"):
            report = origin["report"] or {}
            node["origin"] = {
                "kind": origin["kind"],
                **{k: report[k] for k in REPORT_KEYS[origin["kind"]] if k in report},
            }
        # The same content written at two places (two curations of one crawl): the run that
        # wrote it here, before one that wrote it elsewhere.
        writers = sorted(
            lineage.writer_runs(digest=recorded["digest"]),
            key=lambda r: r.data.tags.get(f"{lineage.WROTE}.uri") != recorded["uri"],
        )
        named = self.named_by_report(origin, recorded["digest"])
        if writers:
            node["written_by"] = self.run(writers[0].info.run_id)
        elif named and named["wrote_it"]:
            node["written_by"] = self.run(named["run_id"])
        else:
            node["written_by"] = None
            node["named_by_report"] = named
            # Runs that wrote at this place, other content: what the folder held before.
            node["other_writers"] = [
                {"run_id": r.info.run_id, "digest": r.data.tags.get(f"{lineage.WROTE}.digest")}
                for r in lineage.writer_runs(uri=recorded["uri"])
            ]
        return node

    def named_by_report(self, origin: dict[str, Any], digest: str) -> dict[str, Any] | None:
        """The run that the report beside a dataset names (a curation's stats.json), and
        whether it wrote this data: the digest it recorded writing is `digest`, or it
        recorded none (a run from before lineage tags, taken at the report's word). A run
        that recorded another digest did not: the data changed since."""
        if not (run_id := origin.get("run_id")):
            return None
        run_id = str(run_id)
        try:
            run = self.client.get_run(run_id) if RUN_ID.fullmatch(run_id) else None
        except MlflowException:
            run = None
        wrote = run.data.tags.get(f"{lineage.WROTE}.digest") if run else None
        return {
            "run_id": run_id,
            "report": REPORT_FILES[origin["kind"]],
            "found": run is not None,
            "digest": wrote,
            "wrote_it": run is not None and wrote in (None, digest),
        }

    def check(self, recorded: dict[str, Any]) -> tuple[str, str | None]:
        """("unchanged" | "changed" | "missing" | "unverified", the digest now)."""
        if not self.verify:
            return "unverified", None
        try:
            if not storage.exists(recorded["uri"]):
                return "missing", None
            now = lineage.describe(recorded["uri"], recorded.get("part")).digest
        except (storage.StorageError, OSError):
            return "missing", None
        return ("unchanged" if now == recorded["digest"] else "changed"), now


def render(chain: dict[str, Any]) -> str:
    """The chain for people: one line per model, run and dataset, indented by depth."""
    lines: list[str] = []
    if model := chain.get("model"):
        named = f"{model['name']} version {model['version']}" if model.get("name") else ""
        aliases = f" (@{', @'.join(model['aliases'])})" if model.get("aliases") else ""
        variant = f", variant {model['variant']}" if model.get("variant") else ""
        lines.append(f"model    {model['uri']}  {named}{aliases}{variant}".rstrip())
    if run := chain.get("run"):
        _run_lines(run, 0, lines, "trained by" if chain.get("model") else "run")
    if dataset := chain.get("dataset"):
        _dataset_lines(dataset, 0, lines)
    return "\n".join(printable(line) for line in lines)


# What a chain shows comes from files and runs anyone may have written (a stats.json's stage
# names, a run's name): control characters, terminal escapes among them, and bidirectional
# overrides are shown as escapes, never sent to the terminal.
UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    return UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape").decode(), text)


def _run_lines(run: dict[str, Any], depth: int, lines: list[str], label: str) -> None:
    pad = "  " * depth
    job = f"{run['job']} " if run.get("job") else ""
    lines.append(
        f"{pad}{label} run {run['run_id']}  {job}({run.get('name')}, experiment "
        f"{run.get('experiment')!r}, {str(run.get('status', '')).lower()})"
    )
    if run.get("shown_above"):
        lines.append(f"{pad}  (its inputs are shown above)")
        return
    if not run.get("reads"):
        lines.append(f"{pad}  read no dataset that lineage recorded")
    for dataset in run.get("reads", []):
        _dataset_lines(dataset, depth + 1, lines)


STATUS = {
    "unchanged": "unchanged",
    "changed": "CHANGED since: the files give digest {now}, not the one recorded",
    "missing": "MISSING: the folder is gone or not reachable from here",
    "unverified": "not verified (--no-verify)",
}


def _dataset_lines(dataset: dict[str, Any], depth: int, lines: list[str]) -> None:
    pad = "  " * depth
    status = STATUS[dataset["status"]].format(now=dataset.get("current_digest"))
    # Each dataset by its own folder: features written beside curated records share the
    # output folder, not the path.
    lines.append(f"{pad}read {dataset['path']}  digest {dataset['digest']}  {status}")
    splits = dataset.get("splits") or {}
    read = dataset.get("read") or {}
    if splits:
        shown = ", ".join(
            f"{split} {n:,}" + (f" ({read[split]})" if read.get(split) else "")
            for split, n in splits.items()
        )
        lines.append(f"{pad}  rows: {shown}")
    elif read.get("all"):
        lines.append(f"{pad}  read whole ({read['all']})")
    if origin := dataset.get("origin"):
        lines += [f"{pad}  {line}" for line in origin_lines(origin)]
    if dataset.get("written_by"):
        _run_lines(dataset["written_by"], depth + 1, lines, "written by")
        return
    others = dataset.get("other_writers") or []
    more = (
        f"; runs that wrote other content there: {', '.join(o['run_id'] for o in others)}"
        if others
        else ""
    )
    lines.append(f"{pad}  written by no run that lineage recorded{more}")
    if named := dataset.get("named_by_report"):
        why = (
            f"which wrote digest {named['digest']}: the data changed since that run wrote it"
            if named["found"]
            else "which is not in the tracking store"
        )
        lines.append(f"{pad}  {named['report']} names run {named['run_id']}, {why}")


def origin_lines(origin: dict[str, Any]) -> list[str]:
    """The report beside a dataset, whatever it holds: a count it lacks, or one that is no
    number, shows as `?`. A curation of web archives shows its harvest first, as it ran."""
    kind = origin["kind"]
    if kind == "harvest":
        return [harvest_line(origin)]
    if kind == "curation":
        first = [harvest_line(origin["harvest"])] if isinstance(origin.get("harvest"), dict) else []
        if "input" not in origin and "kept" not in origin:
            return [*first, "curation report (stats.json) without a curation funnel"]
        rows = origin.get("funnel")
        steps = ", ".join(
            f"{row.get('stage')} -{_count(row.get('rejected'))}"
            for row in (rows if isinstance(rows, list) else [])
            if isinstance(row, dict)
        )
        return [
            *first,
            f"curation funnel: {_count(origin.get('input'))} in, "
            f"{_count(origin.get('kept'))} kept ({steps})",
        ]
    if kind == "import":
        return [
            f"import: {_count(origin.get('captions', 0))} captions of "
            f"{_count(origin.get('input_captions', 0))} for {_count(origin.get('images', 0))} "
            f"images, {_count(origin.get('skipped', 0))} skipped"
        ]
    return [f"features: {_count(origin.get('rows', 0))} rows of {origin.get('curated')}"]


def harvest_line(stats: dict[str, Any]) -> str:
    """A harvest's funnel (conceptual.harvest.stats) on one line: records read and skipped by
    reason, HTML pages, images seen and not harvested by reason, candidates."""
    files, records, images = (
        part if isinstance(part := stats.get(name), dict) else {}
        for name in ("files", "records", "images")
    )
    return (
        f"harvest funnel: {_count(files.get('read'))} files, {_count(records.get('read'))} "
        f"records read{_reasons(records.get('skipped'))}, {_count(records.get('html_pages'))} "
        f"html pages, {_count(images.get('seen'))} images seen"
        f"{_reasons(images.get('not_harvested'))}, {_count(images.get('harvested'))} candidates"
    )


def _reasons(counts: Any) -> str:
    """` (reason -n, ...)` of a {reason: n} report, or nothing."""
    items = counts.items() if isinstance(counts, dict) else ()
    shown = ", ".join(f"{reason} -{_count(n)}" for reason, n in items)
    return f" ({shown})" if shown else ""


def _count(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else "?"
