"""The records that flow through the platform, defined once (docs/design.md, "Records").

A `Rejection` is what every filter returns instead of keep: a stable reason string (it is a
metric name, so never reword one) and a free-form detail for people. A filter returns
`Rejection | None` (None: keep); a check that also yields something (the cleaned text, a
decoded image, the matched words, the fetched bytes, a caption) returns a small record of it
with the same `Rejection | None` as its field `rejection`: TextCheck (text/filters.py),
ImageCheck (vision/images.py), LabelMatch (vision/labels.py), Fetched (vision/fetch.py),
Transformed (text/hypernymize/).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import pyarrow as pa


@dataclass(frozen=True)
class Rejection:
    reason: str
    detail: str = ""


@dataclass(frozen=True)
class Stage:
    """A row of a job's funnel (curation's: pipelines/curation/curation.py; the speech and
    fluency-scoring jobs' too)."""

    name: str  # what a row it rejects carries in `stage`
    reasons: tuple[str, ...]  # what such a row carries in `reason`: metric names, never reworded
    settings: str  # what decides its rejections: the setting to change when it rejects all


def candidate_id(image_url: str | None, alt_text: str | None) -> str:
    """Stable id of a candidate: the same pair gets the same id in every run and shard."""
    key = f"{image_url or ''}\t{alt_text or ''}".encode("utf-8", "surrogatepass")
    return hashlib.sha1(key).hexdigest()[:20]


ENTITY = pa.struct(
    [
        ("text", pa.string()),  # the span as it stood in the alt-text
        (
            "label",
            pa.string(),
        ),  # spaCy entity label or the rule that matched (DATE, CARDINAL, PROPN...)
        ("action", pa.string()),  # "replaced" or "removed"
        ("replacement", pa.string()),  # the hypernym, or null when removed
        ("source", pa.string()),  # "wordnet", "entity_type", "rule"
    ]
)

# One classifier label of an image: an ImageNet class, which is a WordNet 3.0 noun synset.
LABEL = pa.struct(
    [
        ("wnid", pa.string()),  # WordNet id, "n" + 8-digit offset: n07920052
        ("name", pa.string()),  # human name of the class: "espresso"
        ("score", pa.float32()),  # softmax probability; the rater's confidence for a dataset label
        # A label the dataset itself carries (the released `labeled` config: Google's labels)
        # has a Freebase MID here and no wnid; a classifier's label has a wnid and no MID.
        ("mid", pa.string()),
    ]
)

# What every record of a candidate starts with: its id (candidate_id), where its image and
# page are, and its alt-text.
PAIR_FIELDS = [
    ("id", pa.string()),
    ("image_url", pa.string()),
    ("page_url", pa.string()),
    ("alt_text", pa.string()),
]

CANDIDATE = pa.schema(
    [
        *PAIR_FIELDS,
        ("image", pa.binary()),  # the image's bytes when they came with it; fetched otherwise
    ]
)

# A harvested candidate (conceptual.harvest, the harvest job's candidates/): a candidate
# with where it was found: the archive (`source`), the record's byte offset in it as stored
# (of its gzip member in a gzip-per-record file, where a reader can seek to it, as Common
# Crawl's index does; in a file compressed as one stream, which no reader can enter at an
# offset, only how far its compressed bytes had been read) and the
# page's declared language (`<html lang>`, else Content-Language; null when undeclared).
HARVESTED = pa.schema(
    [
        *PAIR_FIELDS,
        ("source", pa.string()),
        ("record_offset", pa.int64()),
        ("lang", pa.string()),
    ]
)

# An imported candidate (conceptual.importers): with the split its source states, which a
# curation keeps (pipelines/dataflow/readers.py); null where the source states none.
IMPORTED = CANDIDATE.append(pa.field("split", pa.string()))

# A candidate on its way through curation (pipelines/dataflow/readers.py reads it): the input fields
# and, once something rejects it, the stage, reason and detail (null while it is still in
# the running); `position`, where it stood in the input (its read unit and row there), the
# one key that tells two identical input rows apart, which a resumed run skips by; `split`
# and `labels` when the input carries them (the released dataset), null or [] otherwise.
IN_FLIGHT = (
    CANDIDATE.append(pa.field("stage", pa.string()))
    .append(pa.field("reason", pa.string()))
    .append(pa.field("detail", pa.string()))
    .append(pa.field("position", pa.int64()))
    .append(pa.field("split", pa.string()))
    .append(pa.field("labels", pa.list_(LABEL)))
)

