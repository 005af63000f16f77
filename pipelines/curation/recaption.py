"""Recaptioning (BLIP's CapFilt, with the platform's own models): a captioner writes a caption
for each curated image, and the alignment scorer picks, per image, its web captions, the
synthetic one, or both.

    DATA/curated/*.parquet  ->  OUTPUT/curated/*.parquet   RECAPTIONED: records.CURATED with
                                                           `caption_source` (web|synthetic)
                                                           and `alignment_score`
                                OUTPUT/rejected/*.parquet  web captions the rule dropped
                                                           (`low_alignment`), records that
                                                           raised (`internal_error`)
                                OUTPUT/recaption.json, OUTPUT/_SUCCESS

The rule (CapFilt's filter, the scorer in its image-text matching head's place): each caption
of an image, web or synthetic, is kept when its score is at least `min_score`; an image none
of whose captions reaches it keeps its best-scoring one, so that recaptioning loses no image.
The captions scored are the curated ones (hypernymized, as the scorer was trained on) and the
captioner's, which are of that form. A synthetic caption is a record of its own, id
`<the image's first record's id>#synthetic`, with the image's fields and no entities. The
summary says how often each source was chosen and the scorer's margin: the synthetic
caption's score minus the image's best web caption's.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from conceptual import storage
from conceptual.errors import INTERNAL_ERROR
from conceptual.pipelines.dataflow import set_aside
from conceptual.pipelines.dataflow.readers import read_row_groups
from conceptual.records import CURATED, Stage, record_image_id, rejected_records
from conceptual.storage import SUCCESS

SUMMARY = "recaption.json"
LOW_ALIGNMENT = "low_alignment"
RECAPTION = Stage(
    "recaption", (LOW_ALIGNMENT, INTERNAL_ERROR), "min_score, errors.max_rate, errors.max_count"
)
WEB, SYNTHETIC = "web", "synthetic"
SOURCE = pa.field("caption_source", pa.string())
SCORE = pa.field("alignment_score", pa.float32())
RECAPTIONED = pa.schema(
    [*CURATED, *(field for field in (SOURCE, SCORE) if field.name not in CURATED.names)]
)
# OUTPUT/choices/: one row per image, what the rule saw and chose.
CHOICES = pa.schema(
    [
        ("image_id", pa.string()),
        ("synthetic_caption", pa.string()),
        ("synthetic_score", pa.float32()),
        ("best_web_score", pa.float32()),
        ("kept", pa.string()),  # web, synthetic or both
    ]
)
# Photos are decoded no smaller than the features job's input, which both models read.
IMAGE_SIDE = 256


class RecaptionConfig(set_aside.RewriteConfig):
    # The alignment scorer, as curation's alignment.scorer names one.
    scorer: str = "models:/contrastive@champion"
    min_score: float = 0.3  # a caption scoring at least this is kept (the scorer's cosine)
    beam: int | None = None  # None: the beam the captioner was evaluated at
    batch_size: int = 32  # images decoded, captioned and scored at once
    experiment: str = "recaption"


@dataclass(frozen=True)
class Choice:
    """What one image keeps: its web captions (indices among them) and the synthetic one."""

    web: tuple[int, ...]
    synthetic: bool


def choose(web: Sequence[float], synthetic: float, min_score: float) -> Choice:
    """CapFilt's rule for one image: every caption scoring `min_score` or more; else its best."""
    kept = tuple(i for i, score in enumerate(web) if score >= min_score)
    if kept or synthetic >= min_score:
        return Choice(kept, synthetic >= min_score)
    best = int(np.argmax(web)) if len(web) else None
    if best is None or synthetic > web[best]:
        return Choice((), True)
    return Choice((best,), False)


