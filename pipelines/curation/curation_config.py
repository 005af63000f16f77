"""The curation's settings (configs/curation.yaml lists every key with its default), and an
import's of the released dataset (configs/import_conceptual.yaml): what each stage of
pipelines/curation/curation.py keeps or rejects, and how the pipeline runs.
"""

from __future__ import annotations

from typing import Literal

from pydantic import model_validator

from conceptual.candidates import FORMATS
from conceptual.config import Config
from conceptual.errors import ErrorsConfig
from conceptual.harvest import HarvestRules
from conceptual.limits import BYTES_PER_PIXEL, LimitsConfig, over_budget
from conceptual.pipelines.curation.decontamination import DecontaminateConfig
from conceptual.pipelines.curation.near_duplicates import NearDedupConfig
from conceptual.pipelines.curation.released import ReleasedConfig
from conceptual.pipelines.curation.shards import WebDatasetConfig
from conceptual.splits import SplitConfig
from conceptual.text.curate import TextCurationConfig
from conceptual.vision.alignment import AlignmentConfig
from conceptual.vision.cnn import CnnConfig
from conceptual.vision.fetch import FetchConfig
from conceptual.vision.images import ImageFilterConfig
from conceptual.vision.labels import LabelSourceConfig, OverlapConfig


class EntityFrequencyConfig(Config):
    """Spec §5: keep a caption only if every concept it mentions occurs more than
    `more_than` times among all captions that reached this stage (the paper: 100)."""

    enabled: bool = True
    more_than: int = 100


class DedupConfig(Config):
    """Exact duplicates are kept once, the first in input order: the same image URL, and
    (when the images are fetched) the same image bytes under another URL. `near`: one photo
    re-encoded, resized, cropped or mirrored (pipelines/curation/near_duplicates.py)."""

    by_url: bool = True
    by_image: bool = True
    # Keys (24 bytes each) compared in one table in the driver; more are hash-partitioned
    # across the cluster first, which costs seconds of fixed overhead but no process
    # holds them all.
    keys_per_partition: int = 262_144
    near: NearDedupConfig = NearDedupConfig()


class ResourcesConfig(Config):
    """How the stages run; the executor decides placement."""

    nlp_actors: int | None = None  # None: as many as the cluster has CPUs for
    cpus_per_actor: float = 1.0
    # Candidates per call of an NLP actor. Each call's output is one block of the passes
    # after it, which pay per block: 512 cost a million candidates 7 s more than 2,048.
    batch_size: int = 2048
    # Bytes of input per read task and block: the unit the NLP actors balance over.
    range_bytes: int = 1 << 20
    fetch_tasks: int = 4  # concurrent fetch tasks, each with fetch.threads connections
    fetch_batch_size: int = 256
    vision_actors: int | None = None  # None: one per GPU when the cluster has GPUs, else per CPU
    vision_batch_size: int = 32  # images per call of a vision actor
    # Candidates per task in the light passes after those stages (the entity-frequency
    # count and rule, the writes, the tallies). A task per input block cost more in
    # scheduling than these passes do work. None: 16384, or 512 when rows carry images.
    pass_batch_size: int | None = None

    def rows_per_pass_task(self, with_images: bool) -> int:
        return self.pass_batch_size or (512 if with_images else 16384)