# ...and from the first stage on (pipelines/dataflow/rows.py): what the stages add, filled as they
# run; a rejected row keeps its nulls and loses its image and embeddings. `embedding` (and
# `mirrored_embedding`, its mirror image's) is the image's CNN vector, the features job's
# pooled one, for the rules that compare images; [] when no rule asks for it, and never
# written out. `alignment_score`: the alignment scorer's cosine of the image and its caption
# (conceptual.vision.alignment), written into curated and rejected records alike; null
# where never scored (no alignment.scorer, or the pair stopped before it).
PROCESSED = (
    IN_FLIGHT.append(pa.field("caption", pa.string()))
    .append(pa.field("entities", pa.list_(ENTITY)))
    .append(pa.field("types", pa.list_(pa.string())))
    .append(pa.field("matched", pa.list_(pa.string())))
    .append(pa.field("width", pa.int32()))
    .append(pa.field("height", pa.int32()))
    .append(pa.field("image_id", pa.string()))
    .append(pa.field("embedding", pa.list_(pa.float32())))
    .append(pa.field("mirrored_embedding", pa.list_(pa.float32())))
    .append(pa.field("alignment_score", pa.float32()))
)

CURATED = pa.schema(
    [
        *PAIR_FIELDS,
        ("caption", pa.string()),  # lowercase, tokenized, hypernymized
        ("entities", pa.list_(ENTITY)),
        ("types", pa.list_(pa.string())),  # the concepts the entity-frequency rule counted
        ("labels", pa.list_(LABEL)),  # classifier labels, best first
        ("matched", pa.list_(pa.string())),  # caption words that matched a label's terms
        ("image", pa.binary()),  # JPEG bytes
        ("width", pa.int32()),
        ("height", pa.int32()),
        ("split", pa.string()),  # "train", "val" or "test", by a stable hash of the image
        ("image_id", pa.string()),  # image_id() of `image`; null without one (text-only runs)
        ("alignment_score", pa.float32()),  # the alignment scorer's cosine; null: not scored
    ]
)

# The language of a curated caption and where its words came from, for captions that are not
# the English of the curation pipeline (conceptual.fluency.flickr8k_cn: Chinese,
# machine-translated or written by people). A separate schema, not nullable columns of CURATED: the curation
# pipeline writes exactly CURATED's columns (pipelines/dataflow/rows.py, to_curated), and every reader
# of curated records reads the columns it names, so English records stay as they are and a
# reader takes a record without `language` as English. Nullable: a native caption has no
# English original.
LANGUAGE_FIELDS = [
    ("language", pa.string()),  # ISO 639-1: "zh"
    ("source", pa.string()),  # who wrote it: "baidu", "google" (MT), "native", "human"
    ("original", pa.string()),  # the English sentence it translates; null when written natively
    ("text", pa.string()),  # the sentence unsegmented (normalized); `caption` is its words
    # The fluency classifier's score in [0, 1] (jobs.score_fluency; fluent above 0.5); null
    # until scored.
    ("fluency", pa.float32()),
]
CURATED_LANGUAGE = pa.schema([*CURATED, *LANGUAGE_FIELDS])

# A record that a job after curation (features, score_fluency, build_index) failed to
# process (reason `internal_error`): the rejection, then the record's own columns as that
# job read it, its image or audio bytes included (such rows are rare, and the job replays
# them from its rejected/ folder once the cause is fixed). REJECTED is this shape too, over
# the candidate's fields less its image.
REJECTION = pa.schema(
    [
        ("id", pa.string()),
        ("stage", pa.string()),
        ("reason", pa.string()),
        ("detail", pa.string()),
    ]
)


def rejected_records(schema: pa.Schema) -> pa.Schema:
    """The rejected rows of records of `schema`: REJECTION's fields, then `schema`'s others."""
    return pa.schema([*REJECTION, *(f for f in schema if f.name not in REJECTION.names)])


# Rejected records keep every input field but the image bytes: the URL refetches them, and
# a crawl's rejected images would outweigh the dataset. The alignment score as a curated
# record's: why low_alignment said so.
REJECTED = rejected_records(pa.schema([*PAIR_FIELDS, ("alignment_score", pa.float32())]))