class RecaptionOperator:
    """The captioner and the scorer, loaded once per actor, over blocks that hold every record
    of their images (the input is sorted by image: `recaption`): each distinct image is
    decoded, captioned and scored once, `batch_size` images at a time."""

    def __init__(self, model_dir: str, config: RecaptionConfig, rejected: str, choices: str):
        from conceptual.models.inference import ImageCaptioner
        from conceptual.models.saving import SavedCaptioner
        from conceptual.pipelines.families import saved_form
        from conceptual.vision.alignment import VISION_FEATURES, load_scorer
        from conceptual.vision.cnn import FeatureExtractor

        kind = saved_form(model_dir, SavedCaptioner)  # any captioner family's
        self.captioner = ImageCaptioner(model_dir, beam=config.beam, kind=kind)
        self.scorer = load_scorer(config.scorer)
        # A scorer of the platform's reads the features job's pooled vector of each photo: the
        # captioner's own when its CNN is that one (the CNN runs once), else a second CNN's.
        self.extractor: FeatureExtractor | None = None
        if self.scorer.reads == "embedding":
            shared = self.captioner.extractor
            same = (shared.config.model, shared.image_size) == (
                VISION_FEATURES.model,
                VISION_FEATURES.image_size,
            )
            self.extractor = shared if same else FeatureExtractor()
        self.side = max(self.captioner.image_size, IMAGE_SIDE)
        self.config, self.rejected, self.choices = config, rejected, choices

    def __call__(self, block: pa.Table) -> pa.Table:
        from conceptual.models.inference import read_image

        rows = block.to_pylist()
        by_image: dict[str, list[int]] = {}
        for i, row in enumerate(rows):
            by_image.setdefault(row["image_id"], []).append(i)
        kept, dropped, choices = [], [], []
        keys, size = list(by_image), self.config.batch_size
        for start in range(0, len(keys), size):
            chunk = keys[start : start + size]
            images = [read_image(rows[by_image[k][0]]["image"], self.side) for k in chunk]
            extracted = self.captioner.features(images)
            synthetic = [best[0] for best in self.captioner.captions_of(extracted)]
            # One call scores the synthetic captions, then every web caption with its image.
            pairs = [(n, i) for n, key in enumerate(chunk) for i in by_image[key]]
            if self.extractor is None:
                seen = images
            elif self.extractor is self.captioner.extractor:
                seen = [pooled for pooled, _ in extracted]
            else:
                seen = self.extractor.pooled(images)
            which = list(range(len(chunk))) + [n for n, _ in pairs]
            scored = [seen[n] for n in which]
            if self.extractor is not None:
                scored = np.stack(scored)
            captions = synthetic + [rows[i]["caption"] for _, i in pairs]
            scores = self.scorer.score(scored, captions).tolist()
            web = dict(zip((i for _, i in pairs), scores[len(chunk) :]))
            for n, key in enumerate(chunk):
                records = by_image[key]
                choice = choose([web[i] for i in records], scores[n], self.config.min_score)
                kept += [
                    recaptioned(rows[i], WEB, web[i])
                    for j, i in enumerate(records)
                    if j in choice.web
                ]
                dropped += [(i, web[i]) for j, i in enumerate(records) if j not in choice.web]
                if choice.synthetic:
                    kept.append(synthetic_record(rows[records[0]], synthetic[n], scores[n]))
                best_web = max(web[i] for i in records)
                choices.append(chosen_row(key, synthetic[n], scores[n], best_web, choice))
        if dropped:
            low = block.take([i for i, _ in dropped])
            details = [
                f"alignment_score {s:.3f} < min_score {self.config.min_score}" for _, s in dropped
            ]
            set_aside.write_rejected([low_alignment(low, details)], self.rejected)
        set_aside.write_rejected([pa.Table.from_pylist(choices, schema=CHOICES)], self.choices)
        return pa.Table.from_pylist(kept, schema=RECAPTIONED)


def chosen_row(key: str, caption: str, score: float, best_web: float, choice: Choice) -> dict:
    kept = "both" if choice.web and choice.synthetic else SYNTHETIC if choice.synthetic else WEB
    return {
        "image_id": key,
        "synthetic_caption": caption,
        "synthetic_score": score,
        "best_web_score": best_web,
        "kept": kept,
    }


def with_image_ids(batch: pa.Table) -> pa.Table:
    """The records' image_id filled from their bytes where they carry none (an import's)."""
    ids = [
        record_image_id(stored, image)
        for stored, image in zip(batch["image_id"].to_pylist(), batch["image"].to_pylist())
    ]
    column = batch.schema.get_field_index("image_id")
    return batch.set_column(column, "image_id", pa.array(ids, pa.string()))


def recaptioned(record: dict[str, Any], source: str, score: float) -> dict[str, Any]:
    return {**record, SOURCE.name: source, SCORE.name: score}


def synthetic_record(first: dict[str, Any], caption: str, score: float) -> dict[str, Any]:
    """The image's synthetic caption as a record: its first record's image and fields."""
    record = {**first, "id": f"{first['id']}#synthetic", "caption": caption}
    record.update(entities=[], types=[], matched=[])
    return recaptioned(record, SYNTHETIC, score)


def low_alignment(rows: pa.Table, details: list[str]) -> pa.Table:
    """Web captions the rule dropped, as rejected rows."""
    schema = rejected_records(rows.schema)
    n = len(rows)
    given = {
        "stage": pa.array([RECAPTION.name] * n, pa.string()),
        "reason": pa.array([LOW_ALIGNMENT] * n, pa.string()),
        "detail": pa.array(details, pa.string()),
    }
    columns = [given[f.name] if f.name in given else rows[f.name] for f in schema]
    return pa.Table.from_arrays(columns, schema=schema)


