"""The retrieval index of a dual encoder (conceptual.retrieval_index): every distinct image of
a features output embedded by the image tower and, for a text model, every caption by the
text tower; for a speech model, the clips that speak the captions when SPEECH is given.

    MODEL + FEATURES (+ SPEECH)  ->  OUTPUT/index.json, images.parquet + images.npy,
                                     captions.parquet (+ captions.npy for text models),
                                     clips.parquet + clips.npy (speech, with SPEECH),
                                     <target>.faiss (approximate=true), _SUCCESS last
                                     an MLflow run (experiment `retrieval`, stage
                                     build_index); a registered model version is tagged
                                     `index` = OUTPUT, where the service finds it

An image is its centre crop's pooled CNN vector (crop 0), as the evaluation embeds it; its
row names its first caption record (id, caption) and that record's image_url from the
curated data the features were made from (features.json `curated`; null where that data
is not reachable). The CNN and image size of the features are recorded, so that an image
query is preprocessed exactly as the indexed images were. A model that fine-tuned its CNN
(model.image_backbone=finetune) embeds the photos themselves, their centre squares at the
model's image size, read in one pass over that curated data (which must then be
reachable); its images' rows come in the order the pass finds them.

Bounds: a driver-side loop, batched. Feature rows are read `read_rows` at a time (only the
columns needed: never the grids) and embedded on the configured device; embeddings go to
a memory-mapped staging file, not to the driver's memory, which holds the ids and captions
(a few hundred bytes a record: ~1 GB for 3.3M records) and one batch (of photos, for a
fine-tuned CNN: their JPEGs and 150 KB of pixels each at 224 px). On CPUs the text tower
is the cost (~1-2 ms a caption; a fine-tuned CNN's photo ~110 ms at 224 px), a clip's
MFCCs another ~5 ms; Ray Data would spread these over a cluster, which this job does not
do yet.

A row whose embedding raises (a feature row, a clip, a fine-tuned CNN's photo) is rejected
(pipelines/dataflow/set_aside.py): stage `build_index`, reason `internal_error`, the row as read in
OUTPUT/rejected/*.parquet (REJECTED_ROWS); the other rows of its batch are indexed as they
would have been, and the counts go to index.json (`rejected`) and MLflow. Past
`errors.max_rate` of the rows (or `errors.max_count`) the job fails instead, before it
writes the index. A model or features that do not fit (another CNN's vectors, no image ids)
fail the job at once, as before.
"""

from __future__ import annotations

import functools
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

import mlflow
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from mlflow.tracking import MlflowClient
from pydantic import Field

from conceptual import lineage, registry, storage, tracking
from conceptual.config import Config
from conceptual.errors import ErrorsConfig
from conceptual.models.retriever import DualEncoder
from conceptual.models.saving import SavedRetriever, load
from conceptual.models.vocab import Vocabulary
from conceptual.pipelines.dataflow import set_aside
from conceptual.pipelines.dataflow.steps import isolated
from conceptual.pipelines.families.retriever.evaluate_retriever import embed
from conceptual.pipelines.families.retriever.retrieval_data import clip_files, photo_pixels
from conceptual.pipelines.features.features_data import (
    check_image_ids,
    feature_files,
    features_summary,
)
from conceptual.records import (
    CLIP,
    CURATED,
    FEATURES,
    INDEX_CAPTIONS,
    INDEX_CLIPS,
    INDEX_IMAGES,
    rejected_records,
)
from conceptual.retrieval_index import (
    INDEX_TAG,
    RECALL_K,
    RECALL_KEY,
    ApproximateSettings,
    faiss_indexes,
    write_index,
)
from conceptual.speech.features import AudioFeatureConfig, clip_features
from conceptual.vision.cnn import resolve_device

STAGE = "build_index"
FEATURE_COLUMNS = ["id", "image_id", "split", "caption", "crop", "pooled"]
CLIP_COLUMNS = ["id", "caption_id", "image_id", "caption", "split", "audio"]
# A rejected row: a feature row, a clip, or a curated record's photo (a fine-tuned CNN's).
REJECTED_ROWS = rejected_records(
    pa.schema(
        [
            *(FEATURES.field(c) for c in FEATURE_COLUMNS),
            CLIP.field("caption_id"),
            CLIP.field("audio"),
            CURATED.field("image"),
        ]
    )
)


