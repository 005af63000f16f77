"""The retrievers' data (docs/spec/retrieval.md): a features output's images and captions, and
the clips that speak those captions.

    FEATURES/features/*.parquet (records.FEATURES)  the images (their pooled CNN vector, every
                                                    crop) and their caption records
    SPEECH/clips/*.parquet (records.CLIP)           spoken captions: a synthesize_speech
                                                    output, or an import's recorded speech

A pair is an image and one of its captions (text), or an image and a clip speaking one of
its captions (speech). A clip finds its image by its caption's id (a features row's id),
else by its own `image_id`; a clip of a caption that is not in the split is not a pair of
that split. Images are grouped by `image_id`, so the five captions of a photo are five
positives of one image and never each other's negatives.

Training rows (`train_examples`) stream through Ray Data; the images of the train split
(their pooled vectors, every crop) are one object every task reads (a broadcast join: 5 KB
an image and crop in float32, so a few GB for a million images; past that, a hash join of
Ray Data's). Each example picks one of its image's crops at random (the spec's image
augmentation, when the features job made augmented crops) and, for speech, computes the
MFCCs of a random crop of the clip with SpecAugment (conceptual.speech.features); both
change every epoch, since Ray Train reads the dataset anew each epoch.

A model that fine-tunes the CNN (model.image_backbone=finetune) reads photos instead: the
JPEGs of the curated data the features were made from (features.json `curated`, joined by
record id), one object every task reads as the pooled vectors are (the JPEGs' own size,
~50-150 KB a photo: about 1 GB per 10,000 photos). Each example decodes its photo and
draws the spec's distortion on the reading CPU (`photo_pixels`: a random crop covering at
least `min_area` of it, brightness and saturation), anew every epoch, as uint8 pixels.

Evaluation sets (`eval_set`) are read on the driver: the split's images (centre crop: the
pooled vector, or the photo's pixels), its queries (every caption, or every clip), and
which image each query belongs to.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import ray
from PIL import Image
from pydantic import Field

from conceptual import storage
from conceptual.config import Config
from conceptual.models.retriever import Modality
from conceptual.models.vocab import Vocabulary
from conceptual.pipelines.dataflow.readers import fetched_once, map_read, read_row_groups
from conceptual.pipelines.features.features_data import (
    TRAIN_SPLIT,
    SplitImages,
    feature_files,
    read_table,
    source_images,
    split_images,
)
from conceptual.registry import eval_set_name
from conceptual.speech.features import AudioFeatureConfig, clip_features
from conceptual.vision.cnn import jitter_colours, random_crop, to_pixels
from conceptual.vision.decoding import decode
from conceptual.vision.images import ImageFilterConfig

CLIP_COLUMNS = ["id", "caption_id", "image_id", "caption", "audio"]
# Every curated photo is within the curation's bound (decoded pixels are fewer still).
PHOTO_PIXELS = ImageFilterConfig().max_pixels


class PhotoAugmentConfig(Config):
    """The spec's training distortion of the photos (model.image_backbone=finetune)."""

    min_area: float = Field(default=0.67, gt=0, le=1)  # random crops cover at least this much
    brightness: float = Field(default=0.125, ge=0, le=1)  # +- this of the full scale (~32/255)
    saturation: float = Field(default=0.5, ge=0, lt=1)  # colour x a factor within 1 +- this


def clip_files(speech_uri: str, allow_incomplete: bool = False) -> list[str]:
    """The clips' Parquet files of a synthesize_speech or import output (clips/ inside) or
    of the folder itself; the job must have finished unless `allow_incomplete`."""
    folder = storage.output_part(speech_uri, "clips", allow_incomplete)
    files = [f for f in storage.list_files(folder) if f.endswith(".parquet")]
    if not files:
        raise storage.StorageError(f"no clips under {speech_uri}")
    return files


def group_id(text: str) -> int:
    """A 60-bit integer for a string (an image id, a caption): the match mask compares these."""
    return int(hashlib.sha1(text.encode()).hexdigest()[:15], 16)


def clips_of(speech_uri: str, images: SplitImages, allow_incomplete: bool = False) -> pa.Table:
    """The clips (id, caption_id, image_id, caption, audio) whose caption or image is in the
    split, each with the id of its image in `images` (read on the driver: evaluation sets)."""
    table = read_table(clip_files(speech_uri, allow_incomplete), speech_uri, CLIP_COLUMNS)
    return clips_in_split(table, images.caption_image, set(images.image_ids))


