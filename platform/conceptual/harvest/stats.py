"""A harvest's funnel: files, records and images, each counted once with its reason, from the
counts harvest_archive keeps (summed over files); checked so that every record and every
image is accounted for; its text for terminals and its metrics for MLflow."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from conceptual.funnel import AccountingError
from conceptual.harvest.pages import FILE_REASONS, IMAGE_REASONS, RECORD_REASONS


def build(counts: Mapping[str, int]) -> dict[str, Any]:
    """stats.json's funnel from the summed counts (`candidates`: the rows written). Raises
    AccountingError when a record or an image is counted twice or not at all."""
    counts = Counter(counts)
    stats = {
        "files": {
            "read": counts["files"],
            "warc": counts["format.warc"],
            "wat": counts["format.wat"],
            "unreadable": _reasons(counts, FILE_REASONS),
        },
        "records": {
            "read": counts["records"],
            "html_pages": counts["html_pages"],
            "skipped": _reasons(counts, RECORD_REASONS),
        },
        "images": {
            "seen": counts["images_seen"],
            "harvested": counts["candidates"],
            "not_harvested": _reasons(counts, IMAGE_REASONS),
        },
    }
    records, images = stats["records"], stats["images"]
    if records["read"] != records["html_pages"] + sum(records["skipped"].values()):
        raise AccountingError(f"records do not add up: {records}")
    if images["seen"] != images["harvested"] + sum(images["not_harvested"].values()):
        raise AccountingError(f"images do not add up: {images}")
    return stats


def _reasons(counts: Counter, reasons: tuple[str, ...]) -> dict[str, int]:
    """The reasons that counted something, most first (a stable order for ties)."""
    found = [(reason, counts[reason]) for reason in reasons if counts[reason]]
    return dict(sorted(found, key=lambda pair: -pair[1]))


def render(stats: Mapping[str, Any]) -> str:
    """The funnel as lines for a terminal: what was read, and where each part went."""
    files, records, images = stats["files"], stats["records"], stats["images"]
    formats = f"{files['warc']} WARC, {files['wat']} WAT"
    lines = [f"{'files read':<30}{files['read']:>10}  ({formats})"]
    lines += [f"    {reason:<26}{n:>10}" for reason, n in files["unreadable"].items()]
    lines.append(f"{'records read':<30}{records['read']:>10}")
    lines += [f"    {reason:<26}{n:>10}" for reason, n in records["skipped"].items()]
    lines.append(f"{'html pages':<30}{records['html_pages']:>10}")
    lines.append(f"{'images seen':<30}{images['seen']:>10}")
    lines += [f"    {reason:<26}{n:>10}" for reason, n in images["not_harvested"].items()]
    share = 100 * images["harvested"] / max(images["seen"], 1)
    lines.append(f"{'candidates harvested':<30}{images['harvested']:>10}  ({share:.1f}% of images)")
    return "\n".join(lines)


def metrics(stats: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """The funnel's counts as MLflow metrics (`records.read`, `images.not_harvested.no_alt`,
    ...), each under `prefix` when given (a curation's `harvest.`)."""
    flat: dict[str, float] = {}

    def walk(value: Any, key: str) -> None:
        if isinstance(value, Mapping):
            for name, inner in value.items():
                walk(inner, f"{key}.{name}" if key else name)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            flat[prefix + key] = value

    for part in ("files", "records", "images"):
        walk(stats[part], part)
    return flat