class BuildIndexConfig(Config):
    splits: list[str] | None = None  # None: every split of the features
    approximate: bool = False  # also build a FAISS index of every target
    faiss: ApproximateSettings = ApproximateSettings()
    recall_queries: int = Field(1000, ge=1)  # sampled queries measuring the FAISS recall@10
    read_rows: int = Field(4096, ge=1)  # feature rows (or clips) read and embedded at a time
    device: Literal["auto", "cpu", "cuda"] = "auto"
    seconds: float | None = Field(None, gt=0)  # speech: seconds heard; None: as trained
    experiment: str = "retrieval"
    allow_incomplete: bool = False  # read features or clips without their _SUCCESS
    errors: ErrorsConfig = ErrorsConfig()  # rows that may fail before the job does


class VectorSink:
    """Float32 rows appended to a raw staging file, read back as a memory map."""

    def __init__(self, folder: str, name: str, dim: int):
        self.path, self.dim, self.rows = Path(folder) / f"{name}.f32", dim, 0
        self.file = open(self.path, "wb")  # closed by array()

    def append(self, vectors: np.ndarray) -> None:
        if len(vectors):
            self.file.write(np.ascontiguousarray(vectors, dtype=np.float32).tobytes())
            self.rows += len(vectors)

    def array(self) -> np.ndarray:
        self.file.close()
        if self.rows == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.memmap(self.path, dtype=np.float32, mode="r", shape=(self.rows, self.dim))


def batches(uri: str, files: list[str], columns: list[str], rows: int) -> Iterator[pa.RecordBatch]:
    fs, _ = storage.resolve(uri)
    for path in files:
        with fs.open_input_file(path) as f:
            yield from pq.ParquetFile(f).iter_batches(batch_size=rows, columns=columns)


def split_filter(batch: pa.RecordBatch, splits: list[str] | None) -> pa.Array:
    """The rows to index: centre crops of the splits asked for."""
    keep = pc.equal(batch["crop"], 0)
    if splits is not None:
        keep = pc.and_(keep, pc.is_in(batch["split"], pa.array(splits)))
    return keep


class Embedded:
    """What the loop over the features gathers: the images' and captions' rows and sinks,
    and the rows that failed (set_aside.reject_row each) out of `rows` embedded."""

    def __init__(self, staging: str, dim: int, text: bool):
        self.image_rows: dict[str, int] = {}
        # INDEX_IMAGES's columns but the URL, looked up once the images are known
        self.images: dict[str, list] = {c: [] for c in INDEX_IMAGES.names if c != "image_url"}
        self.captions: dict[str, list] = {c: [] for c in INDEX_CAPTIONS.names}
        self.image_vectors = VectorSink(staging, "images", dim)
        self.caption_vectors = VectorSink(staging, "captions", dim) if text else None
        self.splits_seen: set[str] = set()
        self.rows = 0  # feature rows and clips to index (the error budget's input)
        self.rejected: list[pa.Table] = []


def numbered(batch: pa.RecordBatch | pa.Table) -> pa.Table:
    """The batch's rows with their position in it (`row`), for `isolated`: what comes out
    of it names the rows it is of."""
    table = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
    return table.append_column("row", pa.array(np.arange(table.num_rows), pa.int64()))


def reject(row: pa.Table, stage: str, detail: str) -> pa.Table:
    return set_aside.reject_row(row.drop_columns(["row"]), stage, detail)


def as_column(vectors: np.ndarray, present: np.ndarray) -> pa.FixedSizeListArray:
    """(k, dim) vectors as a column of len(present) rows: the rows where `present` hold
    them in order, the others null."""
    dim = vectors.shape[1] if vectors.ndim == 2 else 1
    full = np.zeros((len(present), dim), np.float32)
    full[present] = vectors
    return pa.FixedSizeListArray.from_arrays(pa.array(full.ravel()), dim, mask=pa.array(~present))


