"""The image stages of curation as Ray Data operators: fetching (a plain function with a
thread pool per batch, since it holds nothing worth keeping), then one vision actor for the
image filters, the classifier, the image&text overlap rule and the learned alignment score
(conceptual.vision does the work). Each works on the rows still in the running and marks
those it rejects.
"""

from __future__ import annotations

import io
import posixpath
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from PIL import Image, ImageOps

from conceptual.errors import failing_as
from conceptual.pipelines.dataflow.journal import ONE_ROW, batch_name, write_batch
from conceptual.pipelines.dataflow.rows import pending, reject, table
from conceptual.records import Rejection, image_id
from conceptual.vision.alignment import (
    ALIGNMENT_STAGE,
    LOW_ALIGNMENT,
    AlignmentConfig,
    combined,
    load_scorer,
)
from conceptual.vision.cnn import CnnConfig, FeatureExtractor, ImageNetClassifier
from conceptual.vision.fetch import FetchConfig, Fetcher
from conceptual.vision.images import ImageFilterConfig, ImageFilters
from conceptual.vision.labels import LabelMatcher, LabelSourceConfig, OverlapConfig, caption_nouns

FETCH_STAGE, IMAGE_STAGE, OVERLAP_STAGE = "fetch", "image", "overlap"


def fetch_images(batch: pa.Table, fetch: FetchConfig, journal=None) -> pa.Table:
    """Download the images of the candidates still in the running that came without one.
    With a `journal` ((filesystem, directory): pipelines/dataflow/journal.py), each fetched row is
    written there as it comes, in a file of its own under ONE_ROW, and once the batch is
    done its rows as one file (their own files then go): a run killed meanwhile fetches
    again only the images that were in flight."""
    rows = batch.to_pylist()
    todo = [i for i in pending(rows) if rows[i]["image"] is None]
    written: dict[int, str] = {}  # row index: its own file's path

    def fetched(k: int, result) -> None:
        row = rows[todo[k]]
        if result.rejection:
            reject(row, FETCH_STAGE, result.rejection)
        else:
            row["image"] = result.data
        if journal is not None:
            filesystem, directory = journal
            one, own = table([row]), posixpath.join(directory, ONE_ROW)
            name = batch_name(one)
            write_batch(one, filesystem, own, name)
            written[todo[k]] = posixpath.join(own, name)

    Fetcher(fetch).fetch_many([rows[i]["image_url"] for i in todo], on_done=fetched)
    if written:
        filesystem, directory = journal
        write_batch(table([rows[i] for i in sorted(written)]), filesystem, directory)
        for path in written.values():
            filesystem.delete_file(path)
    return table(rows)


@dataclass(frozen=True)
class ImageVerdict:
    """What the image stages found about one image, whatever caption came with it."""

    width: int | None
    height: int | None
    rejection: Rejection | None
    labels: tuple[dict, ...] = ()
    embedding: np.ndarray | None = None  # the CNN's pooled vector (FeatureExtractor.pooled)
    mirrored_embedding: np.ndarray | None = None  # the same of the image mirrored


