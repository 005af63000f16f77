"""The dataset card (README.md) of a published dataset, written from the run itself: the YAML
header and the sections of the Conceptual Captions card on the Hub, filled with what this
curation counted (its funnel from stats.json, or an import's import.json), what the
published records hold (splits, fields, an instance, the hypernymization figures), and
where it came from (the configuration, the platform version, the MLflow runs). The sections
and their prose are dataset_card.md.template's; this module fills in what the run knows.
Nothing is invented: what the run does not know (the license) is said to be missing."""

from __future__ import annotations

import json
import re
import string
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
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
# The card's sections and their prose, with ${placeholders} for what the run knows.
CARD = string.Template(Path(__file__).with_name("dataset_card.md.template").read_text())


@dataclass
class ConfigFiles:
    """One `datasets` config of a published folder: `load_dataset(FOLDER, name)` reads it."""

    name: str  # "default"; a labelled curation's "unlabeled" and "labeled", as the released
    directory: str  # its files' folder under the published one: data, data/labeled...
    columns: list[str]
    splits: dict[str, int]  # rows per Hub split
    files: dict[str, list[str]] = field(default_factory=dict)  # per split, under `directory`
    bytes: dict[str, int] = field(default_factory=dict)
    example: dict[str, Any] | None = None


# Values from the data and its reports (the `language` column, entity labels, a stats.json's
# stage and reason names, the source's path) are quoted as they are, never as Markdown: none
# may close a table cell or a code block, start a heading or bring in HTML.
# An underscore inside a word (`too_short`) cannot start or end emphasis: it stays as it is.
MARKDOWN = re.compile(r"[\\`*{}\[\]<>#!|~&$]|(?<![^\W_])_|_(?![^\W_])")
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
BACKTICKS = re.compile("`+")


def escaped(value: object) -> str:
    """`value` as Markdown text that shows it as it is, on one line: the characters Markdown
    reads are backslash-escaped, line breaks and other control characters become spaces."""
    return MARKDOWN.sub(r"\\\g<0>", CONTROL.sub(" ", str(value)))


def code(value: object) -> str:
    """`value` as inline code on one line, between more backticks than it holds in a row."""
    shown = CONTROL.sub(" ", str(value))
    ticks = "`" * (max(map(len, BACKTICKS.findall(shown)), default=0) + 1)
    pad = " " if shown[:1] == "`" or shown[-1:] == "`" else ""
    return f"{ticks}{pad}{shown}{pad}{ticks}"


def fenced(body: str, info: str) -> str:
    """A code block of `body`, its fence longer than any run of backticks in it."""
    ticks = "`" * max(3, max(map(len, BACKTICKS.findall(body)), default=0) + 1)
    return f"{ticks}{info}\n{body}\n{ticks}"


class HeaderDumper(yaml.SafeDumper):
    """safe_dump's YAML, with every string that holds a control, format or line-separator
    character double-quoted: there each is escaped (PyYAML's single quotes fold a NEL into
    a space, and keep U+2028 raw, a line break to some readers)."""