def clips_in_split(clips: pa.Table, caption_image: dict[str, str], known: set[str]) -> pa.Table:
    """The clips whose caption (`caption_image`: caption id -> image id) or image (`known`)
    is in the split, their image_id set to that image."""
    image_of = [
        caption_image.get(caption_id) or (image if image in known else None)
        for caption_id, image in zip(clips["caption_id"].to_pylist(), clips["image_id"].to_pylist())
    ]
    column = clips.schema.get_field_index("image_id")
    clips = clips.set_column(column, "image_id", pa.array(image_of, pa.string()))
    return clips.filter(pc.is_valid(clips["image_id"]))


# ---------------------------------------------------------------- photos


def photos(features_uri: str, images: SplitImages, image_ids: list[str]) -> list[bytes]:
    """The JPEG of each image, from the curated data the features were made from (a fine-tuned
    CNN reads the photos, not the features' vectors); ValueError when they are not there."""
    records = images.records
    wanted = [records[image] for image in image_ids]
    found = source_images(features_uri, wanted)
    if not found:
        raise ValueError(
            f"the photos of the features at {features_uri} are not reachable from here: "
            "model.image_backbone=finetune reads them from the curated data that features.json "
            "names (`curated`), beside the features job's output"
        )
    if len(found) < len(set(wanted)):
        raise ValueError(
            f"{len(set(wanted)) - len(found)} of {len(set(wanted))} photos of the features at "
            f"{features_uri} are not in the curated data its features.json names"
        )
    return [found[record] for record in wanted]


def open_photo(data: bytes, size: int) -> Image.Image:
    """A curated photo decoded as the search service decodes an image query (upright RGB,
    libjpeg scaling it down toward `size` as it decodes)."""
    image, rejection = decode(data, PHOTO_PIXELS, reduce_to=size)
    if image is None:
        raise ValueError(
            f"a curated photo does not decode: {rejection.reason} ({rejection.detail})"
        )
    return image


def photo_pixels(
    data: Sequence[bytes],
    size: int,
    rng: np.random.Generator | None = None,
    augment: PhotoAugmentConfig | None = None,
) -> np.ndarray:
    """Photos as a fine-tuned CNN reads them, uint8 (N, 3, size, size). Without `rng`, each
    photo's centre square (evaluation, the index, the search service); with `rng` and
    `augment`, the spec's training distortion: a random crop covering at least
    `augment.min_area` of the photo (aspect 3/4 to 4/3, mirrored half the time, the centre
    square where no such crop fits), then random brightness and saturation."""
    opened = [open_photo(photo, size) for photo in data]
    if rng is None or augment is None:
        return to_pixels(opened, size)
    scale = (augment.min_area, 1.0)
    crops = [random_crop(*image.size, rng, scale=scale) for image in opened]
    pixels = to_pixels(opened, size, crops)
    return jitter_colours(pixels, rng, augment.brightness, augment.saturation)


# ---------------------------------------------------------------- evaluation sets


def eval_set(
    features_uri: str,
    split: str,
    modality: Modality,
    speech_uri: str | None = None,
    max_images: int | None = None,
    allow_incomplete: bool = False,
    photo_size: int | None = None,
) -> dict[str, Any]:
    """A split as retrieval is scored on it: `image_ids` and `images` (the image tower's
    input: pooled vectors (images, channels) of the centre crop, or with `photo_size` the
    photos' centre squares as pixels, uint8 (images, 3, photo_size, photo_size)), the
    queries (`query_ids`, `captions`, and `audio` for speech) and `query_image` (each
    query's image, an index into image_ids), and its `name` (registry.eval_set_name: by its
    images and queries). `max_images` keeps the first images in a stable order (and their
    queries)."""
    files = feature_files(features_uri, allow_incomplete)
    images = split_images(files, features_uri, split, every_crop=True)
    keep = images.image_ids[:max_images]
    index = {image: i for i, image in enumerate(keep)}
    if modality == "speech":
        if speech_uri is None:
            raise ValueError("speech retrieval needs clips (--speech)")
        clips = clips_of(speech_uri, images, allow_incomplete).sort_by("id")
        query_ids, captions = clips["id"].to_pylist(), clips["caption"].to_pylist()
        query_images, audio = clips["image_id"].to_pylist(), clips["audio"].to_pylist()
    else:
        query_ids = sorted(images.caption_image)
        captions = [images.captions[q] for q in query_ids]
        query_images, audio = [images.caption_image[q] for q in query_ids], None
    wanted = [i for i, image in enumerate(query_images) if image in index]
    if not wanted:
        raise ValueError(f"no {modality} queries for the {split!r} images of {features_uri}")
    if photo_size is None:
        inputs = images.pooled[: len(keep), 0]
    else:
        inputs = photo_pixels(photos(features_uri, images, keep), photo_size)
    query_ids = [query_ids[i] for i in wanted]
    return {
        "split": split,
        "name": eval_set_name(features_uri, split, len(query_ids), [keep, query_ids]),
        "image_ids": keep,
        "images": inputs,
        "query_ids": query_ids,
        "captions": [captions[i] for i in wanted],
        "audio": None if audio is None else [audio[i] for i in wanted],
        "query_image": np.array([index[query_images[i]] for i in wanted], dtype=np.int64),
    }


