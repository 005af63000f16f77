"""The dataset card (README.md) of a published dataset, written from the run itself: the YAML
header and the sections of the Conceptual Captions card on the Hub, filled with what this
curation counted (its funnel from stats.json, or an import's import.json), what the
published records hold (splits, fields, an instance, the hypernymization figures), and
where it came from (the configuration, the platform version, the MLflow runs). Nothing is
invented: what the run does not know (the license) is said to be missing."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import yaml

from conceptual import __version__

# The Hub's size categories, by number of examples.
SIZES = [(1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K")]
SIZES += [(1_000_000, "100K<n<1M"), (10_000_000, "1M<n<10M"), (100_000_000, "10M<n<100M")]
LANGUAGE_NAMES = {"en": "English", "zh": "Chinese"}
# Entity labels of the hypernymizer as the card groups them: what a reader asks about.
KINDS = {
    "names of people": ("PERSON", "PROPN", "NORP"),
    "dates and times": ("DATE", "TIME"),
    "places": ("GPE", "LOC", "FAC"),
    "organizations": ("ORG",),
}
FIELDS = {
    "image_url": "the URL of the image (for an imported folder, its path inside the folder)",
    "caption": "the caption: lowercase tokens joined by spaces",
    "labels": "the image's labels, best first: an image classifier's ImageNet classes, or the "
    "labels the source dataset carried",
    "MIDs": "each label's Freebase MID where the source gave one (null for a classifier's "
    "label, which is a WordNet synset)",
    "confidence_scores": "each label's confidence, in [0, 1]",
    "image": "the curated image (JPEG), a `datasets` Image feature",
}
HYPERNYMIZED = ", hypernymized (names, places and dates replaced by their kinds)"
CITATION = """@inproceedings{sharma2018conceptual,
  title = {Conceptual Captions: A Cleaned, Hypernymed, Image Alt-text Dataset For Automatic Image Captioning},
  author = {Sharma, Piyush and Ding, Nan and Goodman, Sebastian and Soricut, Radu},
  booktitle = {Proceedings of ACL},
  year = {2018},
}"""


@dataclass
class Published:
    """What a publish wrote (conceptual.publishing), and what the card reports of the records
    themselves."""

    splits: dict[str, int]
    files: dict[str, list[str]]  # per split, the file names under data/
    bytes: dict[str, int]
    columns: list[str]
    languages: list[str]
    example: dict[str, Any] | None
    # captions whose hypernymization replaced or removed something, and what by entity label
    hypernymized: int = 0
    entity_labels: Counter = field(default_factory=Counter)


@dataclass
class CardFacts:
    """Everything the card says, gathered by the publish job."""

    name: str
    source: str  # the curated output published
    published: Published
    license: str | None
    origin: dict[str, Any]  # lineage.origin: {"kind": "curation"|"import"|None, "report": ...}
    curation_config: str | None  # the curation run's config.yaml, when MLflow has it
    publish_config: str  # the publish job's own config (YAML)
    runs: dict[str, str | None] = field(default_factory=dict)  # {"curation": id, "publish": id}
    tracking_uri: str = ""


def size_category(n: int) -> str:
    return next((label for limit, label in SIZES if n < limit), "n>100M")


def header(facts: CardFacts) -> dict[str, Any]:
    """The YAML header, as the Hub reads it: its configs point at data/ by split."""
    published = facts.published
    total = sum(published.splits.values())
    features = []
    for column in published.columns:
        if column in ("labels", "MIDs"):
            features.append({"name": column, "sequence": "string"})
        elif column == "confidence_scores":
            features.append({"name": column, "sequence": "float64"})
        else:
            features.append({"name": column, "dtype": "image" if column == "image" else "string"})
    splits = [
        {"name": s, "num_bytes": published.bytes.get(s, 0), "num_examples": n}
        for s, n in published.splits.items()
        if n
    ]
    meta: dict[str, Any] = {
        "pretty_name": facts.name,
        "language": published.languages,
        "multilinguality": ["monolingual" if len(published.languages) == 1 else "multilingual"],
        "size_categories": [size_category(total)],
        "task_categories": ["image-to-text"],
        "task_ids": ["image-captioning"],
    }
    if facts.license:
        meta["license"] = facts.license
    meta["dataset_info"] = {
        "features": features,
        "splits": splits,
        "download_size": sum(published.bytes.values()),
    }
    meta["configs"] = [
        {
            "config_name": "default",
            "data_files": [{"split": s["name"], "path": f"data/{s['name']}-*"} for s in splits],
        }
    ]
    return meta


def render(facts: CardFacts) -> str:
    """The card's text: the YAML header, then the sections."""
    top = yaml.safe_dump(header(facts), sort_keys=False, allow_unicode=True)
    sections = [
        f"# Dataset Card for {facts.name}",
        description(facts),
        structure(facts),
        creation(facts),
        considerations(facts),
        additional(facts),
    ]
    return f"---\n{top}---\n\n" + "\n\n".join(sections) + "\n"