# CNN features of one curated image (one row per crop when augmented crops are asked for).
FEATURES = pa.schema(
    [
        ("id", pa.string()),
        ("image_id", pa.string()),  # image_id() of the photo: the records of one image share it
        ("split", pa.string()),
        ("caption", pa.string()),
        ("crop", pa.int16()),  # 0: the centre crop; 1..n: augmented crops
        ("pooled", pa.list_(pa.float32())),  # global average of the grid: channels
        ("grid", pa.list_(pa.float32())),  # row-major (rows, cols, channels)
        ("grid_shape", pa.list_(pa.int32())),  # [rows, cols, channels]
        # From a curated record with LANGUAGE_FIELDS; null for the English of CURATED.
        ("language", pa.string()),
        ("fluency", pa.float32()),
    ]
)


# A retrieval index's tables (pipelines/retrieval/build_index.py writes them beside their vectors,
# conceptual.retrieval_index reads them): row i of a table is row i of its <target>.npy.
INDEX_IMAGES = pa.schema(
    [
        ("image_id", pa.string()),
        ("id", pa.string()),  # its first caption record: where its photo is
        ("caption", pa.string()),  # that record's
        ("split", pa.string()),
        ("image_url", pa.string()),  # null when the curated data was not reachable
    ]
)
INDEX_CAPTIONS = pa.schema(
    [
        ("id", pa.string()),  # the caption record
        ("image_id", pa.string()),
        ("caption", pa.string()),
        ("split", pa.string()),
    ]
)
INDEX_CLIPS = pa.schema(
    [
        ("id", pa.string()),  # the clip
        ("caption_id", pa.string()),
        ("image_id", pa.string()),
        ("caption", pa.string()),  # the transcript
        ("split", pa.string()),
    ]
)


def image_id(image: bytes) -> str:
    """The identity of an image: the SHA-1 of its bytes (hex), so that the captions, clips
    and embeddings of one image join without guessing, whatever URL or file it came from."""
    return hashlib.sha1(image).hexdigest()


def record_image_id(stored: str | None, image: bytes | None) -> str | None:
    """A record's image_id: the one it carries, else its image's (an import's records, and
    curated data from before curation wrote the column, carry none); None with neither."""
    if stored is not None or not image:
        return stored
    return image_id(image)


# One spoken caption: synthesized (conceptual.speech.synthesis) or recorded and imported
# (conceptual.speech.human); every job that takes clips takes either.
CLIP = pa.schema(
    [
        ("id", pa.string()),  # the clip: its caption's id, source and seed
        ("caption_id", pa.string()),  # the id of the caption record it speaks
        ("image_id", pa.string()),  # image_id() of its image; null when the input had none
        ("image_url", pa.string()),
        ("caption", pa.string()),  # the text spoken
        ("split", pa.string()),
        ("audio", pa.binary()),  # FLAC, 16 kHz mono, 16-bit
        ("sample_rate", pa.int32()),
        ("duration", pa.float32()),  # seconds
        ("source", pa.string()),  # the engine (espeak-ng, flite, festival) or the import's folder
        # The drawn parameters (an imported clip: its voice is its source, the rest neutral).
        ("voice", pa.string()),  # the engine's name of it: en-us+m1, kal16, ked_diphone...
        ("rate", pa.float64()),  # speaking rate, 1.0 = the voice's normal speed
        ("pitch", pa.float64()),  # semitones relative to the voice
        ("gain", pa.float64()),  # dB
        ("seed", pa.int64()),  # the generator's seed, from the caption's id
        ("engine_wpm", pa.int32()),  # espeak-ng's -s; null for other engines and imports
        ("gain_applied", pa.float64()),  # gain less any lowering that kept the peak in range
    ]
)
# A recorded corpus that says which of the image's captions a clip speaks and who spoke it
# (the Flickr Audio Caption Corpus, conceptual.speech.facc): CLIP and these.
RECORDING_FIELDS = [
    ("caption_index", pa.int32()),  # N of the image's captions (Flickr8k's IMAGE#N)
    ("speaker", pa.string()),  # the corpus's id of the speaker; null where it names none
]
CLIP_RECORDED = pa.schema([*CLIP, *RECORDING_FIELDS])