def relevance(eval_set: dict[str, Any]) -> np.ndarray:
    """(queries, images) bool: which image each query belongs to."""
    relevant = np.zeros((len(eval_set["query_ids"]), len(eval_set["image_ids"])), dtype=bool)
    relevant[np.arange(len(relevant)), eval_set["query_image"]] = True
    return relevant


def query_inputs(
    eval_set: dict[str, Any],
    modality: Modality,
    vocab: Vocabulary | None,
    audio: AudioFeatureConfig | None,
    max_tokens: int,
) -> np.ndarray:
    """The query tower's input for every query: MFCCs of the clip's start (no augmentation)
    or token ids."""
    if modality == "speech":
        return np.stack([clip_features(a, audio) for a in eval_set["audio"]])
    return vocab.encode_array(eval_set["captions"], max_tokens)


# ---------------------------------------------------------------- training rows


def train_pairs(
    features_uri: str,
    files: list[str],
    images: SplitImages,
    speech_uri: str | None,
    allow_incomplete: bool = False,
) -> ray.data.Dataset:
    """The train split's pairs as rows, read by Ray Data a row group at a time: `image_id`,
    `caption`, and `audio` for speech (each clip's image looked up in a map of the split's
    captions every task reads). The row groups come in a random order every epoch and the
    training core's local shuffle buffer mixes their rows; a photo's captions often share a
    row group, and those that meet in a batch are masked (match_mask), not negatives."""
    if speech_uri is not None:
        fs, _ = storage.resolve(speech_uri)
        split = ray.put((images.caption_image, set(images.image_ids)))
        rows = read_row_groups(fs, clip_files(speech_uri, allow_incomplete), CLIP_COLUMNS)
        keep = partial(_clip_pairs, split=(split,))
    else:
        fs, _ = storage.resolve(features_uri)
        rows = read_row_groups(fs, files, columns=["image_id", "caption", "split", "crop"])
        # The images' own captions: all the split's, or those of a train_fraction's draw.
        keep = partial(_train_records, split=TRAIN_SPLIT, images=(ray.put(images.image_ids),))
    rows = map_read(rows, keep)
    return rows.randomize_block_order()


def _clip_pairs(batch: pa.Table, split: tuple[ray.ObjectRef]) -> pa.Table:
    caption_image, known = fetched_once(split[0])
    return clips_in_split(batch, caption_image, known).select(["image_id", "caption", "audio"])


def teacher_pairs(
    features_uri: str, files: list[str], speech_uris: Sequence[str], allow_incomplete: bool = False
) -> ray.data.Dataset:
    """Clips that teach a speech tower through their captions alone (a teacher's caption
    embeddings; no photo): `image_id` null, `caption`, `audio`, from every output in
    `speech_uris`. A clip of a caption or image in the features' other splits than train is
    left out, so no dev or test caption is ever learned."""
    held_out = read_table(files, features_uri, ["id", "image_id"], pc.field("split") != TRAIN_SPLIT)
    unseen = ray.put(set(held_out["id"].to_pylist()) | set(held_out["image_id"].to_pylist()))
    parts = []
    for uri in speech_uris:
        fs, _ = storage.resolve(uri)
        rows = read_row_groups(fs, clip_files(uri, allow_incomplete), CLIP_COLUMNS)
        keep = partial(_teaching_clips, unseen=(unseen,))
        parts.append(map_read(rows, keep))
    return parts[0].union(*parts[1:]) if len(parts) > 1 else parts[0]


def _teaching_clips(batch: pa.Table, unseen: tuple[ray.ObjectRef]) -> pa.Table:
    held_out = fetched_once(unseen[0])
    seen = [
        caption not in held_out and image not in held_out
        for caption, image in zip(batch["caption_id"].to_pylist(), batch["image_id"].to_pylist())
    ]
    batch = batch.filter(pa.array(seen, pa.bool_()))
    no_image = pa.nulls(batch.num_rows, pa.string())
    return pa.table({"image_id": no_image, "caption": batch["caption"], "audio": batch["audio"]})


