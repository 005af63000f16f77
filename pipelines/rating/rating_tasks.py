"""Rating task sets (conceptual.rating.tasks) from what the platform made:

| kind | from a curated dataset (`--data`) | from a run (`--run`) |
|---|---|---|
| caption_quality | its captions (Conceptual Captions Table 2) | evaluate_captioner: the model's and the nearest-neighbour baseline's test captions (samples.json; Table 4) |
| retrieval | - | evaluate_retriever (rankings.json; run it with rankings=N for N per direction): `query_to_image`, a query and its top 5 images, its own image added when missing; or `image_to_query`, a photo and its top 5 captions, one of its own added when none is there |
| zh_caption | its Chinese captions: an item an image, with one caption of each source (MT system, native, human) | compare_fluency: an item a test image, with every approach's caption of it (captions.json); evaluate_captioner of a Chinese captioner: the model's and the baseline's |
| fluency_label | its machine translations (records with an English `original`), to grade fluent or not (the fluency paper's labels) | - |

Sampling is reproducible: the candidates come in a stable order and `seed` draws from them
(and the order a zh_caption item shows its captions in: conceptual.rating.tasks). `items`
counts items; for caption_quality from a run with a baseline it counts images, each with
both captions as two items.
Photos come from the curated data (a run's features name it in features.json), whole or
(`photo="crop"`) as the centre square the features job gave the model (Table 3's crop
condition).
"""

from __future__ import annotations

import functools
import random
from collections.abc import Iterable
from typing import Any

import mlflow
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from conceptual import lineage, storage, tracking
from conceptual.pipelines.features.features_data import features_summary
from conceptual.rating.tasks import (
    IMAGE_TO_QUERY,
    QUERY_TO_IMAGE,
    RESULTS_SHOWN,
    TaskSet,
    item_id,
    new_task_set,
    sample,
)
from conceptual.text.chinese import normalize

CURATED = "curated"
# What a rater is asked of a photo and its captions (the kind's question is of a query).
CAPTIONS_QUESTION = "Which of these captions describe the photo? Mark every caption that fits."
RUN_KINDS = {  # a run's stage -> the kinds of task it gives
    "evaluate_captioner": ("caption_quality", "zh_caption"),
    "evaluate_retriever": ("retrieval",),
    "compare_fluency": ("zh_caption",),
}


def curated_table(data_uri: str, columns: list[str], where: Any = None) -> pa.Table:
    """Columns of the curated records under `data_uri` (a folder of Parquet files), the
    rows matching `where`; a column the records lack is left out."""
    fs, _ = storage.resolve(data_uri)
    tables = []
    for path in storage.list_files(data_uri):
        if path.endswith(".parquet"):
            with fs.open_input_file(path) as f:
                names = pq.read_schema(f).names
                present = [c for c in columns if c in names]
                tables.append(pq.read_table(f, columns=present, filters=where))
    if not tables:
        raise storage.StorageError(f"no Parquet records under {data_uri}")
    return pa.concat_tables(tables, promote_options="default")


def photos(data_uris: Iterable[str], column: str, values: list[str]) -> dict[str, bytes]:
    """`column` value (`id` or `image_id`) -> the photo of a record with it, from the first
    curated data that holds it; ValueError naming what is missing."""
    data_uris = list(data_uris)
    if not data_uris:
        raise ValueError("no curated data to take the photos from is reachable from here")
    found: dict[str, bytes] = {}
    for uri in data_uris:
        wanted = [v for v in values if v not in found]
        if not wanted or not storage.exists(uri):
            continue
        table = curated_table(uri, [column, "image"], pc.field(column).isin(wanted))
        found.update(zip(table[column].to_pylist(), table["image"].to_pylist()))
    if missing := [v for v in values if not found.get(v)]:
        raise ValueError(
            f"{len(missing)} of {len(set(values))} photos are not in the curated data "
            f"({', '.join(data_uris)}): {missing[0]} ..."
        )
    return found