class CurationConfig(Config):
    input_format: Literal[FORMATS] = "auto"  # type: ignore[valid-type]
    # Web archives as input (WARC, WAT) are harvested first, by these rules, into
    # OUTPUT/harvest/ (pipelines/curation/harvest.py); the candidates they give are the input.
    harvest: HarvestRules = HarvestRules()
    # False: the text stages only (caption corpora without images); curated records then
    # carry no image, and the split hashes the image URL.
    with_images: bool = True
    # "released": the alt-texts are captions already (the released Conceptual Captions,
    # conceptual.jobs.import_conceptual), kept exactly as they are in place of the text
    # stages, with their split (`released`; pipelines/curation/released.py).
    captions: Literal["curated", "released"] = "curated"
    released: ReleasedConfig = ReleasedConfig()
    text: TextCurationConfig = TextCurationConfig()
    fetch: FetchConfig = FetchConfig()
    image: ImageFilterConfig = ImageFilterConfig()
    overlap: OverlapConfig = OverlapConfig()
    # The learned image&text alignment score (conceptual.vision.alignment); overlap.rule
    # says how it combines with the label rule.
    alignment: AlignmentConfig = AlignmentConfig()
    # The labels the overlap rule matches: the classifier's, or those the rows bring
    # (`dataset`: the released `labeled` config's; no classifier is loaded then).
    labels: LabelSourceConfig = LabelSourceConfig()
    cnn: CnnConfig = CnnConfig()
    dedup: DedupConfig = DedupConfig()
    # Evaluation images no training candidate may be a copy of (pipelines/curation/decontamination.py).
    decontaminate: DecontaminateConfig = DecontaminateConfig()
    entity_frequency: EntityFrequencyConfig = EntityFrequencyConfig()
    split: SplitConfig = SplitConfig()
    errors: ErrorsConfig = ErrorsConfig()
    # A killed run started again with the same command goes on where it stopped
    # (pipelines/dataflow/journal.py); false starts over.
    resume: bool = True
    webdataset: WebDatasetConfig = WebDatasetConfig()
    resources: ResourcesConfig = ResourcesConfig()
    # The most bytes one candidate may take in a worker (conceptual/limits.py).
    limits: LimitsConfig = LimitsConfig()
    samples: int = 50  # before/after pairs logged to MLflow
    experiment: str = "curation"

    @property
    def embeds_images(self) -> bool:
        """Whether the vision step gives each image its embedding (records.PROCESSED's
        `embedding`): only for a rule that compares images, since it costs a second pass of
        the CNN over each image."""
        return (
            self.dedup.near.enabled
            or bool(self.decontaminate.against)
            or self.alignment.reads_embeddings
        )

    @model_validator(mode="after")
    def _images_needed(self) -> CurationConfig:
        if self.webdataset.enabled and not self.with_images:
            raise ValueError("webdataset shards hold images: they need with_images=true")
        if self.embeds_images and not self.with_images:
            raise ValueError(
                "a rule that compares images (dedup.near, decontaminate.against) needs "
                "with_images=true"
            )
        return self

    @model_validator(mode="after")
    def _alignment_rule(self) -> CurationConfig:
        rule, alignment = self.overlap.rule, self.alignment
        if rule == "labels" and alignment.threshold_rule:
            raise ValueError(
                "alignment.min_score and alignment.keep_fraction decide nothing with "
                "overlap.rule=labels: set overlap.rule=alignment, either or both"
            )
        if rule != "labels" and not alignment.threshold_rule:
            raise ValueError(
                f"overlap.rule={rule} needs alignment.scorer and alignment.min_score or "
                "alignment.keep_fraction"
            )
        if rule in ("either", "both") and not self.overlap.enabled:
            raise ValueError(
                f"overlap.rule={rule} combines the score with the label rule, which "
                "overlap.enabled=false turns off"
            )
        if alignment.scorer is not None and not self.with_images:
            raise ValueError("alignment.scorer scores images: it needs with_images=true")
        return self

    @model_validator(mode="after")
    def _within_the_row_budget(self) -> CurationConfig:
        pixels = self.image.max_pixels * BYTES_PER_PIXEL
        problem = over_budget(
            self.limits.row_bytes,
            **{"fetch.max_bytes": self.fetch.max_bytes, "image.max_pixels": pixels},
        )
        if problem:
            raise ValueError(problem)
        return self


class ImportConceptualConfig(CurationConfig):
    """conceptual.jobs.import_conceptual's settings: the curation's, with the defaults of an
    import of the released dataset (configs/import_conceptual.yaml).

    The released pairs passed the paper's filters, its image&text rule with Google's own
    labels among them; the rule run again with another classifier's labels would drop pairs
    for that classifier's misses, not the captions', so it is off (on, it can match the
    `labeled` config's own labels: labels.source=dataset). The entity-frequency rule counts
    the concepts of a parse that released captions never get: off. Exact duplicates (one
    image URL on several rows, one photo under several URLs) are kept once, as in a
    curation: a model trained on the import should not see one photo twice. The image
    filters stay on, since the web has changed since the
    release: what a URL serves now may be a placeholder, a thumbnail, an HTML page or
    broken. They tell that by the paper's thresholds (JPEG, both sides > 400 px, decodable,
    safe), all but the aspect ratio: a photo's shape was the paper's choice among the crawl,
    made before the release and not a sign of a gone image (image.max_aspect=2 makes it
    again). Fetching refuses loopback and private addresses as a curation does: a local
    mirror of the images is fetched only where the user names it
    (`fetch.allow_hosts=[127.0.0.1]`)."""

    captions: Literal["curated", "released"] = "released"
    image: ImageFilterConfig = ImageFilterConfig(max_aspect=float("inf"))
    overlap: OverlapConfig = OverlapConfig(enabled=False)
    entity_frequency: EntityFrequencyConfig = EntityFrequencyConfig(enabled=False)