def _train_records(batch: pa.Table, split: str, images: tuple[ray.ObjectRef]) -> pa.Table:
    wanted = pc.field("image_id").isin(fetched_once(images[0]))
    batch = batch.filter((pc.field("split") == split) & (pc.field("crop") == 0) & wanted)
    return batch.select(["image_id", "caption"])


def train_examples(
    pairs: ray.data.Dataset,
    image_input: Callable[[list[str], np.random.Generator], np.ndarray],
    modality: Modality,
    query_input: Callable[[pa.Table, np.random.Generator], np.ndarray],
    targets: Callable[[list[str]], np.ndarray] | None = None,
) -> ray.data.Dataset:
    """Pairs as the loss reads them: `image` (what `image_input` makes of the image ids:
    `pooled_crops` or `photo_crops`), `image_group` and `caption_group` (the match mask's
    ids), and the query tower's input under the name `query_input` returns (`mfcc` or
    `tokens`). With `targets` (a teacher's caption embeddings) also `target` and
    `has_image`: rows without an image (null image_id) get zeros for it and a group of
    their own."""
    column = "mfcc" if modality == "speech" else "tokens"
    examples = partial(
        _examples, column=column, image_input=image_input, query_input=query_input, targets=targets
    )
    return map_read(pairs, examples)


def _examples(
    batch: pa.Table,
    column: str,
    image_input: Callable[[list[str], np.random.Generator], np.ndarray],
    query_input: Callable[[pa.Table, np.random.Generator], np.ndarray],
    targets: Callable[[list[str]], np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    rng = np.random.default_rng()  # a fresh draw every epoch
    image_ids = batch["image_id"].to_pylist()
    captions = batch["caption"].to_pylist()
    has_image = np.array([i is not None for i in image_ids], dtype=bool)
    known = image_input([i for i in image_ids if i is not None], rng)
    image = np.zeros((len(image_ids), *known.shape[1:]), dtype=known.dtype)
    image[has_image] = known
    # Rows without an image (teaching clips) get negative groups of their own.
    own = -1 - np.arange(len(image_ids))
    examples = {
        "image": image,
        "image_group": np.array([group_id(i) if i else g for i, g in zip(image_ids, own)]),
        "caption_group": np.array([group_id(c) for c in captions]),
        column: query_input(batch, rng),
    }
    if targets is None:
        return examples
    return examples | {"target": targets(captions), "has_image": has_image}


def pooled_crops(
    images: SplitImages, dtype: type = np.float32
) -> Callable[[list[str], np.random.Generator], np.ndarray]:
    """The image column of the features' vectors: one of each image's crops at random."""
    shared = ray.put({"pooled": images.pooled, "index": images.index})
    return partial(_pooled_crops, shared=(shared,), dtype=dtype)


def _pooled_crops(
    image_ids: list[str], rng: np.random.Generator, shared: tuple[ray.ObjectRef], dtype: type
) -> np.ndarray:
    images = fetched_once(shared[0])
    rows = np.array([images["index"][i] for i in image_ids], dtype=np.int64)
    crops = rng.integers(images["pooled"].shape[1], size=len(rows))
    return images["pooled"][rows, crops].astype(dtype)


def photo_crops(
    features_uri: str, images: SplitImages, size: int, augment: PhotoAugmentConfig
) -> Callable[[list[str], np.random.Generator], np.ndarray]:
    """The image column of a fine-tuned CNN: each image's photo, distorted (photo_pixels).
    The photos' bytes are one array every task reads without a copy, with their offsets."""
    data = photos(features_uri, images, images.image_ids)
    shared = ray.put(
        {
            "jpegs": np.frombuffer(b"".join(data), dtype=np.uint8),
            "ends": np.cumsum([len(photo) for photo in data]),
            "index": images.index,
        }
    )
    return partial(_photo_crops, shared=(shared,), size=size, augment=augment)


def _photo_crops(
    image_ids: list[str],
    rng: np.random.Generator,
    shared: tuple[ray.ObjectRef],
    size: int,
    augment: PhotoAugmentConfig,
) -> np.ndarray:
    stored = fetched_once(shared[0])
    ends, data = stored["ends"], []
    for image in image_ids:
        n = stored["index"][image]
        data.append(stored["jpegs"][ends[n - 1] if n else 0 : ends[n]].tobytes())
    return photo_pixels(data, size, rng, augment)
