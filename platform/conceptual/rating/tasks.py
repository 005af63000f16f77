"""Rating task sets: what raters are asked, one row per item, and the answers they may give.

A task set is a folder: `tasks.parquet` (the items) and `tasks.json` (the manifest: kind,
question, raters per item, seed, where the items came from), then the `_SUCCESS` marker.

| kind | an item shows | answer (as stored, and as a ratings CSV gives it) |
|---|---|---|
| caption_quality | a photo and a caption | `GOOD` or `BAD` |
| retrieval | a query and the images retrieved for it (its top 5, and its own image when that is not among them), in a shuffled order; or (image_to_query) a photo and the captions retrieved for it, one of its own added the same way | one `Y` or `N` per image (caption) shown, in the order shown: `YNNNNY` |
| zh_caption | a photo and every approach's Chinese caption of it, side by side in a shuffled order (the fluency paper's Table 6) | relevance and fluency, each 1-5, for each caption in the order shown: `4/5 3/4 5/5` |
| fluency_label | a machine-translated Chinese sentence (and its photo) | `FLUENT`, `NOT_FLUENT` or `DIFFICULT` (the fluency paper's grades; conceptual.fluency.human_labels) |

Every item names its `approach` (what wrote the caption: `model`, `baseline`, a fluency
strategy, a translator, ...); a zh_caption item names one for each of its `sentences`,
whose order is the order shown (drawn by the task set's seed), so an answer's N-th grade is
the N-th sentence's approach's. The page never shows an approach; items and a zh_caption
item's sentences are shuffled, so a rater cannot tell approaches apart by their order
either. A zh_caption task set written before side-by-side items (one caption an item, no
`sentences`) reads as items of one sentence each, answered `4/5` as then.
"""

from __future__ import annotations

import hashlib
import io
import json
import posixpath
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from conceptual import storage

ITEMS, MANIFEST = "tasks.parquet", "tasks.json"
GOOD, BAD = "GOOD", "BAD"
MATCH, NO_MATCH = "Y", "N"
SCALES = ("relevance", "fluency")  # what a zh_caption rater grades each caption on
SCALE = range(1, 6)  # each grade: 1-5
# zh_caption: an answer takes 4 characters a sentence ("4/5 "), and the rating page's
# database keeps answers in 64 (conceptual.rating.store).
MAX_SENTENCES = 16
GRADES = FLUENT, NOT_FLUENT, DIFFICULT = ("FLUENT", "NOT_FLUENT", "DIFFICULT")  # fluency_label
RESULTS_SHOWN = 5  # retrieval: the top 5, as in the spoken-captions paper's Table 4
# Retrieval items: a query and the images found for it, or a photo and the captions found.
DIRECTIONS = QUERY_TO_IMAGE, IMAGE_TO_QUERY = ("query_to_image", "image_to_query")
PHOTOS = ("whole", "crop")  # a photo as taken, or the centre square the model saw

RESULT = pa.struct(
    [
        ("image_id", pa.string()),
        ("image", pa.binary()),
        ("text", pa.string()),  # a caption found for a photo (image_to_query); else null
        ("rank", pa.int32()),  # 1-5; null for the query's own image added below the top 5
        ("correct", pa.bool_()),  # the query's own image, the photo's own caption (automatic R@k)
    ]
)
SENTENCE = pa.struct([("approach", pa.string()), ("text", pa.string())])
ITEM = pa.schema(
    [
        ("item_id", pa.string()),
        ("approach", pa.string()),  # hidden from raters; null for zh_caption (its sentences')
        ("text", pa.string()),  # the caption, or the retrieval query (zh_caption: null)
        ("image", pa.binary()),  # the photo (null for retrieval: its images are in results)
        ("image_id", pa.string()),
        ("source_id", pa.string()),  # the record the item was made from
        ("results", pa.list_(RESULT)),  # retrieval only
        ("sentences", pa.list_(SENTENCE)),  # zh_caption only: in the order shown
    ]
)


class AnswerError(ValueError):
    """An answer that is not one of the question's answers; the message says which are."""


@dataclass(frozen=True)
class Kind:
    name: str
    question: str
    answer_format: str  # for people: what an answer looks like

    def parse(self, answer: str, item: dict[str, Any]) -> str:
        """The answer in its stored form, or AnswerError."""
        text = (answer or "").strip().upper()
        if self.name == "caption_quality" and text in (GOOD, BAD):
            return text
        if self.name == "retrieval":
            shown = len(item["results"] or [])
            if len(text) == shown and set(text) <= {MATCH, NO_MATCH}:
                return text
        if self.name == "fluency_label" and text.replace(" ", "_") in GRADES:
            return text.replace(" ", "_")
        if self.name == "zh_caption":
            given = [grade.split("/") for grade in text.split()]
            if len(given) == len(sentences(item)) and all(
                len(parts) == 2 and all(p.isdigit() and int(p) in SCALE for p in parts)
                for parts in given
            ):
                return " ".join(f"{int(relevance)}/{int(fluency)}" for relevance, fluency in given)
        raise AnswerError(
            f"{answer!r} is not an answer to a {self.name} item: {self.answer_format}"
        )


KINDS = {
    kind.name: kind
    for kind in (
        Kind(
            "caption_quality",
            "Does the caption describe the photo? GOOD: it is accurate and reads as natural "
            "language; BAD otherwise.",
            "GOOD or BAD",
        ),
        Kind(
            "retrieval",
            "Which of these images does the query describe? Mark every image it fits.",
            "one Y (match) or N per image shown, in the order shown, e.g. YNNNN",
        ),
        Kind(
            "zh_caption",
            "How relevant is each Chinese caption to the photo (1: unrelated, 5: describes "
            "it exactly), and how fluent is it as Chinese (1: not Chinese, 5: as a native "
            "speaker writes)?",
            "relevance/fluency, each 1-5, for each caption in the order shown, e.g. 4/5 3/4",
        ),
        Kind(
            "fluency_label",
            "Is the Chinese sentence fluent, as a native speaker would write it (whatever it "
            "says of the photo)? FLUENT, NOT_FLUENT, or DIFFICULT when you cannot tell.",
            "FLUENT, NOT_FLUENT or DIFFICULT",
        ),
    )
}