def from_data(kind: str, data_uri: str, items: int | None, rng: random.Random) -> list[dict]:
    """Items from a curated dataset (an import's or curation's output, or its curated/)."""
    folder = storage.output_part(data_uri, CURATED)
    columns = ["id", "caption", "image_id", "language", "source", "text", "original"]
    table = curated_table(folder, columns).sort_by("id").to_pylist()
    if kind == "zh_caption":
        images = chinese_captions(table, items, rng)
        if not images:
            raise ValueError(f"no {kind} candidates in {data_uri}")
        shown = photos([folder], "id", [rows[0]["id"] for rows in images])
        return [
            side_by_side(rows[0], {row["source"]: caption_of(row) for row in rows}, shown)
            for rows in images
        ]
    if kind == "caption_quality":
        chosen = sample(table, items, rng)
    elif kind == "fluency_label":  # translations only: the label is of a translation
        chosen = sample([row for row in table if row.get("original")], items, rng)
    else:
        raise ValueError(f"{kind} tasks come from a run (--run), not from a dataset")
    if not chosen:
        raise ValueError(f"no {kind} candidates in {data_uri}")
    shown = photos([folder], "id", [row["id"] for row in chosen])
    approach = "curated" if kind == "caption_quality" else None  # else the record's source
    return [
        caption_item(kind, approach or row["source"], caption_of(row), row, shown) for row in chosen
    ]


def caption_of(row: dict[str, Any]) -> str:
    """A curated record's caption as people read it: its text (a Chinese caption's,
    unsegmented) where it has one."""
    return row.get("text") or row["caption"]


def chinese_captions(
    records: list[dict], images: int | None, rng: random.Random
) -> list[list[dict]]:
    """For each sampled image, its first Chinese caption (by id) of each source."""
    by_image: dict[str, dict[str, dict]] = {}
    for row in records:
        if row.get("language") == "zh":
            by_image.setdefault(row["image_id"] or row["id"], {}).setdefault(row["source"], row)
    return [list(by_image[image].values()) for image in sample(sorted(by_image), images, rng)]


def side_by_side(
    row: dict[str, Any], captions: dict[str, str], shown: dict[str, bytes]
) -> dict[str, Any]:
    """A zh_caption item: the photo of `row` (its `id` a key of `shown`) and each
    approach's caption of it, in the approaches' order (new_task_set shuffles them)."""
    sentences = [{"approach": a, "text": normalize(text)} for a, text in captions.items()]
    return {
        "item_id": item_id(
            "zh_caption", row["id"], *(f"{s['approach']}:{s['text']}" for s in sentences)
        ),
        "approach": None,
        "text": None,
        "image": shown[row["id"]],
        "image_id": row.get("image_id"),
        "source_id": row["id"],
        "results": None,
        "sentences": sentences,
    }


def caption_item(
    kind: str, approach: str, text: str, row: dict[str, Any], shown: dict[str, bytes]
) -> dict[str, Any]:
    text = normalize(text) if kind == "fluency_label" else text
    return {
        "item_id": item_id(kind, approach, row["id"], text),
        "approach": approach,
        "text": text,
        "image": shown[row["id"]],
        "image_id": row.get("image_id"),
        "source_id": row["id"],
        "results": None,
        "sentences": None,
    }


def from_run(
    kind: str, run_id: str, items: int | None, rng: random.Random, direction: str = QUERY_TO_IMAGE
) -> tuple[list[dict], dict[str, Any]]:
    """Items from an evaluation or comparison run, and what the run says of itself."""
    run = source_run(run_id)
    stage = tracking.job_of(run) or ""
    if kind not in RUN_KINDS.get(stage, ()):
        fits = [k for k, kinds in RUN_KINDS.items() if kind in kinds]
        raise ValueError(f"run {run_id} is a {stage or 'run'} run: {kind} tasks come from {fits}")
    params = run.data.params
    feature_uris = [
        v for k, v in sorted(params.items()) if k == "features_uri" or k.startswith("references.")
    ]
    curated = [uri for uri in map(curated_of, feature_uris) if uri]
    if stage == "evaluate_retriever":
        rows, about = retrieval_items(run, items, rng, curated, direction)
        return rows, {**about, "curated": curated}
    if stage == "compare_fluency":
        captions = artifact(run_id, "captions.json")
        images = sample(sorted({k for by_key in captions.values() for k in by_key}), items, rng)
        shown = photos(curated, "image_id", images)
        rows = [
            side_by_side(
                {"id": key, "image_id": key},
                {approach: by_key[key] for approach, by_key in captions.items() if key in by_key},
                shown,
            )
            for key in images
        ]
        return rows, {"curated": curated}
    table = artifact(run_id, "samples.json")  # MLflow's table: columns and rows
    samples = pd.DataFrame(table["data"], columns=table["columns"]).sort_values("id")
    # approach -> its column: the model's captions, and the baseline's when it ran
    columns = {"model": "generated", **({"baseline": "baseline"} if "baseline" in samples else {})}
    chosen = sample(samples.to_dict("records"), items, rng)
    shown = photos(curated, "id", [row["id"] for row in chosen])
    if kind == "zh_caption":
        rows = [side_by_side(row, {a: row[c] for a, c in columns.items()}, shown) for row in chosen]
    else:
        rows = [
            caption_item(kind, a, row[c], row, shown) for a, c in columns.items() for row in chosen
        ]
    return rows, {"curated": curated}


