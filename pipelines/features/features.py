"""CNN features of a curated dataset, as Ray Data batch inference (spec: captioning,
"image features"): for every curated record, the pooled (1x1) vector and the 8x8 grid of
the pretrained EfficientNet-lite's last feature map, optionally for several augmented crops
(`crops=N`), which the captioner trains on: by default the paper's (section 5.2: random crops
of 50-100% of the photo, colours distorted), or `augmentation=crop_only` (60-100%, colours
kept: the platform's crops before).

    DATA/curated/*.parquet (records.CURATED)  ->  OUTPUT/features/*.parquet (records.FEATURES)
                                                  OUTPUT/rejected/*.parquet, when a record
                                                  failed (pipelines/dataflow/set_aside.py)
                                                  OUTPUT/features.json, OUTPUT/_SUCCESS

Actors hold the CNN (one per GPU when the cluster has GPUs, else one per CPU). Records
without an image (a text-only curation) cannot have features and are counted as skipped.
A record whose processing raises (a photo that will not decode, say) is rejected as
`internal_error` of stage `features`, with the columns read (its image included): the
job replays such rows with `--data OUTPUT/rejected allow_incomplete=true`. Past
`errors.max_rate` of the records (or `errors.max_count`) the job fails instead.
"""

from __future__ import annotations

import io
import time
from typing import Any

import mlflow
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from PIL import Image

from conceptual import lineage, storage, tracking
from conceptual.config import Config
from conceptual.errors import ErrorsConfig
from conceptual.pipelines.dataflow import set_aside
from conceptual.pipelines.dataflow.executors import cnn_actors
from conceptual.pipelines.dataflow.readers import read_row_groups
from conceptual.records import FEATURES, record_image_id
from conceptual.storage import SUCCESS
from conceptual.vision.cnn import AugmentationName, CnnConfig, FeatureExtractor

# What a record brings along when it has it: its image's id (curation writes it) and, for a
# caption in another language (records.LANGUAGE_FIELDS), its language and its fluency
# score, which captioner training reads.
CARRIED = ["image_id", "language", "fluency"]
STAGE = "features"


class FeaturesConfig(Config):
    cnn: CnnConfig = CnnConfig()
    image_size: int = 256  # EfficientNet-lite's last map is 1/32 of the input: 256 px -> 8x8
    crops: int = 0  # augmented crops per image besides the centre crop (captioning: 0 or 4-10)
    augmentation: AugmentationName = "paper"  # how those crops are drawn (vision.cnn.AUGMENTATIONS)
    seed: int = 0  # the crops are the same for the same seed
    actors: int | None = None  # None: one per GPU when there are GPUs, else one per CPU
    cpus_per_actor: float = 1.0
    batch_size: int = 32
    experiment: str = "features"
    allow_incomplete: bool = False  # read a curation output without its _SUCCESS marker
    errors: ErrorsConfig = ErrorsConfig()  # records that may fail before the job does


def open_image(data: bytes, size: int) -> Image.Image:
    """Decode a curated JPEG, letting libjpeg scale it down while decoding (draft mode): a
    feature input of `size` pixels never needs the full-resolution pixels."""
    image = Image.open(io.BytesIO(data))
    image.draft("RGB", (size, size))  # keeps both sides >= size
    return image.convert("RGB")


class FeatureOperator:
    def __init__(self, config: FeaturesConfig):
        self.config = config
        self.extractor = FeatureExtractor(config.cnn, image_size=config.image_size)

    def __call__(self, batch: pa.Table) -> pa.Table:
        batch = batch.filter(pc.is_valid(batch["image"]))
        photos = batch["image"].to_pylist()
        # The records of one photo (one per caption) sit together: run the CNN once per photo.
        distinct = list(dict.fromkeys(photos))
        images = [open_image(data, self.config.image_size) for data in distinct]
        config = self.config
        extracted = self.extractor.extract(
            images, crops=config.crops, seed=config.seed, augmentation=config.augmentation
        )
        of_photo = dict(zip(distinct, extracted))
        per_record = [of_photo[data] for data in photos]
        rows = []
        carried = [c for c in CARRIED if c in batch.column_names]
        records = batch.select(["id", "split", "caption", *carried]).to_pylist()
        for record, photo, crops in zip(records, photos, per_record):
            record["image_id"] = record_image_id(record.get("image_id"), photo)
            for crop, (pooled, grid) in enumerate(crops):
                rows.append(
                    {
                        **record,
                        "crop": crop,
                        "pooled": pooled.astype(np.float32),
                        "grid": grid.astype(np.float32).ravel(),  # row-major (rows, cols, C)
                        "grid_shape": list(grid.shape),
                    }
                )
        return pa.Table.from_pylist(rows, schema=FEATURES)