def kind(name: str) -> Kind:
    if name not in KINDS:
        raise ValueError(f"unknown kind {name!r}: one of {', '.join(KINDS)}")
    return KINDS[name]


def sentences(item: dict[str, Any]) -> list[dict[str, str]]:
    """The captions an item shows, each with its approach, in the order shown: a zh_caption
    item's `sentences`, else (another kind, or a zh_caption task set written before them)
    its one text."""
    return item.get("sentences") or [{"approach": item["approach"], "text": item["text"]}]


def grades(answer: str) -> list[tuple[int, int]]:
    """A stored zh_caption answer as (relevance, fluency) for each sentence shown."""
    return [(int(g.split("/")[0]), int(g.split("/")[1])) for g in answer.split()]


def item_id(*key: str) -> str:
    """A stable id from what the item shows: the same source gives the same id."""
    return hashlib.sha1("\t".join(key).encode()).hexdigest()[:16]


def sample(population: Sequence[Any], count: int | None, rng: random.Random) -> list[Any]:
    """`count` of the population (all of it when None or larger), reproducibly for one seed:
    the population must come in a stable order."""
    if count is None or count >= len(population):
        return list(population)
    return rng.sample(list(population), count)


@dataclass
class TaskSet:
    manifest: dict[str, Any]
    items: list[dict[str, Any]]

    @property
    def kind(self) -> Kind:
        return kind(self.manifest["kind"])

    @property
    def question(self) -> str:
        """What raters are asked: the manifest's (a direction may ask its own), else the kind's."""
        return self.manifest.get("question") or self.kind.question

    @property
    def name(self) -> str:
        """What answers are stored under: the manifest's `task_set`."""
        return self.manifest["task_set"]

    @property
    def raters(self) -> int:
        return int(self.manifest["raters"])

    def by_id(self) -> dict[str, dict[str, Any]]:
        return {item["item_id"]: item for item in self.items}

    def write(self, uri: str) -> None:
        """Into the folder `uri` (the marker last), replacing a task set written there before
        and nothing else."""
        for name in (storage.SUCCESS, ITEMS, MANIFEST):
            storage.delete(storage.join(uri, name))
        buffer = io.BytesIO()
        pq.write_table(pa.Table.from_pylist(self.items, schema=ITEM), buffer)
        storage.write_bytes(storage.join(uri, ITEMS), buffer.getvalue())
        storage.write_json(storage.join(uri, MANIFEST), self.manifest)
        storage.write_json(storage.join(uri, storage.SUCCESS), {"items": len(self.items)})


def new_task_set(
    kind_name: str,
    items: list[dict[str, Any]],
    raters: int,
    seed: int,
    source: dict[str, Any],
    rng: random.Random,
) -> TaskSet:
    """Items shuffled, and each item's sentences (approaches mixed), and a manifest naming
    the set by its items and the order each shows its sentences in: answers are stored
    under the set's name and read by position."""
    ordered, items = items, [shuffled_sentences(item, rng) for item in items]
    rng.shuffle(items)
    ids = [item["item_id"] for item in items]
    if len(set(ids)) != len(ids):
        raise ValueError("two items of the task set show the same thing")
    orders = [[s["approach"] for s in item["sentences"]] for item in items if item.get("sentences")]
    if any(len(order) > MAX_SENTENCES for order in orders):
        raise ValueError(f"an item shows at most {MAX_SENTENCES} sentences side by side")
    key = [kind_name, ids, *([orders] if orders else [])]
    digest = hashlib.sha1(json.dumps(key).encode()).hexdigest()[:12]
    manifest = {
        "task_set": f"{kind_name}-{digest}",
        "kind": kind_name,
        "question": KINDS[kind_name].question,
        "answers": KINDS[kind_name].answer_format,
        "raters": raters,
        "seed": seed,
        "items": len(items),
        # In the order the source gave them: the first is the one being evaluated.
        "approaches": list(dict.fromkeys(s["approach"] for i in ordered for s in sentences(i))),
        "source": source,
    }
    return TaskSet(manifest, items)


def shuffled_sentences(item: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """The item with its sentences (if any) in a shuffled order: the order shown."""
    if not item.get("sentences"):
        return item
    shown = list(item["sentences"])
    rng.shuffle(shown)
    return {**item, "sentences": shown}


def read_task_set(uri: str) -> TaskSet:
    """A rating_tasks job's output (the folder, or its tasks.parquet); it must have finished."""
    if posixpath.basename(uri.rstrip("/")) == ITEMS:
        uri = posixpath.dirname(uri.rstrip("/"))
    if not storage.exists(storage.join(uri, MANIFEST)):
        raise storage.StorageError(f"no task set at {uri}: give a rating_tasks job's --output")
    if not storage.exists(storage.join(uri, storage.SUCCESS)):
        raise storage.StorageError(
            f"the task set at {uri} has no {storage.SUCCESS} marker: its rating_tasks job did "
            "not finish; run it again"
        )
    manifest = storage.read_json(storage.join(uri, MANIFEST))
    table = pq.read_table(io.BytesIO(storage.read_bytes(storage.join(uri, ITEMS))))
    return TaskSet(manifest, table.to_pylist())
