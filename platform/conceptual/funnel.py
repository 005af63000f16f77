"""The funnel of a curation run: how many candidates entered and left each stage, and why
the rest were dropped; checked so that `input == kept + all rejections` always holds; its
text, plot and sample tables, and its counts as MLflow metrics."""

from __future__ import annotations

import math
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import mlflow
import pyarrow as pa

from conceptual import tracking


class AccountingError(RuntimeError):
    """Candidates appeared or vanished between stages: a bug, never a result."""


def build(
    input_count: int, kept: int, rejected: Mapping[str, Mapping[str, int]], stages: Sequence[str]
) -> dict[str, Any]:
    """`{"input", "kept", "rejected": {stage: {reason: n}}, "funnel": [...]}` in stage order."""
    unknown = set(rejected) - set(stages)
    if unknown:
        raise AccountingError(
            f"rejections at unknown stages {sorted(unknown)}; stages are {list(stages)}"
        )
    total_rejected = sum(sum(reasons.values()) for reasons in rejected.values())
    if input_count != kept + total_rejected:
        raise AccountingError(f"input {input_count} != kept {kept} + rejected {total_rejected}")
    funnel, entering = [], input_count
    for stage in stages:
        dropped = sum(rejected.get(stage, {}).values())
        funnel.append(
            {
                "stage": stage,
                "entering": entering,
                "rejected": dropped,
                "leaving": entering - dropped,
            }
        )
        entering -= dropped
    return {
        "input": input_count,
        "kept": kept,
        "rejected": {
            s: dict(sorted(rejected[s].items(), key=lambda kv: -kv[1]))
            for s in stages
            if s in rejected
        },
        "funnel": funnel,
    }


def render(stats: Mapping[str, Any], width: int = 40) -> str:
    """A plain-text funnel for terminals and logs."""
    total = max(stats["input"], 1)
    lines = [f"{'stage':<18}{'entering':>10}{'rejected':>10}{'leaving':>10}"]
    for row in stats["funnel"]:
        bar = "#" * round(width * row["leaving"] / total)
        lines.append(
            f"{row['stage']:<18}{row['entering']:>10}{row['rejected']:>10}{row['leaving']:>10}  {bar}"
        )
        for reason, count in stats["rejected"].get(row["stage"], {}).items():
            lines.append(f"    {reason:<26}{count:>10}")
    lines.append(f"kept {stats['kept']} of {stats['input']} ({100 * stats['kept'] / total:.1f}%)")
    return "\n".join(lines)