def vectors_of(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """The vectors of a column's rows that hold one, (k, dim) float32."""
    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    column = column.filter(column.is_valid())
    return column.flatten().to_numpy().reshape(len(column), column.type.list_size)


def pooled_vectors(column: pa.ChunkedArray, dim: int) -> np.ndarray:
    """(rows, dim) pooled CNN vectors; ValueError for a row that has none of that size."""
    lengths = pc.list_value_length(column)
    wrong = [n for n in lengths.to_pylist() if n != dim]
    if wrong:
        raise ValueError(f"a pooled vector of {wrong[0]} values, not {dim}")
    return np.array(pc.list_flatten(column).to_numpy().reshape(len(column), dim))  # writable


def embed_records(
    model: DualEncoder,
    vocab: Vocabulary | None,
    known: Mapping[str, int],
    device: Any,
    rows: pa.Table,
) -> pa.Table:
    """Feature rows (`numbered`) embedded: `row`; `new`, whether the row is its image's
    first (the image is not in `known`, nor in an earlier row); `image`, the image's
    embedding of a new row's pooled vector (null otherwise; no column when the model reads
    photos); `caption`, the caption's embedding (text models)."""
    new, seen = np.zeros(rows.num_rows, bool), set()
    for row, image in enumerate(rows["image_id"].to_pylist()):
        if image not in known and image not in seen:
            new[row] = True
            seen.add(image)
    columns = {"row": rows["row"], "new": pa.array(new)}
    if model.config.photo_size is None:
        vectors = np.zeros((0, model.config.embed_dim), np.float32)
        if new.any():
            pooled = pooled_vectors(rows["pooled"].filter(pa.array(new)), model.config.image_dim)
            vectors = embed(model.embed_images, pooled, device).cpu().numpy()
        columns["image"] = as_column(vectors, new)
    if model.config.modality == "text":
        tokens = vocab.encode_array(rows["caption"].to_pylist(), model.config.max_tokens)
        vectors = embed(model.embed_queries, tokens, device).cpu().numpy()
        columns["caption"] = as_column(vectors, np.ones(rows.num_rows, bool))
    return pa.table(columns)


def embed_features(
    model: DualEncoder,
    vocab: Vocabulary | None,
    features_uri: str,
    config: BuildIndexConfig,
    staging: str,
    device: Any,
) -> Embedded:
    """The features' images and captions; the images embedded from their pooled vectors,
    unless the model reads photos (embed_photos then embeds them). A row whose embedding
    raises is rejected (Embedded.rejected)."""
    files = feature_files(features_uri, config.allow_incomplete)
    text = model.config.modality == "text"
    pooled_images = model.config.photo_size is None
    columns = [c for c in FEATURE_COLUMNS if pooled_images or c != "pooled"]
    out = Embedded(staging, model.config.embed_dim, text)
    for batch in batches(features_uri, files, columns, config.read_rows):
        out.splits_seen.update(pc.unique(batch["split"]).to_pylist())
        batch = batch.filter(split_filter(batch, config.splits))
        if batch.num_rows == 0:
            continue
        check_image_ids(batch["image_id"], features_uri)
        lengths = pc.list_value_length(batch["pooled"]) if pooled_images else None
        if pooled_images and not pc.any(pc.equal(lengths, model.config.image_dim)).as_py():
            raise ValueError(
                f"the model reads {model.config.image_dim}-d image features; the features "
                f"at {features_uri} are {lengths[0].as_py()}-d (another CNN?)"
            )
        out.rows += batch.num_rows
        call = functools.partial(embed_records, model, vocab, out.image_rows, device)
        embedded, rejected = isolated(call, numbered(batch), STAGE, reject)
        out.rejected += rejected
        if embedded is not None:
            gather(out, batch, embedded)
    missing = sorted(set(config.splits or ()) - out.splits_seen)
    if missing:
        raise ValueError(
            f"no {', '.join(map(repr, missing))} split in the features at {features_uri} "
            f"(it has {', '.join(sorted(out.splits_seen)) or 'no rows'})"
        )
    if not out.image_rows:
        raise ValueError(f"no images to index in the features at {features_uri}")
    return out


def gather(out: Embedded, batch: pa.RecordBatch, embedded: pa.Table) -> None:
    """The rows `embed_records` embedded, into `out`: each new image, each caption."""
    ids, image_ids, splits, captions = (
        batch[c].to_pylist() for c in ("id", "image_id", "split", "caption")
    )
    new_images = []  # the rows of `embedded` that index an image
    for k, (row, new) in enumerate(zip(embedded["row"].to_pylist(), embedded["new"].to_pylist())):
        image = image_ids[row]
        if new and image not in out.image_rows:  # the records of an image share its crop 0
            out.image_rows[image] = len(out.image_rows)
            new_images.append(k)
            for column, value in zip(out.images, (image, ids[row], captions[row], splits[row])):
                out.images[column].append(value)
        for column, value in zip(out.captions, (ids[row], image, captions[row], splits[row])):
            out.captions[column].append(value)
    if new_images and "image" in embedded.column_names:
        out.image_vectors.append(vectors_of(embedded["image"].take(new_images)))
    if out.caption_vectors is not None:
        out.caption_vectors.append(vectors_of(embedded["caption"]))


def embed_photo_rows(model: DualEncoder, device: Any, rows: pa.Table) -> pa.Table:
    """Curated records (`numbered`: id, image) embedded from their photos: `row`, `image`."""
    pixels = photo_pixels(rows["image"].to_pylist(), model.config.image_size)
    vectors = embed(model.embed_images, pixels, device).cpu().numpy()
    return pa.table({"row": rows["row"], "image": as_column(vectors, np.ones(len(pixels), bool))})


def embed_photos(
    model: DualEncoder,
    curated_uri: str | None,
    embedded: Embedded,
    config: BuildIndexConfig,
    device: Any,
) -> None:
    """A fine-tuned CNN's image embeddings, of each image's photo (the centre square), read
    with its record id from the curated data in one pass; the image rows are put in the
    order the photos come. ValueError when the data or a photo is not there; a photo whose
    embedding raises is rejected, and its image not indexed."""
    if not curated_uri or not storage.exists(curated_uri):
        raise ValueError(
            f"the curated data {curated_uri} the features were made from is not reachable from "
            "here: a model with model.image_backbone=finetune embeds the photos themselves"
        )
    wanted = {record: row for row, record in enumerate(embedded.images["id"])}
    ids, order = pa.array(list(wanted), pa.string()), []
    files = [f for f in storage.list_files(curated_uri) if f.endswith(".parquet")]
    for batch in batches(curated_uri, files, ["id", "image"], config.read_rows):
        batch = batch.filter(pc.is_in(batch["id"], ids))
        if batch.num_rows == 0:
            continue
        call = functools.partial(embed_photo_rows, model, device)
        photos, rejected = isolated(call, numbered(batch), STAGE, reject)
        embedded.rejected += rejected
        for failed in rejected:  # its image is not indexed
            wanted.pop(failed["id"][0].as_py())
        if photos is not None:
            records = batch["id"].to_pylist()
            order += [wanted.pop(records[row]) for row in photos["row"].to_pylist()]
            embedded.image_vectors.append(vectors_of(photos["image"]))
    if wanted:
        raise ValueError(f"{len(wanted)} indexed images have no photo in {curated_uri}")
    embedded.images = {column: [v[row] for row in order] for column, v in embedded.images.items()}
    embedded.image_rows = {image: row for row, image in enumerate(embedded.images["image_id"])}


def image_urls(curated_uri: str | None, record_ids: list[str]) -> list[str | None] | None:
    """Each record's image_url from the curated data; None when it is not reachable."""
    if not curated_uri or not storage.exists(curated_uri):
        return None
    files = [f for f in storage.list_files(curated_uri) if f.endswith(".parquet")]
    wanted = pa.array(record_ids, pa.string())
    found: dict[str, str | None] = {}
    for batch in batches(curated_uri, files, ["id", "image_url"], 65536):
        batch = batch.filter(pc.is_in(batch["id"], wanted))
        found.update(zip(batch["id"].to_pylist(), batch["image_url"].to_pylist()))
    return [found.get(record) for record in record_ids]


def embed_clip_rows(
    model: DualEncoder, audio: AudioFeatureConfig, device: Any, rows: pa.Table
) -> pa.Table:
    """Clips (`numbered`) embedded from their audio: `row`, `clip`."""
    inputs = np.stack([clip_features(clip, audio) for clip in rows["audio"].to_pylist()])
    vectors = embed(model.embed_queries, inputs, device).cpu().numpy()
    return pa.table({"row": rows["row"], "clip": as_column(vectors, np.ones(len(inputs), bool))})


def embed_clips(
    model: DualEncoder,
    audio: AudioFeatureConfig,
    speech_uri: str,
    embedded: Embedded,
    config: BuildIndexConfig,
    staging: str,
    device: Any,
) -> tuple[dict[str, list], np.ndarray, int]:
    """The clips whose caption (else own image) is indexed: (their rows, their embeddings,
    how many clips were left out for speaking no indexed caption or image). A clip whose
    embedding raises is rejected (Embedded.rejected)."""
    caption_image = dict(zip(embedded.captions["id"], embedded.captions["image_id"]))
    rows: dict[str, list] = {c: [] for c in INDEX_CLIPS.names}
    sink, skipped = VectorSink(staging, "clips", model.config.embed_dim), 0
    files = clip_files(speech_uri, config.allow_incomplete)
    for batch in batches(speech_uri, files, CLIP_COLUMNS, config.read_rows):
        indexed: dict[int, str] = {}  # the batch's rows to index -> the image each speaks of
        columns = [batch[c].to_pylist() for c in ("id", "caption_id", "image_id", "caption")]
        for row, (_, caption_id, image, _) in enumerate(zip(*columns)):
            image = caption_image.get(caption_id) or (
                image if image in embedded.image_rows else None
            )
            if image is None:
                skipped += 1
            else:
                indexed[row] = image
        if not indexed:
            continue
        embedded.rows += len(indexed)
        table = numbered(batch).take(list(indexed))
        call = functools.partial(embed_clip_rows, model, audio, device)
        clips, rejected = isolated(call, table, STAGE, reject)
        embedded.rejected += rejected
        if clips is None:
            continue
        splits = batch["split"].to_pylist()
        for row in clips["row"].to_pylist():
            clip, caption_id, _, caption = (column[row] for column in columns)
            for column, value in zip(rows, (clip, caption_id, indexed[row], caption, splits[row])):
                rows[column].append(value)
        sink.append(vectors_of(clips["clip"]))
    return rows, sink.array(), skipped


def indexed_model(model_uri: str, device: Any, speech_uri: str | None) -> SavedRetriever:
    """The retriever `model_uri` names, on `device`; ValueError when it cannot index what is
    given (clips for a text model, or a text model without its vocabulary)."""
    saved = load(registry.resolve(model_uri), device, SavedRetriever)
    if saved.model.config.modality == "text" and speech_uri is not None:
        raise ValueError("--speech is for speech models; this is a text model")
    if saved.model.config.modality == "text" and saved.vocab is None:
        raise ValueError(f"the text model at {model_uri} was saved without its vocabulary")
    return saved


def index_contents(
    model: DualEncoder,
    embedded: Embedded,
    curated: str | None,
    speech_uri: str | None,
    audio_settings: dict[str, Any] | None,
    config: BuildIndexConfig,
    staging: str,
    device: Any,
) -> tuple[dict[str, pa.Table], dict[str, np.ndarray], bool, int]:
    """What the index holds of each target (images, captions; clips with SPEECH): its rows
    and its vectors; then whether the images' URLs were found in the `curated` data, and
    how many clips speak of nothing indexed (embed_clips)."""
    urls = image_urls(curated, embedded.images["id"])
    image_url = urls or [None] * len(embedded.image_rows)
    tables = {
        "images": pa.table({**embedded.images, "image_url": image_url}, schema=INDEX_IMAGES),
        "captions": pa.table(embedded.captions, schema=INDEX_CAPTIONS),
    }
    vectors = {"images": embedded.image_vectors.array()}
    if embedded.caption_vectors is not None:
        vectors["captions"] = embedded.caption_vectors.array()
    skipped = 0
    if speech_uri is not None:
        audio = AudioFeatureConfig.model_validate(audio_settings or {})
        if config.seconds is not None:
            audio = audio.model_copy(update={"seconds": config.seconds})
        clips, vectors["clips"], skipped = embed_clips(
            model, audio, speech_uri, embedded, config, staging, device
        )
        tables["clips"] = pa.table(clips, schema=INDEX_CLIPS)
    return tables, vectors, urls is not None, skipped


def build(
    model_uri: str,
    features_uri: str,
    output_uri: str,
    config: BuildIndexConfig,
    *,
    speech_uri: str | None = None,  # the clips of a speech retriever's index
) -> dict[str, Any]:
    """Write the index at `output_uri` and tag a registered model's version with it; returns
    the manifest (index.json) with `seconds`."""
    started = time.monotonic()
    version = registry.registered_version(model_uri)
    device = resolve_device(config.device)
    saved = indexed_model(model_uri, device, speech_uri)
    model, vocab, audio_settings = saved.model, saved.vocab, saved.audio
    modality = model.config.modality
    summary = features_summary(features_uri)
    storage.delete(storage.join(output_uri, storage.SUCCESS))
    rejected_uri = storage.join(output_uri, set_aside.REJECTED)
    storage.delete(rejected_uri)

    with tempfile.TemporaryDirectory(prefix="build-index-") as staging:
        embedded = embed_features(model, vocab, features_uri, config, staging, device)
        if model.config.photo_size is not None:
            embed_photos(model, summary.get("curated"), embedded, config, device)
        tables, vectors, has_urls, skipped_clips = index_contents(
            model, embedded, summary.get("curated"), speech_uri, audio_settings, config,
            staging, device,
        )  # fmt: skip
        if embedded.rejected:
            set_aside.write_rejected(embedded.rejected, rejected_uri, REJECTED_ROWS)
        rejected, samples = set_aside.counted(embedded.rejected)
        set_aside.check(rejected, embedded.rows, config.errors, samples)

        approximate, settings = {}, None
        if config.approximate:
            approximate, settings = faiss_indexes(vectors, config.faiss, config.recall_queries)
        manifest = {
            "model_uri": model_uri,
            "registered": None
            if version is None
            else {"name": version.name, "version": str(version.version)},
            "modality": modality,
            "image_backbone": model.config.image_backbone,  # finetune: photos, not `features`
            "embed_dim": model.config.embed_dim,
            "normalized": model.config.normalize,
            "scale": float(model.scale().detach()) if model.config.normalize else None,
            "features": {
                "uri": features_uri,
                "model": summary.get("model"),
                "image_size": summary.get("image_size"),
                "crop": 0,
                "curated": summary.get("curated"),
            },
            "splits": config.splits,
            "speech_uri": speech_uri,
            "audio": None if modality == "text" else audio_settings,
            "image_urls": has_urls,
            "counts": {
                "images": len(embedded.image_rows),
                "captions": len(embedded.captions["id"]),
                "clips": tables["clips"].num_rows if "clips" in tables else 0,
                "clips_skipped": skipped_clips,
                "rejected": set_aside.total(rejected),
            },
            "rejected": rejected,  # {stage: {reason: n}}: the rows in rejected/
            "approximate": settings,
            "seconds": round(time.monotonic() - started, 2),
        }
        manifest = write_index(output_uri, manifest, tables, vectors, approximate)
    if version is not None:
        MlflowClient(tracking.configure()).set_model_version_tag(
            version.name, str(version.version), INDEX_TAG, output_uri
        )
    return manifest


def run(
    model_uri: str,
    features_uri: str,
    output_uri: str,
    config: BuildIndexConfig,
    *,
    speech_uri: str | None = None,
) -> dict[str, Any]:
    """The build_index job: one MLflow run around `build`. Returns the manifest's summary
    with `run_id`, `output` and `approximate_recall@10` (when approximate)."""
    tags = {"model_uri": model_uri}
    with tracking.start_run(config.experiment, job=STAGE, tags=tags) as active:
        tracking.log_config(config)
        tracking.log_params(
            {"features_uri": features_uri, "output_uri": output_uri, "speech_uri": speech_uri}
        )
        manifest = build(model_uri, features_uri, output_uri, config, speech_uri=speech_uri)
        lineage.log_read(features_uri, part="features")
        if speech_uri:
            lineage.log_read(speech_uri, part="clips")
        lineage.log_written(output_uri)
        mlflow.set_tag("modality", manifest["modality"])
        metrics = {**manifest["counts"], "seconds": manifest["seconds"]}
        metrics.update(set_aside.metrics(manifest["rejected"]))
        result = {
            "output": output_uri,
            "modality": manifest["modality"],
            "registered": manifest["registered"],
            "counts": manifest["counts"],
            "rejected": manifest["rejected"],
            "seconds": manifest["seconds"],
        }
        if manifest["approximate"]:
            targets = manifest["approximate"]["targets"]
            recalls = {target: entry[RECALL_KEY] for target, entry in targets.items()}
            result[f"approximate_recall@{RECALL_K}"] = recalls.get("images")
            result["approximate_recall"] = recalls
            # MLflow metric names allow no "@".
            metrics.update({f"approximate_recall_at_{RECALL_K}.{t}": r for t, r in recalls.items()})
        mlflow.log_metrics(metrics)
        mlflow.log_dict(manifest, "index.json")
        result["run_id"] = active.info.run_id
    return result