def _quoted(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    odd = any(unicodedata.category(c)[0] == "C" or unicodedata.category(c) in ("Zl", "Zp")
              for c in value)  # fmt: skip
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"' if odd else None)


HeaderDumper.add_representer(str, _quoted)


@dataclass
class Published:
    """What a publish wrote (conceptual.publishing), and what the card reports of the records
    themselves. The first config holds every record; `splits`, `columns` and the rest are
    its."""

    configs: list[ConfigFiles]
    languages: list[str]
    tsv: dict[str, Any] | None = None  # format=tsv: its files, rows and rows left out, by split
    # captions whose hypernymization replaced or removed something, and what by entity label
    hypernymized: int = 0
    entity_labels: Counter = field(default_factory=Counter)

    @property
    def splits(self) -> dict[str, int]:
        return self.configs[0].splits

    @property
    def columns(self) -> list[str]:
        return self.configs[0].columns

    @property
    def bytes(self) -> dict[str, int]:
        return self.configs[0].bytes

    @property
    def example(self) -> dict[str, Any] | None:
        return self.configs[0].example


@dataclass
class CardFacts:
    """Everything the card says, gathered by the publish job."""

    name: str
    source: str  # the curated output published, as strangers may read it (publishing.shown)
    published: Published
    license: str | None
    origin: dict[str, Any]  # lineage.origin: {"kind": "curation"|"import"|None, "report": ...}
    curation_config: str | None  # the curation run's config.yaml, when MLflow has it
    publish_config: str  # the publish job's own config (YAML)
    runs: dict[str, str | None] = field(default_factory=dict)  # {"curation": id, "publish": id}
    tracking_uri: str = ""
    harvest: dict[str, Any] | None = None  # lineage.harvest_behind: the harvest's stats.json


def size_category(n: int) -> str:
    return next((label for limit, label in SIZES if n < limit), "n>100M")


def features_of(columns: list[str]) -> list[dict[str, str]]:
    """A config's columns as the card's `dataset_info.features`."""
    features = []
    for column in columns:
        if column in ("labels", "MIDs"):
            features.append({"name": column, "sequence": "string"})
        elif column == "confidence_scores":
            features.append({"name": column, "sequence": "float64"})
        else:
            features.append({"name": column, "dtype": "image" if column == "image" else "string"})
    return features


def config_info(config: ConfigFiles) -> dict[str, Any]:
    splits = [
        {"name": s, "num_bytes": config.bytes.get(s, 0), "num_examples": n}
        for s, n in config.splits.items()
        if n
    ]
    return {
        "config_name": config.name,
        "features": features_of(config.columns),
        "splits": splits,
        "download_size": sum(config.bytes.values()),
    }


def config_entry(config: ConfigFiles, default: bool) -> dict[str, Any]:
    """A `configs` entry of the header: the config's files by split."""
    files = [
        {"split": s, "path": f"{config.directory}/{s}-*"} for s, n in config.splits.items() if n
    ]
    return {
        "config_name": config.name,
        **({"default": True} if default else {}),
        "data_files": files,
    }


def header(facts: CardFacts) -> dict[str, Any]:
    """The YAML header, as the Hub reads it: each config points at its folder by split, the
    first being what `load_dataset(FOLDER)` reads."""
    published = facts.published
    total = sum(published.splits.values())
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
    infos = [config_info(config) for config in published.configs]
    meta["dataset_info"] = infos[0] if len(infos) == 1 else infos
    several = len(published.configs) > 1
    meta["configs"] = [
        config_entry(config, default=several and index == 0)
        for index, config in enumerate(published.configs)
    ]
    return meta


def render(facts: CardFacts) -> str:
    """The card's text: the YAML header, then the template's sections, filled in."""
    published = facts.published
    return CARD.substitute(
        header=yaml.dump(header(facts), Dumper=HeaderDumper, sort_keys=False, allow_unicode=True),
        name=escaped(facts.name),
        source=code(facts.source),
        version=__version__,
        runs=run_line(facts),
        summary=summary(facts),
        languages=", ".join(
            f"{escaped(LANGUAGE_NAMES.get(x, x))} ({code(x)})" for x in published.languages
        ),
        instance=instance(published),
        fields=data_fields(facts),
        splits=splits_table(published),
        configurations=configurations(published),
        released_tsv=released_tsv(published),
        funnel=funnel(facts.origin),
        sensitive=sensitive(facts),
        provenance=provenance(facts),
        license=license_text(facts),
    )


def summary(facts: CardFacts) -> str:
    published, origin = facts.published, facts.origin
    total = sum(published.splits.values())
    splits = ", ".join(f"{s} {n:,}" for s, n in published.splits.items() if n)
    made = {
        "curation": "curated from web images and their alt-texts by the pipeline of Conceptual "
        f"Captions (Sharma et al., 2018), rebuilt on Ray: {rules_that_ran(origin)}",
        "import": "imported from a folder of captioned images and kept as given (no filter "
        "or hypernymization ran on them)",
    }.get(origin.get("kind"), "curated records of the conceptual platform")
    images = (
        "The images are embedded (`image`)."
        if "image" in published.columns
        else "The images are named by their URLs; download them with img2dataset or any fetcher."
    )
    return f"{escaped(facts.name)} holds {total:,} image-caption pairs ({splits}), {made}. {images}"


def rules_that_ran(origin: dict[str, Any]) -> str:
    """The curation's rules that its stats.json says ran, by a stage of its funnel or by the
    flag it keeps of a rule on or off: a rule turned off is never named."""
    report = origin.get("report") or {}
    stages = {row.get("stage") for row in report.get("funnel") or () if isinstance(row, dict)}
    rules = [
        ("text filters", "text" in stages),
        ("the released captions kept as given", "released" in stages),
        ("image filters", "image" in stages),
        ("image&text overlap", (report.get("image") or {}).get("overlap")),
        ("hypernymization", "hypernymize" in stages),
        ("an entity-frequency rule", (report.get("entity_frequency") or {}).get("enabled")),
    ]
    ran = [name for name, on in rules if on]
    listed = ", ".join(ran[:-1]) + f" and {ran[-1]}" if len(ran) > 1 else "".join(ran)
    return listed or "no rule recorded"


def run_line(facts: CardFacts) -> str:
    parts = []
    if facts.runs.get("curation"):
        parts.append(f"`{facts.runs['curation']}` ({facts.origin.get('kind', 'curation')})")
    if facts.runs.get("publish"):
        parts.append(f"`{facts.runs['publish']}` (publish)")
    where = f" at `{facts.tracking_uri}`" if facts.tracking_uri and parts else ""
    return (", ".join(parts) or "none recorded") + where


def instance(published: Published) -> str:
    example = dict(published.example or {})
    if isinstance(example.get("image"), dict):  # bytes are no reading matter
        size = len(example["image"].get("bytes") or b"")
        example["image"] = f"<JPEG image, {size:,} bytes>"
    return fenced(json.dumps(example, indent=2, ensure_ascii=False, default=str), "json")


def data_fields(facts: CardFacts) -> str:
    hypernymized = HYPERNYMIZED if facts.origin.get("kind") == "curation" else ""
    return "\n".join(
        f"- `{c}`: {FIELDS[c]}{hypernymized * (c == 'caption')}" for c in facts.published.columns
    )


def splits_table(published: Published) -> str:
    names = [s for s, n in published.splits.items() if n]
    return "\n".join(
        [
            "| | " + " | ".join(names) + " |",
            "|---|" + "---|" * len(names),
            "| examples | " + " | ".join(f"{published.splits[s]:,}" for s in names) + " |",
        ]
    )


def released_tsv(published: Published) -> str:
    """Where format=tsv wrote the released layout, and what it left out."""
    if not published.tsv:
        return ""
    files = ", ".join(f"`{path}`" for path in published.tsv["files"].values())
    left = sum(published.tsv["left_out"].values())
    return (
        "\n\n### The released TSV\n\n"
        f"Each split also as the released files are: `caption<TAB>image_url`, no header "
        f"({files}); {left:,} records with a tab or line break in them are not in it."
    )


def configurations(published: Published) -> str:
    """The configs, where there are several: as the released card, `unlabeled` (the default)
    and `labeled`, the records with labels."""
    if len(published.configs) == 1:
        return ""
    lines = []
    for index, config in enumerate(published.configs):
        rows = ", ".join(f"{s} {n:,}" for s, n in config.splits.items() if n) or "no rows"
        default = " (the default)" if index == 0 else ""
        lines.append(
            f"- `{config.name}`{default}: {', '.join(f'`{c}`' for c in config.columns)}; "
            f'{rows}; `datasets.load_dataset(FOLDER, "{config.name}")`'
        )
    return "\n\n### Configurations\n\n" + "\n".join(lines)


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
            why = ", ".join(f"{escaped(reason)} {n:,}" for reason, n in reasons.items()) or "-"
            lines.append(
                f"| {escaped(row['stage'])} | {row['entering']:,} | {row['rejected']:,} "
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
            f"{escaped(r)} {n:,}" for r, n in report.get("skipped_by_reason", {}).items() if n
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
            "(by entity label: "
            + ", ".join(f"{escaped(k)} {n:,}" for k, n in labels.most_common())
            + ")."
        )
    else:
        text = "No caption had a name, date or place replaced (0 hypernymized)" + (
            ": an import keeps its captions as given." if facts.origin.get("kind") == "import"
            else "."
        )  # fmt: skip
    if facts.origin.get("kind") == "curation":
        honoured = opt_outs(facts, report)
    else:
        honoured = (
            "Opt-outs: the images came with the source, not from the web, so no server's "
            "`X-Robots-Tag` opt-out could be read."
        )
    return f"{text}\n\n{honoured}\n\nThe images may still show people: faces are not blurred."


def opt_outs(facts: CardFacts, report: dict[str, Any]) -> str:
    """The opt-outs a curation honoured: images of pages that opted out, not harvested (the
    harvest's funnel, when a harvest was its source), and images whose server opted out, not
    downloaded."""
    directives = opt_out_directives(facts.curation_config)
    harvested = ((facts.harvest or {}).get("images") or {}).get("not_harvested") or {}
    counted = []
    if n := harvested.get("opted_out"):
        counted.append(
            f"{n:,} images of pages whose robots meta or `X-Robots-Tag` opted out were not "
            "harvested"
        )
    if n := report.get("rejected", {}).get("fetch", {}).get("opted_out"):
        counted.append(f"{n:,} images whose server said `X-Robots-Tag` {directives} were not downloaded")  # fmt: skip
    if counted:
        return f"Opt-outs honoured: {'; '.join(counted)}."
    return (
        "Opt-outs honoured: the images of pages whose robots meta or `X-Robots-Tag` opts out "
        f"are not harvested, and images whose server says `X-Robots-Tag` {directives} are "
        "never downloaded; none did here."
    )


def opt_out_directives(config_yaml: str | None) -> str:
    try:
        fetch = (yaml.safe_load(config_yaml or "") or {}).get("fetch", {})
    except yaml.YAMLError:
        fetch = {}
    if fetch.get("respect_opt_out") is False:
        return "(not honoured: fetch.respect_opt_out was false)"
    directives = fetch.get("opt_out_directives") or ["noai", "noimageai", "noindex", "noimageindex"]
    return " or ".join(code(d) for d in directives)


def provenance(facts: CardFacts) -> str:
    lines = [
        f"- Platform: conceptual {__version__}",
        f"- Published from {code(facts.source)} with `python -m conceptual.jobs.publish_dataset`",
        f"- MLflow: {run_line(facts)}",
    ]
    if facts.curation_config:
        lines += config_block("The curation's configuration", facts.curation_config)
    elif facts.origin.get("kind") == "curation":
        lines.append("- The curation's configuration: its run's `config.yaml` (not found here)")
    lines += config_block("The publish configuration", facts.publish_config)
    return "\n".join(lines)


def config_block(title: str, text: str) -> list[str]:
    body = fenced(text.rstrip(), "yaml")
    return ["", "<details>", f"<summary>{title}</summary>", "", body, "", "</details>"]


def license_text(facts: CardFacts) -> str:
    if facts.license:
        return f"{code(facts.license)} (as set when publishing)."
    return (
        "**Not set.** The license must be set before this dataset is shared "
        "(`license=...` when publishing): the images belong to their owners, and the "
        "platform does not guess the terms."
    )