def plot(stats: Mapping[str, Any], path: str | Path) -> None:
    """A bar per stage (candidates leaving it) and a bar per rejection reason."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    reasons = [
        (f"{stage}: {reason}", n)
        for stage, rs in stats["rejected"].items()
        for reason, n in rs.items()
    ]
    fig, (top, bottom) = plt.subplots(
        2,
        1,
        figsize=(9, 3 + 0.28 * (len(stats["funnel"]) + len(reasons))),
        gridspec_kw={"height_ratios": [len(stats["funnel"]) + 1, max(len(reasons), 1)]},
    )
    stages = [row["stage"] for row in stats["funnel"]]
    top.barh(
        ["input", *stages][::-1],
        [stats["input"], *(r["leaving"] for r in stats["funnel"])][::-1],
        color="#4c72b0",
    )
    top.set_title(f"Curation funnel: {stats['kept']} kept of {stats['input']}")
    top.set_xlabel("candidates left after the stage")
    if reasons:
        labels, counts = zip(*sorted(reasons, key=lambda kv: kv[1]))
        bottom.barh(labels, counts, color="#dd8452")
    bottom.set_xlabel("candidates rejected, by stage and reason")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_kept_samples(records: Sequence[Mapping[str, Any]], path: str | Path, n: int = 12) -> bool:
    """A grid of kept images, each titled with its caption and the labels that confirmed
    it, so a run's output can be judged by eye. False when no record has an image. An
    image that does not decode is left out: a text-only curation (with_images=false) keeps
    the images its input brought (a WebDataset shard's) unchecked, and the run's end must
    not fail on one."""
    from conceptual.plots import image_grid

    shown = [r for r in records if r.get("image") and _decodes(r["image"])][:n]
    if not shown:
        return False
    items = []
    for record in shown:
        labels = ", ".join(label["name"] for label in record.get("labels", [])[:2])
        items.append((record["image"], record["caption"] + (f"\n[{labels}]" if labels else "")))
    image_grid(items).savefig(path, dpi=100)
    return True


def _decodes(data: bytes) -> bool:
    """Whether an image decodes as image_grid draws it (a thumbnail's draft)."""
    import io

    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as image:
            image.draft("RGB", (256, 256))
            image.convert("RGB")
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError):
        return False
    return True


def tally(counts: pa.Table) -> dict[str, dict[str, int]]:
    """{kind: {key: n}} from (kind, key, n) partial counts (of every batch of a dataset)."""
    combined = counts.group_by(["kind", "key"]).aggregate([("n", "sum")])
    result: dict[str, dict[str, int]] = {}
    for kind, key, n in zip(*(combined[c].to_pylist() for c in ("kind", "key", "n_sum"))):
        result.setdefault(kind, {})[key] = n
    return result


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


def caption_statistics(tallies: Mapping[str, Mapping[str, int]]) -> dict[str, Any]:
    """stats.json's `captions` (all curated records) and `captions_by_split` (the paper's
    Table 3 for each split: examples, unique tokens, tokens per caption mean, std and median)
    from the tallies of rows.caption_tally."""
    lengths: dict[str, dict[int, int]] = {}
    vocabulary: dict[str, int] = {}
    for key, n in tallies.get("split_length", {}).items():
        split, length = key.split("\t")
        lengths.setdefault(split, {})[int(length)] = n
    for key in tallies.get("split_token", {}):
        split = key.split("\t", 1)[0]
        vocabulary[split] = vocabulary.get(split, 0) + 1
    by_split = {}
    for split in sorted(lengths):
        counts = length_statistics(lengths[split])
        by_split[split or "none"] = {
            "examples": counts.pop("count"),
            "unique_tokens": vocabulary.get(split, 0),
            **counts,
        }
    overall = {int(k): n for k, n in tallies.get("length", {}).items()}
    return {
        "captions": {
            **length_statistics(overall),
            "vocabulary_size": len(tallies.get("token", {})),
        },
        "captions_by_split": by_split,
    }


def without_samples(stats: Mapping[str, Any]) -> dict[str, Any]:
    """What stats.json holds: everything but the sample records (those go to MLflow)."""
    return {k: v for k, v in stats.items() if k != "samples"}


def log_to_mlflow(stats: Mapping[str, Any], input_uri: str, output_uri: str) -> None:
    """Into the active MLflow run: the funnel's counts as metrics; stats, the funnel plot
    and the sample tables as artifacts."""
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
    for split, table in stats.get("captions_by_split", {}).items():
        metrics.update({tracking.metric_key("captions", split, k): v for k, v in table.items()})
    metrics.update({f"seconds.{k}": v for k, v in stats["seconds_by_phase"].items()})
    mlflow.log_metrics(metrics)
    tracking.log_params({"input_uri": input_uri, "output_uri": output_uri})
    mlflow.log_dict(without_samples(stats), "stats.json")
    mlflow.log_text(render(stats), "funnel.txt")
    with tempfile.TemporaryDirectory() as tmp:
        plot_path = Path(tmp) / "funnel.png"
        plot(stats, plot_path)
        mlflow.log_artifact(str(plot_path))
        grid_path = Path(tmp) / "kept_images.png"
        if plot_kept_samples(stats["samples"]["kept"], grid_path):
            mlflow.log_artifact(str(grid_path), artifact_path="samples")
    kept = stats["samples"]["kept"]
    mlflow.log_table(
        {
            "alt_text": [r["alt_text"] for r in kept],
            "caption": [r["caption"] for r in kept],
            "entities": [
                ", ".join(f"{e['text']}->{e['replacement'] or '-'}" for e in r["entities"])
                for r in kept
            ],
            "labels": [", ".join(label["name"] for label in r["labels"]) for r in kept],
            "matched": [", ".join(r["matched"]) for r in kept],
        },
        artifact_file="samples/kept.json",
    )
    rejected = stats["samples"]["rejected"]
    mlflow.log_table(
        {key: [r[key] for r in rejected] for key in ("stage", "reason", "detail", "alt_text")},
        artifact_file="samples/rejected.json",
    )