def curated_of(features_uri: str) -> str | None:
    """The curated data a features output was made from (its features.json says), or None
    when that file is not reachable from here."""
    try:
        return features_summary(features_uri).get("curated")
    except (ValueError, OSError):
        return None


def source_run(run_id: str) -> Any:
    tracking.configure()
    try:
        return MlflowClient().get_run(run_id)
    except MlflowException:
        raise ValueError(f"no run {run_id!r} at {tracking.printable_tracking_uri()}") from None


def artifact(run_id: str, name: str) -> Any:
    """A JSON artifact the run logged; ValueError when it has none by that name."""
    try:
        return mlflow.artifacts.load_dict(f"runs:/{run_id}/{name}")
    except (MlflowException, OSError):
        raise ValueError(f"run {run_id} has no {name}") from None


def retrieval_items(
    run: Any, items: int | None, rng: random.Random, curated: list[str], direction: str
) -> tuple[list[dict], dict[str, Any]]:
    """Items of one direction of the run's rankings.json (query_to_image: a query and
    images; image_to_query: a photo and captions), each showing the top RESULTS_SHOWN and the
    right answer added when it is not among them, in a shuffled order (a rater cannot tell
    the ranks)."""
    rankings = artifact(run.info.run_id, "rankings.json")
    if direction not in rankings:
        raise ValueError(f"run {run.info.run_id} logged no {direction} rankings")
    make = image_to_query_items if direction == IMAGE_TO_QUERY else query_to_image_items
    rows = make(sample(rankings[direction], items, rng), rng, curated)
    modality = run.data.tags.get("modality", "text")
    metric = f"image_to_{modality}" if direction == IMAGE_TO_QUERY else f"{modality}_to_image"
    metrics = run.data.metrics
    automatic = {
        f"R@{k}": metrics.get(tracking.metric_key(f"{metric}.R@{k}")) for k in (1, RESULTS_SHOWN)
    }
    return rows, {"automatic": automatic, "modality": modality, "direction": direction}


def with_answer(ranked: list[Any], answer: Any) -> list[Any]:
    """The top RESULTS_SHOWN, then `answer` when it is not among them (None: nothing added)."""
    top = ranked[:RESULTS_SHOWN]
    return top + ([answer] if answer is not None and answer not in top else [])


def shown_results(shown: list[dict], rng: random.Random) -> list[dict]:
    """Results ranked 1..RESULTS_SHOWN (an added answer unranked), shuffled."""
    results = [
        {**result, "rank": rank if rank <= RESULTS_SHOWN else None}
        for rank, result in enumerate(shown, start=1)
    ]
    rng.shuffle(results)
    return results


def query_to_image_items(queries: list[dict], rng: random.Random, curated: list[str]) -> list[dict]:
    """A query and the images found for it; its own image is the right answer."""
    shown_ids = [with_answer([r["image_id"] for r in q["top"]], q["answer"]) for q in queries]
    shown = photos(curated, "image_id", sorted({i for ids in shown_ids for i in ids}))
    rows = []
    for query, ids in zip(queries, shown_ids):
        results = [
            {"image_id": i, "image": shown[i], "text": None, "correct": i == query["answer"]}
            for i in ids
        ]
        rows.append(
            {
                "item_id": item_id("retrieval", query["query"], query["answer"], *ids),
                "approach": "model",
                "text": query["query"],
                "image": None,
                "image_id": query["answer"],
                "source_id": query["answer"],
                "results": shown_results(results, rng),
                "sentences": None,
            }
        )
    return rows


