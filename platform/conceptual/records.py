"""The records that flow through the platform, defined once (DESIGN.md, "Records").

A `Rejection` is what every filter returns instead of keep: a stable reason string (it is a
metric name, so never reword one) and a free-form detail for people.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import pyarrow as pa


@dataclass(frozen=True)
class Rejection:
    reason: str
    detail: str = ""


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

CANDIDATE = pa.schema(
    [
        ("id", pa.string()),
        ("image_url", pa.string()),
        ("page_url", pa.string()),
        ("alt_text", pa.string()),
    ]
)

CURATED = pa.schema(
    [
        ("id", pa.string()),
        ("image_url", pa.string()),
        ("page_url", pa.string()),
        ("alt_text", pa.string()),
        ("caption", pa.string()),  # lowercase, tokenized, hypernymized
        ("entities", pa.list_(ENTITY)),
        ("types", pa.list_(pa.string())),  # the concepts the entity-frequency rule counted
    ]
)

REJECTED = pa.schema(
    [
        ("id", pa.string()),
        ("stage", pa.string()),
        ("reason", pa.string()),
        ("detail", pa.string()),
        ("image_url", pa.string()),
        ("page_url", pa.string()),
        ("alt_text", pa.string()),
    ]
)