def description(facts: CardFacts) -> str:
    published, origin = facts.published, facts.origin
    total = sum(published.splits.values())
    splits = ", ".join(f"{s} {n:,}" for s, n in published.splits.items() if n)
    made = {
        "curation": "curated from web images and their alt-texts by the pipeline of Conceptual "
        "Captions (Sharma et al., 2018), rebuilt on Ray: text filters, image filters, "
        "image&text overlap, hypernymization and an entity-frequency rule",
        "import": "imported from a folder of captioned images and kept as given (no filter "
        "or hypernymization ran on them)",
    }.get(origin.get("kind"), "curated records of the conceptual platform")
    languages = ", ".join(f"{LANGUAGE_NAMES.get(x, x)} (`{x}`)" for x in published.languages)
    return "\n".join(
        [
            "## Dataset Description",
            "",
            f"- **Source:** `{facts.source}`",
            f"- **Published by:** the conceptual platform {__version__} (`publish_dataset`)",
            f"- **MLflow run:** {run_line(facts)}",
            "",
            "### Dataset Summary",
            "",
            f"{facts.name} holds {total:,} image-caption pairs ({splits}), {made}. "
            + (
                "The images are embedded (`image`)."
                if "image" in published.columns
                else "The images are named by their URLs; download them with img2dataset "
                "or any fetcher."
            ),
            "",
            "### Supported Tasks and Leaderboards",
            "",
            "- `image-captioning`: train a model to write a caption for an image; scored with "
            "CIDEr, BLEU, METEOR or ROUGE-L against the held-out captions.",
            "",
            "### Languages",
            "",
            f"The captions are in {languages}.",
        ]
    )


def run_line(facts: CardFacts) -> str:
    parts = []
    if facts.runs.get("curation"):
        parts.append(f"`{facts.runs['curation']}` ({facts.origin.get('kind', 'curation')})")
    if facts.runs.get("publish"):
        parts.append(f"`{facts.runs['publish']}` (publish)")
    where = f" at `{facts.tracking_uri}`" if facts.tracking_uri and parts else ""
    return (", ".join(parts) or "none recorded") + where


def structure(facts: CardFacts) -> str:
    published, curated = facts.published, facts.origin.get("kind") == "curation"
    example = dict(published.example or {})
    if isinstance(example.get("image"), dict):  # bytes are no reading matter
        size = len(example["image"].get("bytes") or b"")
        example["image"] = f"<JPEG image, {size:,} bytes>"
    names = [s for s, n in published.splits.items() if n]
    table = [
        "| | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
        "| examples | " + " | ".join(f"{published.splits[s]:,}" for s in names) + " |",
    ]
    return "\n".join(
        [
            "## Dataset Structure",
            "",
            "### Data Instances",
            "",
            "```json",
            json.dumps(example, indent=2, ensure_ascii=False, default=str),
            "```",
            "",
            "### Data Fields",
            "",
            *(
                f"- `{c}`: {FIELDS[c]}{HYPERNYMIZED * (c == 'caption' and curated)}"
                for c in published.columns
            ),
            "",
            "### Data Splits",
            "",
            *table,
            "",
            "Splits are decided by a stable hash of each image (or the source's own split), "
            "so all captions of an image share its split.",
        ]
    )


def creation(facts: CardFacts) -> str:
    return "\n".join(
        [
            "## Dataset Creation",
            "",
            "### Curation Rationale",
            "",
            "Web alt-texts are noisy and name people, places and dates no model can learn; "
            "the pipeline keeps the pairs whose text and image pass its filters and replaces "
            "such names by their kinds.",
            "",
            "### Source Data",
            "",
            "#### Initial Data Collection and Normalization",
            "",
            funnel(facts.origin),
            "",
            "#### Who are the source language producers?",
            "",
            "The authors of the web pages the images and alt-texts came from (for an import: "
            "the source dataset's annotators).",
            "",
            "### Annotations",
            "",
            "#### Annotation process",
            "",
            "Labels, where present, are an image classifier's classes (or those the source "
            "carried); no person annotated the pairs in this run.",
            "",
            "### Personal and Sensitive Information",
            "",
            sensitive(facts),
            "",
            "### Configuration and Provenance",
            "",
            provenance(facts),
        ]
    )