def image_to_query_items(images: list[dict], rng: random.Random, curated: list[str]) -> list[dict]:
    """A photo and the captions (or spoken captions' texts) found for it; a caption of the
    photo's own is a right answer, and the first of them is added when none is shown."""
    shown = photos(curated, "image_id", sorted({entry["image_id"] for entry in images}))
    rows = []
    for entry in images:
        # evaluate_retriever logs the image's own captions (answers); an older run's top 10
        # are all there is to find one in.
        own = entry.get("answers") or [r["caption"] for r in entry["top"] if r["correct"]]
        captions = with_answer([r["caption"] for r in entry["top"]], own[0] if own else None)
        results = [
            {"image_id": None, "image": None, "text": text, "correct": text in own}
            for text in captions
        ]
        rows.append(
            {
                "item_id": item_id("retrieval", IMAGE_TO_QUERY, entry["image_id"], *captions),
                "approach": "model",
                "text": None,
                "image": shown[entry["image_id"]],
                "image_id": entry["image_id"],
                "source_id": entry["image_id"],
                "results": shown_results(results, rng),
                "sentences": None,
            }
        )
    return rows


def sampled(tasks: TaskSet) -> int:
    """How many of what `--items` counts the task set holds: images where each comes with
    every approach's caption (zh_caption: in one item; caption_quality of a run with a
    baseline: an item each), else items."""
    if len(tasks.manifest["approaches"]) > 1:
        return len({item["image_id"] or item["source_id"] for item in tasks.items})
    return len(tasks.items)


def build(
    kind: str,
    output: str,
    run_id: str | None,
    data: str | None,
    items: int | None,
    raters: int,
    seed: int,
    direction: str = QUERY_TO_IMAGE,
    photo: str = "whole",
) -> TaskSet:
    """The task set, written to `output`. `direction`: which rankings retrieval items show;
    `photo`: the photos whole or as the model saw them."""
    if direction != QUERY_TO_IMAGE and kind != "retrieval":
        raise ValueError(f"a direction is for retrieval tasks, not {kind}")
    rng = random.Random(seed)
    tracking.configure()
    with tracking.start_run("rating", job="rating_tasks", tags={"kind": kind}) as run:
        tracking.log_params({"items": items, "raters": raters, "seed": seed, "photo": photo,
                           "direction": direction, "output": output, "source_run": run_id})  # fmt: skip
        if run_id:
            rows, about = from_run(kind, run_id, items, rng, direction)
            source = {"run_id": run_id, **about}
        else:
            assert data is not None
            rows, source = from_data(kind, data, items, rng), {"data": data}
        # What the items were drawn from, for lineage (the run's own inputs name the rest).
        for uri in [data] if data else source.get("curated", []):
            lineage.log_read(uri, context="rating")
        if photo == "crop":
            rows, source["undecodable"] = as_seen(rows)
        tasks = new_task_set(
            kind, rows, raters, seed, {**source, "photo": photo, "mlflow_run": run.info.run_id}, rng
        )
        if direction == IMAGE_TO_QUERY:
            tasks.manifest["question"] = CAPTIONS_QUESTION
        tasks.write(output)
    return tasks


def as_seen(rows: list[dict]) -> tuple[list[dict], int]:
    """The items with every photo cut to the centre square the model saw, and how many items
    were left out because a photo of theirs did not decode (one photo never ends the job)."""
    from conceptual.vision.cnn import centre_square  # loads torch: only when cutting

    cut = functools.cache(centre_square)  # a photo shown in many items is cut once
    kept = []
    for row in rows:
        try:
            results = row["results"] and [
                {**r, "image": r["image"] and cut(r["image"])} for r in row["results"]
            ]
            kept.append({**row, "image": row["image"] and cut(row["image"]), "results": results})
        except (OSError, ValueError):  # PIL's UnidentifiedImageError is an OSError
            continue
    return kept, len(rows) - len(kept)