class VisionOperator:
    """Image filters (header checks, a guarded decode, the unsafe detector), then the
    classifier's labels and the image&text overlap rule, on one decode per image. With
    `embeds`, each image that passes the filters also gets its embedding (and with
    `mirrored` its mirror image's), for the rules that compare images. With an
    `alignment.scorer`, each pair whose image passes the filters gets its `alignment_score`,
    and overlap.rule decides it by the label rule, the score against `alignment.min_score`,
    or both (keep_fraction's threshold is decided later, over the whole run:
    pipelines/curation/alignment_rule.py).

    Crawls repeat images (one stock photo on many pages, under many URLs), so verdicts are
    remembered by the hash of the image's bytes: a repeat is neither decoded nor classified.
    """

    def __init__(
        self,
        image: ImageFilterConfig,
        cnn: CnnConfig,
        overlap: OverlapConfig,
        labels: LabelSourceConfig | None = None,
        embeds: bool = False,
        mirrored: bool = False,
        alignment: AlignmentConfig | None = None,
        cache: int = 4096,
    ):
        self.filters = ImageFilters(image)
        # The features job's extractor at its default size: an embedding here is the pooled
        # vector that job writes for the photo, which the platform's models are trained on.
        self.extractor = FeatureExtractor(cnn) if embeds else None
        self.mirrored = mirrored
        self.overlap = overlap
        # overlap.rule=alignment leaves the labels out: nothing would read them.
        self.matches_labels = overlap.enabled and overlap.rule != "alignment"
        # With labels.source=dataset, the rows bring their labels (the released `labeled`
        # config) and no classifier is loaded; a row's labels are replaced only by its own.
        source = (labels or LabelSourceConfig()).source
        self.classifies = self.matches_labels and source == "classifier"
        if self.classifies:
            self.classifier = ImageNetClassifier(cnn)
        if self.matches_labels:
            self.matcher = LabelMatcher(overlap)
        alignment = alignment or AlignmentConfig()
        self.min_score = alignment.min_score
        self.scorer = (
            load_scorer(alignment.scorer, cnn.device, alignment.batch_size)
            if alignment.scorer
            else None
        )
        self.verdicts: OrderedDict[str, ImageVerdict] = OrderedDict()
        self.cache = cache

    def judge(self, images: dict[str, bytes]) -> None:
        """Verdicts for the images (by image_id) not judged before."""
        new = [key for key in images if key not in self.verdicts]
        with failing_as(IMAGE_STAGE):
            checked = self.filters.check_many([images[key] for key in new])
        decoded = [(key, check.image) for key, check in zip(new, checked) if not check.rejection]
        labels = {}
        if self.classifies and decoded:
            # min_score is the matcher's to apply: it still judges a photo on its best guess.
            with failing_as(OVERLAP_STAGE):
                found = self.classifier.classify(
                    [image for _, image in decoded], self.overlap.top_k
                )
            labels = {key: tuple(image_labels) for (key, _), image_labels in zip(decoded, found)}
        embeddings = self.embed(decoded)
        for key, (info, _, rejection) in zip(new, checked):
            size = (info.width, info.height) if info is not None else (None, None)
            vectors = embeddings.get(key, (None, None))
            self.verdicts[key] = ImageVerdict(*size, rejection, labels.get(key, ()), *vectors)
            if len(self.verdicts) > self.cache:
                self.verdicts.popitem(last=False)

    def embed(self, decoded: list) -> dict[str, tuple[np.ndarray, np.ndarray | None]]:
        """(embedding, mirrored embedding or None) of each decoded image, by image_id."""
        if self.extractor is None or not decoded:
            return {}
        keys, images = zip(*decoded)
        with failing_as(IMAGE_STAGE):
            vectors = self.extractor.pooled(images)
            mirrors = (
                self.extractor.pooled([ImageOps.mirror(i) for i in images])
                if self.mirrored
                else None
            )
        return {
            key: (vectors[i], mirrors[i] if mirrors is not None else None)
            for i, key in enumerate(keys)
        }

    def score(self, rows: list[dict]) -> list[float]:
        """The scorer's cosine of each row's image (its embedding, or the image itself for a
        scorer that reads pixels: it passed the guarded decode already) and caption."""
        with failing_as(ALIGNMENT_STAGE):
            if self.scorer.reads == "embedding":
                images = np.stack([row["embedding"] for row in rows])
            else:
                images = [Image.open(io.BytesIO(row["image"])).convert("RGB") for row in rows]
            return self.scorer.score(images, [row["caption"] for row in rows]).tolist()

    def label_rule(self, row: dict) -> Rejection | None:
        # The original words and the hypernymized caption both count: "Labrador" in the
        # alt-text or "dog" in the caption can each confirm a dog label; as nouns only
        # ("stands" is no tripod's "stand").
        words = f"{row['alt_text']} {row['caption'] or ''}"
        with failing_as(OVERLAP_STAGE):
            nouns = caption_nouns(row["types"], row["entities"])
            match = self.matcher.match(words, row["labels"], nouns)
        row["matched"] = match.words
        return match.rejection

    def __call__(self, batch: pa.Table) -> pa.Table:
        rows = batch.to_pylist()
        keys = {i: image_id(rows[i]["image"]) for i in pending(rows)}
        self.judge({key: rows[i]["image"] for i, key in keys.items()})
        for i, key in keys.items():
            row, verdict = rows[i], self.verdicts[key]
            row.update(image_id=key, width=verdict.width, height=verdict.height)
            row.update(embedding=verdict.embedding, mirrored_embedding=verdict.mirrored_embedding)
            if self.classifies:
                row["labels"] = list(verdict.labels)
            if verdict.rejection:
                reject(row, IMAGE_STAGE, verdict.rejection)
        # Every pair whose image passed is scored, in one batch, whatever the label rule says.
        seen = [rows[i] for i in keys if rows[i]["reason"] is None]
        if self.scorer is not None and seen:
            for row, score in zip(seen, self.score(seen)):
                row["alignment_score"] = score
        for row in seen:
            labels = self.label_rule(row) if self.matches_labels else None
            rejection = combined(self.overlap.rule, labels, row["alignment_score"], self.min_score)
            if rejection:
                stage = ALIGNMENT_STAGE if rejection.reason == LOW_ALIGNMENT else OVERLAP_STAGE
                reject(row, stage, rejection)
        return table(rows)