def funnel(origin: dict[str, Any]) -> str:
    """Each step of the curation funnel and each reason with its count (stats.json), or what
    an import took in and skipped (import.json)."""
    report = origin.get("report") or {}
    if origin.get("kind") == "curation":
        lines = [
            f"{report['input']:,} candidates entered the curation; {report['kept']:,} were kept.",
            "",
            "| stage | entering | rejected | leaving | reasons |",
            "|---|---|---|---|---|",
        ]
        for row in report.get("funnel", []):
            reasons = report.get("rejected", {}).get(row["stage"], {})
            why = ", ".join(f"{reason} {n:,}" for reason, n in reasons.items()) or "-"
            lines.append(
                f"| {row['stage']} | {row['entering']:,} | {row['rejected']:,} "
                f"| {row['leaving']:,} | {why} |"
            )
        if captions := report.get("captions"):
            lines += [
                "",
                f"Kept captions: {captions.get('tokens_mean', 0)} tokens on average "
                f"(median {captions.get('tokens_median', 0)}), a vocabulary of "
                f"{captions.get('vocabulary_size', 0):,} words.",
            ]
        return "\n".join(lines)
    if origin.get("kind") == "import":
        skipped = ", ".join(
            f"{r} {n:,}" for r, n in report.get("skipped_by_reason", {}).items() if n
        )
        return (
            f"Imported: {report.get('captions', 0):,} captions of "
            f"{report.get('input_captions', 0):,} in the source, for "
            f"{report.get('images', 0):,} images; skipped {report.get('skipped', 0):,} "
            f"({skipped or 'none'})."
        )
    return "No curation report (stats.json or import.json) was found beside the records."


def sensitive(facts: CardFacts) -> str:
    published, report = facts.published, facts.origin.get("report") or {}
    total = max(sum(published.splits.values()), 1)
    labels = published.entity_labels
    if published.hypernymized:
        kinds = []
        for kind, names in KINDS.items():
            if n := sum(labels.get(x, 0) for x in names):
                kinds.append(f"{kind} {n:,}")
        others = sum(labels.values()) - sum(labels.get(x, 0) for v in KINDS.values() for x in v)
        if others:
            kinds.append(f"other entities {others:,}")
        text = (
            f"Hypernymization replaced or removed names, dates or places in "
            f"{published.hypernymized:,} of {total:,} captions "
            f"({100 * published.hypernymized / total:.1f}%): {', '.join(kinds)} "
            "(by entity label: " + ", ".join(f"{k} {n:,}" for k, n in labels.most_common()) + ")."
        )
    else:
        text = "No caption had a name, date or place replaced (0 hypernymized)" + (
            ": an import keeps its captions as given." if facts.origin.get("kind") == "import"
            else "."
        )  # fmt: skip
    opted = report.get("rejected", {}).get("fetch", {}).get("opted_out")
    if facts.origin.get("kind") == "curation" and opted is not None:
        honoured = (
            f"Opt-outs honoured: {opted:,} images whose server said `X-Robots-Tag` "
            f"{opt_out_directives(facts.curation_config)} were not downloaded."
        )
    elif facts.origin.get("kind") == "curation":
        honoured = (
            f"Opt-outs honoured: images whose server said `X-Robots-Tag` "
            f"{opt_out_directives(facts.curation_config)} are never downloaded; none did here."
        )
    else:
        honoured = (
            "Opt-outs: the images came with the source, not from the web, so no server's "
            "`X-Robots-Tag` opt-out could be read."
        )
    return f"{text}\n\n{honoured}\n\nThe images may still show people: faces are not blurred."


def opt_out_directives(config_yaml: str | None) -> str:
    try:
        fetch = (yaml.safe_load(config_yaml or "") or {}).get("fetch", {})
    except yaml.YAMLError:
        fetch = {}
    if fetch.get("respect_opt_out") is False:
        return "(not honoured: fetch.respect_opt_out was false)"
    directives = fetch.get("opt_out_directives") or ["noai", "noimageai", "noindex", "noimageindex"]
    return " or ".join(f"`{d}`" for d in directives)


def provenance(facts: CardFacts) -> str:
    lines = [
        f"- Platform: conceptual {__version__}",
        f"- Published from `{facts.source}` with `python -m conceptual.jobs.publish_dataset`",
        f"- MLflow: {run_line(facts)}",
    ]
    if facts.curation_config:
        lines += config_block("The curation's configuration", facts.curation_config)
    elif facts.origin.get("kind") == "curation":
        lines.append("- The curation's configuration: its run's `config.yaml` (not found here)")
    lines += config_block("The publish configuration", facts.publish_config)
    return "\n".join(lines)


def config_block(title: str, text: str) -> list[str]:
    return ["", "<details>", f"<summary>{title}</summary>", "", "```yaml", text.rstrip(), "```"] + [
        "",
        "</details>",
    ]


def considerations(facts: CardFacts) -> str:
    return "\n".join(
        [
            "## Considerations for Using the Data",
            "",
            "### Other Known Limitations",
            "",
            "Image URLs rot: a URL may serve another image, or none, some time after "
            "curation. The captions describe the images as the web described them, with its "
            "biases.",
        ]
    )


def additional(facts: CardFacts) -> str:
    license_text = (
        f"`{facts.license}` (as set when publishing)."
        if facts.license
        else "**Not set.** The license must be set before this dataset is shared "
        "(`license=...` when publishing): the images belong to their owners, and the "
        "platform does not guess the terms."
    )
    return "\n".join(
        [
            "## Additional Information",
            "",
            "### Licensing Information",
            "",
            license_text,
            "",
            "### Citation Information",
            "",
            "The curation method:",
            "",
            "```bibtex",
            CITATION,
            "```",
        ]
    )