def recaption(
    data_uri: str, output_uri: str, config: RecaptionConfig, model_uri: str
) -> dict[str, Any]:
    """Write DATA's records, recaptioned, under OUTPUT/curated; return the summary."""
    from conceptual.registry import resolve
    from conceptual.vision.alignment import load_scorer

    started = time.monotonic()
    # A captioner or a scorer that is not there fails before any work.
    model_dir = str(resolve(model_uri))
    load_scorer(config.scorer)
    data = storage.output_part(data_uri, "curated", config.allow_incomplete)
    fs, _ = storage.resolve(data)
    files = [f for f in storage.list_files(data) if f.endswith(".parquet")]
    check_images(fs, files, data)
    parts = {name: storage.join(output_uri, name) for name in ("curated", "rejected", "choices")}
    for uri in (storage.join(output_uri, SUCCESS), *parts.values()):
        storage.delete(uri)

    # Sorted by image, every record of an image is in one block (as map_groups relies on).
    rows = (
        read_row_groups(fs, files)
        .map_batches(with_image_ids, batch_format="pyarrow", num_cpus=0)
        .sort("image_id")
    )
    kwargs = {"model_dir": model_dir, "config": config}
    kwargs |= {"rejected": parts["rejected"], "choices": parts["choices"]}
    actors = set_aside.rewrite_guarded(
        rows, RecaptionOperator, kwargs, RECAPTION.name, parts["rejected"], parts["curated"],
        config, schema=RECAPTIONED, whole_blocks=True,
    )  # fmt: skip
    rejected, samples = set_aside.tally(parts["rejected"])
    records = storage.written_rows(data)
    set_aside.check(rejected, records, config.errors, samples)
    summary = {
        "data": data,
        "model": model_uri,
        "scorer": config.scorer,
        "min_score": config.min_score,
        "input": records,
        "written": storage.written_rows(parts["curated"]),
        **chosen_summary(parts["choices"]),
        "rejected": rejected,  # {stage: {reason: n}}
        "actors": actors,
        "seconds": round(time.monotonic() - started, 2),
    }
    storage.write_json(storage.join(output_uri, SUMMARY), summary)
    storage.write_json(storage.join(output_uri, SUCCESS), {"rows": summary["written"]})
    return summary


def chosen_summary(choices_uri: str) -> dict[str, Any]:
    """How often each source was kept, and the scorer's margin (synthetic - best web)."""
    fs, _ = storage.resolve(choices_uri)
    tables = []
    for path in storage.list_files(choices_uri) if storage.exists(choices_uri) else []:
        with fs.open_input_file(path) as f:
            tables.append(pq.read_table(f))
    table = pa.concat_tables(tables) if tables else CHOICES.empty_table()
    kept = table["kept"].to_pylist()
    margin = table["synthetic_score"].to_numpy(zero_copy_only=False) - table[
        "best_web_score"
    ].to_numpy(zero_copy_only=False)
    images = len(kept)
    with_synthetic = sum(k != WEB for k in kept)
    return {
        "images": images,
        "kept": {k: kept.count(k) for k in (WEB, SYNTHETIC, "both")},
        "synthetic_chosen_rate": round(with_synthetic / images, 4) if images else 0.0,
        "margin": {
            "mean": round(float(margin.mean()), 4) if images else None,
            "median": round(float(np.median(margin)), 4) if images else None,
            "synthetic_better_rate": round(float((margin > 0).mean()), 4) if images else None,
        },
    }


def check_images(fs, files: list[str], data: str) -> None:
    """Fail before any work on records without images to caption."""
    if not files:
        raise ValueError(f"no Parquet files under {data}")
    with fs.open_input_file(files[0]) as f:
        names = pq.ParquetFile(f).schema_arrow.names
    missing = [c for c in ("image", "image_id", "caption") if c not in names]
    if missing:
        raise ValueError(
            f"{data} holds no images to recaption (no {', '.join(missing)} column): "
            "recaption a curation with images (with_images=true) or an import of photos"
        )


def run(
    data_uri: str, output_uri: str, config: RecaptionConfig, model_uri: str
) -> tuple[dict[str, Any], str]:
    """The recaption job: one MLflow run around it. Returns (summary, run id)."""
    work = partial(recaption, data_uri, output_uri, config, model_uri)
    params = {"model": model_uri, "scorer": config.scorer}
    return set_aside.tracked_rewrite(RECAPTION, config, data_uri, output_uri, params, SUMMARY, work)