def operator(config: FeaturesConfig) -> tuple[type, dict[str, Any]]:
    """The operator extracting the features, and its constructor's arguments."""
    return FeatureOperator, {"config": config}


def schema_names(fs, files: list[str]) -> list[str]:
    """The columns of a dataset's files (the first file's: they share one schema)."""
    if not files:
        return []
    with fs.open_input_file(files[0]) as f:
        return pq.read_schema(f).names


def extract(data_uri: str, output_uri: str, config: FeaturesConfig) -> dict[str, Any]:
    """Write features of every curated record with an image; return features.json's content."""
    started = time.monotonic()
    # DATA may be a curation output (with curated/ inside) or the curated folder itself.
    data = storage.output_part(data_uri, "curated", config.allow_incomplete)
    features_uri = storage.join(output_uri, "features")
    rejected_uri = storage.join(output_uri, set_aside.REJECTED)
    if rejected_uri.rstrip("/") == data.rstrip("/"):  # replaying rejected rows into their output
        raise storage.StorageError(f"--output {output_uri} would overwrite its input {data}")
    storage.delete(storage.join(output_uri, SUCCESS))
    storage.delete(features_uri)
    storage.delete(rejected_uri)

    fs, _ = storage.resolve(data)
    files = [f for f in storage.list_files(data) if f.endswith(".parquet")]
    carried = [column for column in CARRIED if column in schema_names(fs, files)]
    records = read_row_groups(fs, files, columns=["id", "split", "caption", "image", *carried])
    total = storage.written_rows(data)
    cls, kwargs = operator(config)
    features = records.map_batches(
        set_aside.Guarded,
        **set_aside.guarded(cls, kwargs, STAGE, rejected_uri, FEATURES),
        batch_size=config.batch_size,
        batch_format="pyarrow",
        **cnn_actors(config.cnn, config.actors, config.cpus_per_actor),
    )
    out_fs, out_path = storage.resolve(features_uri)
    # Writing, like reading, must not wait for the CPUs the actors hold.
    features.write_parquet(out_path, filesystem=out_fs, ray_remote_args={"num_cpus": 0})

    rows = storage.written_rows(features_uri)
    images = rows // (config.crops + 1)
    rejected, samples = set_aside.tally(rejected_uri)
    set_aside.check(rejected, total, config.errors, samples)
    summary = {
        "curated": data,  # where the photos are, for sample grids beside generated captions
        "records": total,
        "images": images,
        "skipped_without_image": total - images - set_aside.total(rejected),
        "rejected": rejected,  # {stage: {reason: n}}: the rows in rejected/
        "rows": rows,
        "crops_per_image": config.crops + 1,
        "augmentation": config.augmentation,
        "model": config.cnn.model,
        "image_size": config.image_size,
        "grid": config.image_size // 32,
        "seconds": round(time.monotonic() - started, 2),
    }
    storage.write_json(storage.join(output_uri, "features.json"), summary)
    storage.write_json(storage.join(output_uri, SUCCESS), {"rows": rows})
    return summary


def described(summary: dict[str, Any]) -> str:
    """What the features job prints of its summary, in lines as every job's: the images
    read and how they were seen (where the rows went is the job's next line)."""
    skipped = summary["skipped_without_image"]
    without = f", {skipped} without an image" if skipped else ""
    grid, crops = summary["grid"], summary["crops_per_image"] - 1
    cnn = f"cnn:      {summary['model']} at {summary['image_size']} px ({grid}x{grid} grid)"
    if crops:
        cnn += f", {crops} crops per image besides its centre ({summary['augmentation']})"
    seen = f"images:   {summary['images']} of {summary['records']} records{without}"
    return f"{seen}  ({summary['seconds']:.1f} s)\n{cnn}"


def run(data_uri: str, output_uri: str, config: FeaturesConfig) -> tuple[dict[str, Any], str]:
    """The features job: one MLflow run around the extraction. Returns (summary, run id)."""
    with tracking.start_run(config.experiment, job="features") as active:
        tracking.log_config(config)
        tracking.log_params({"data_uri": data_uri, "output_uri": output_uri})
        summary = extract(data_uri, output_uri, config)
        lineage.log_read(data_uri)  # once read: a missing input is the job's to say
        lineage.log_written(output_uri, part="features")  # the folder may hold curated/ too
        metrics = {k: v for k, v in summary.items() if isinstance(v, (int, float)) and k != "grid"}
        mlflow.log_metrics({**metrics, **set_aside.metrics(summary["rejected"])})
        mlflow.log_dict(summary, "features.json")
        return summary, active.info.run_id
