"""The curation pipeline on Ray Data: the whole funnel of docs/spec/curation.md.

    read -> text -> syntax -> hypernymize   (one NLP actor pool, one spaCy parse per text)
         -> fetch -> image -> overlap       (fetch tasks with a thread pool each, feeding
                                             one vision actor pool: GPUs when the cluster has them)
         -> deduplicate -> entity_frequency (global steps: a tally over all rows, then a
                                             decision on each)
         -> split                           (train/val/test by a stable hash of the image)
         -> curated/ and rejected/ Parquet, optional WebDataset shards, stats.json, _SUCCESS

The paper ran the image filters before the text transformation. Here hypernymization runs
with the text filters, on the parse they already made; every rule but the global entity
count judges one candidate alone, so the kept set is the same in either order, and the
order chosen means no image is downloaded for a caption the transformation would reject.
A candidate failing several rules is counted at the first stage that saw it. The stages,
their reasons, settings, operators and resources are listed once, in `steps` below
(records.Stage, pipelines/dataflow/steps.py's Step); STAGES and the funnel follow from that list.
The settings are pipelines/curation/curation_config.py's.

Rejected candidates travel with the kept ones, marked with stage/reason/detail, so the two
outputs are a partition of the input by construction; the written files are counted again
before the run is declared complete.

Output layout under OUTPUT (a path or s3:// URI):
    curated/*.parquet       records.CURATED (with the JPEG bytes, labels and split)
    rejected/*.parquet      records.REJECTED
    shards/SPLIT/NNNNN.tar  WebDataset shards (img2dataset's names), when webdataset.enabled
    stats.json              funnel, rejections by stage and reason, caption and split statistics
    _SUCCESS                written last; its absence means the output is incomplete
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping
from typing import Any

import ray
import ray.data

from conceptual import funnel, lineage, storage, tracking
from conceptual.candidates import READ_REASONS, READ_STAGE
from conceptual.funnel import tally
from conceptual.pipelines.curation import decontamination, near_duplicates
from conceptual.pipelines.curation.alignment_rule import keep_top, per_row
from conceptual.pipelines.curation.curation_config import CurationConfig
from conceptual.pipelines.curation.curation_report import curation_stats, samples, written
from conceptual.pipelines.curation.image_operators import (
    FETCH_STAGE,
    IMAGE_STAGE,
    OVERLAP_STAGE,
    VisionOperator,
    fetch_images,
)
from conceptual.pipelines.curation.near_duplicates import embedding_rows, mark_found
from conceptual.pipelines.curation.nlp_operator import NlpOperator
from conceptual.pipelines.curation.released import (
    CAPTION_REASONS,
    RESIZE_STAGE,
    released_captions,
    resize_images,
)
from conceptual.pipelines.curation.shards import write_shards
from conceptual.pipelines.dataflow.executors import Resources
from conceptual.pipelines.dataflow.journal import RESUME, Journal, fingerprint
from conceptual.pipelines.dataflow.readers import most_blocks, read_candidates
from conceptual.pipelines.dataflow.rows import (
    DEDUPLICATE_STAGE,
    DUPLICATE,
    EMBEDDINGS,
    ENTITY_FREQUENCY_STAGE,
    RARE_TYPE,
    concept_tally,
    duplicate_keys,
    find_duplicates,
    gathered,
    mark_duplicates,
    mark_rare,
    outcome_tally,
    rare_concepts,
    without_samples,
    write_outcomes,
)
from conceptual.pipelines.dataflow.steps import (
    GlobalStep,
    Step,
    checked,
    fitted,
    per_candidate,
    run_global_steps,
    run_steps,
)
from conceptual.records import Stage
from conceptual.storage import SUCCESS
from conceptual.text.bounds import TEXT_STAGE
from conceptual.text.curate import (
    HYPERNYMIZE_REASONS,
    HYPERNYMIZE_STAGE,
    SYNTAX_REASONS,
    SYNTAX_STAGE,
    TEXT_REASONS,
)
from conceptual.vision.alignment import check_scorer
from conceptual.vision.fetch import FETCH_REASONS
from conceptual.vision.images import IMAGE_REASONS
from conceptual.vision.labels import OVERLAP_REASONS

# --- the stages --------------------------------------------------------------------------

READ = Stage(
    READ_STAGE, READ_REASONS, "input_format, or the input itself (every row was unreadable)"
)
TEXT = Stage(
    TEXT_STAGE,
    TEXT_REASONS,
    "text.filters.* (text.filters.disabled=[reason, ...] turns single rules off)",
)
SYNTAX = Stage(
    SYNTAX_STAGE,
    SYNTAX_REASONS,
    "text.filters.max_noun_ratio, or text.filters.disabled=[reason, ...]",
)
HYPERNYMIZE = Stage(HYPERNYMIZE_STAGE, HYPERNYMIZE_REASONS, "text.hypernym.*")
RELEASED = Stage(
    TEXT_STAGE,
    CAPTION_REASONS,
    "text.filters.max_chars (released captions are kept as they are)",
)
FETCH = Stage(
    FETCH_STAGE,
    FETCH_REASONS,
    "fetch.* (fetch.allow_hosts for a private address or a port not in fetch.allow_ports: "
    "fetch.allow_hosts=[127.0.0.1] for a server on this machine)",
)
IMAGE = Stage(IMAGE_STAGE, IMAGE_REASONS, "image.*")
OVERLAP = Stage(
    OVERLAP_STAGE, OVERLAP_REASONS, "overlap.* (overlap.enabled=false turns the rule off)"
)
RESIZE = Stage(RESIZE_STAGE, (), "image.resize.* (image.resize.short_side=null turns it off)")
DEDUPLICATE = Stage(DEDUPLICATE_STAGE, (DUPLICATE,), "dedup.by_url, dedup.by_image")
DECONTAMINATE = Stage(
    decontamination.DECONTAMINATE_STAGE, (decontamination.IN_EVAL_SET,), "decontaminate.*"
)
NEAR_DUPLICATES = Stage(
    near_duplicates.NEAR_DUPLICATES_STAGE, (near_duplicates.NEAR_DUPLICATE,), "dedup.near.*"
)
ENTITY_FREQUENCY = Stage(
    ENTITY_FREQUENCY_STAGE,
    (RARE_TYPE,),
    "entity_frequency.more_than (the paper's 100 is for millions of captions: a small input "
    "needs a small value such as 1, or entity_frequency.enabled=false)",
)


# The columns the readers fill in every row; the image, split and labels only when the input
# carries them, so no step may count on them.
READ_COLUMNS = ("id", "image_url", "page_url", "alt_text", "position")


def steps(config: CurationConfig) -> tuple[Step | GlobalStep, ...]:
    """The stages as operators, in order, each finding what it needs (`checked`): `read`
    (the readers) comes before them; the per-candidate steps, then the global ones."""
    return checked((*per_candidate_steps(config), *global_steps(config)), READ_COLUMNS)


def global_steps(config: CurationConfig) -> tuple[GlobalStep, ...]:
    """Exact duplicates; then, where they are asked for, the candidates that copy an
    evaluation image and the near-duplicates (both by the images' embeddings); then the
    entity-frequency rule (which so counts each photo once)."""
    by_image = config.dedup.by_image and config.with_images
    per_task = config.resources.rows_per_pass_task(config.with_images)
    deduplicate = GlobalStep(
        (DEDUPLICATE,),
        duplicate_keys,
        find_duplicates,
        mark_duplicates,
        {
            "by_url": config.dedup.by_url,
            "by_image": by_image,
            "keys_per_partition": config.dedup.keys_per_partition,
        },
        per_task,
        gathers=False,
        needs=("position", "image_url", *(("image_id",) if by_image else ())),
    )
    by_embedding = {"gathers": False, "needs": ("position", "id", *EMBEDDINGS)}
    decontaminate = GlobalStep(
        (DECONTAMINATE,),
        embedding_rows,
        decontamination.find_in_eval_set,
        mark_found,
        {**config.decontaminate.model_dump(), "cnn": config.cnn},
        per_task,
        **by_embedding,
    )
    near = GlobalStep(
        (NEAR_DUPLICATES,),
        embedding_rows,
        near_duplicates.find_near_duplicates,
        mark_found,
        config.dedup.near.model_dump(exclude={"enabled"}),
        per_task,
        **by_embedding,
    )
    entity_frequency = GlobalStep(
        (ENTITY_FREQUENCY,),
        concept_tally,
        rare_concepts,
        mark_rare,
        config.entity_frequency.model_dump(),
        per_task,
        needs=("types",),
    )
    compare_images = (
        *((decontaminate,) if config.decontaminate.against else ()),
        *((near,) if config.dedup.near.enabled else ()),
    )
    return (*keep_top(config, per_task), deduplicate, *compare_images, entity_frequency)


def per_candidate_steps(config: CurationConfig) -> tuple[Step, ...]:
    resources = config.resources
    text = Step(
        (TEXT, SYNTAX, HYPERNYMIZE),
        NlpOperator,
        {"text": config.text},
        # Ray Data restarts a lost actor and retries its batches (max_restarts=-1 by default).
        Resources(resources.batch_size, resources.nlp_actors, resources.cpus_per_actor),
        needs=("alt_text",),
        adds=("caption", "entities", "types"),
        materialize=True,  # the NLP pool is gone before the vision pool, which gets every CPU
    )
    if config.captions == "released":
        text = Step(
            (RELEASED,),
            released_captions,
            {"max_chars": config.text.filters.max_chars, "split": config.released.split},
            # As light as reading: no CPU reserved (the vision pool may hold every CPU), and
            # so a bounded number of tasks.
            Resources(resources.batch_size, resources.fetch_tasks, cpus=0, tasks=True),
            needs=("alt_text",),
            adds=("caption", "entities", "types", "split"),
        )
    if not config.with_images:
        return (text,)
    fetching = Step(
        (FETCH,),
        fetch_images,
        {"fetch": config.fetch},
        # Fetching waits on the network, not a CPU: its tasks reserve none (they would starve
        # behind the vision actors otherwise) and their number is capped instead.
        Resources(resources.fetch_batch_size, resources.fetch_tasks, cpus=0, tasks=True),
        needs=("image_url",),
        adds=("image",),
        journals_itself=True,
    )
    vision = Step(
        (IMAGE, OVERLAP, *per_row(config)),
        VisionOperator,
        {
            "image": config.image,
            "cnn": config.cnn,
            "overlap": config.overlap,
            "labels": config.labels,
            "embeds": config.embeds_images,
            "alignment": config.alignment,
            "mirrored": config.dedup.near.enabled and config.dedup.near.mirrored,
        },
        Resources(
            resources.vision_batch_size,
            resources.vision_actors,
            resources.cpus_per_actor,
            cnn=config.cnn,
        ),
        needs=("image", "alt_text", "caption", "types", "entities"),
        adds=("width", "height", "labels", "matched", "image_id", *EMBEDDINGS, "alignment_score"),
        materialize=True,
    )
    if not config.image.resize.enabled:
        return (text, fetching, vision)
    resize = Step(
        (RESIZE,),
        resize_images,
        {"resize": config.image.resize, "max_pixels": config.image.max_pixels},
        # After the vision pool is gone (it materialized): a CPU per task.
        Resources(resources.vision_batch_size, None, resources.cpus_per_actor, tasks=True),
        needs=("image",),
        adds=("image", "width", "height", "image_id"),
        materialize=True,
    )
    return (text, fetching, vision, resize)


def funnel_stages(config: CurationConfig) -> tuple[Stage, ...]:
    """Every stage a candidate can be rejected at, in funnel order: a rule that is off
    (`overlap.enabled=false`, `entity_frequency.enabled=false`) rejects nothing, and its
    row would only say so."""
    off = {
        # the label rule rejects nothing itself when the score decides (alone, or with
        # `either`: a pair both rules fail is low_alignment)
        OVERLAP.name: not config.overlap.enabled or config.overlap.rule in ("alignment", "either"),
        ENTITY_FREQUENCY.name: not config.entity_frequency.enabled,
    }
    staged = (stage for step in steps(config) for stage in step.stages)
    return (READ, *(stage for stage in staged if not off.get(stage.name)))


def stages(config: CurationConfig) -> tuple[str, ...]:
    return tuple(stage.name for stage in funnel_stages(config))


STAGES = stages(CurationConfig())


@contextlib.contextmanager
def timed(phases: dict[str, float], phase: str) -> Iterator[None]:
    """Time a phase into `phases` and print a progress line when it ends."""
    started = time.monotonic()
    yield
    phases[phase] = round(time.monotonic() - started, 2)
    print(f"  {phase:<18}{phases[phase]:>7.1f} s", flush=True)


def resume_settings(config: CurationConfig) -> dict[str, Any]:
    """The settings a resumed run must share with the one it resumes: all that decides a
    row's outcome or its position (not how many workers ran it, nor what is logged)."""
    settings = config.model_dump(mode="json", exclude={"resources", "samples", "experiment"})
    return {**settings, "range_bytes": config.resources.range_bytes}


def curate(
    input_uri: str,
    output_uri: str,
    config: CurationConfig,
    run_id: str | None = None,
    harvested: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run the pipeline; return the stats that were written to OUTPUT/stats.json (with the
    MLflow run id when the run is tracked). `harvested`: the funnel of the harvest that
    wrote the input into OUTPUT/harvest/ (stats.json's `harvest`)."""
    # A rerun clears the output first: an input inside it would be deleted. (The jobs refuse
    # this as they read their arguments, jobs/arguments.py; this guards a direct call.) The
    # candidates harvested into OUTPUT/harvest/ are the run's own, and never cleared here.
    if harvested is None:
        storage.refuse_overlap({"the output": output_uri}, {"the input": input_uri})
    decontamination.check(config.decontaminate)  # a missing evaluation set fails here
    check_scorer(config.alignment)  # a missing scorer fails here, before any Ray work
    started = time.monotonic()
    cleared(output_uri, config)
    table, journal = steps(config), None
    if config.resume:
        identity = fingerprint(input_uri, resume_settings(config))
        journal = Journal.open(output_uri, identity, len(per_candidate(table)))
        if journal.resumed_rows:
            print(f"  resuming: {journal.resumed_rows} candidates done before", flush=True)

    phases: dict[str, float] = {}  # wall seconds of each phase, for stats.json
    with timed(phases, "read_and_process"):
        candidates = read_candidates(
            input_uri,
            config.input_format,
            config.resources.range_bytes,
            journal,
            splits=config.captions == "released",
            line_bytes=config.limits.line_bytes,
            # a shard's image is held as a fetched one is: at most fetch.max_bytes
            image_bytes=config.fetch.max_bytes,
        )
        # No more NLP actors than the input has blocks for (1,000 candidates are one).
        cpus = int(ray.cluster_resources().get("CPU", 1))
        blocks = most_blocks(input_uri, config.input_format, config.resources.range_bytes, cpus)
        # materialized (its last step is): the global steps need it all
        processed = run_steps(candidates, fitted(table, blocks), journal)

    with timed(phases, "global_rules"):  # their tallies and decisions
        decided, reports = run_global_steps(processed, table)
        del processed
    with timed(phases, "write"):
        counts, shards = write_records(decided, output_uri, config)
        tallies = tally(without_samples(counts))
        del decided
    with timed(phases, "statistics"):
        stats = curation_stats(config, output_uri, stages(config), tallies, reports, shards)
    with timed(phases, "samples"):
        stats["samples"] = samples(counts, output_uri, config.samples)
        del counts
    # candidates an earlier attempt of this run had finished (pipelines/dataflow/journal.py)
    stats["resumed"] = journal.resumed_rows if journal is not None else 0
    stats["seconds"] = round(time.monotonic() - started, 2)
    stats["seconds_by_phase"] = phases
    if run_id:
        stats["mlflow_run_id"] = run_id
    if harvested is not None:
        stats["harvest"] = harvested
    storage.write_json(storage.join(output_uri, "stats.json"), funnel.without_samples(stats))
    marker = {"input": stats["input"], "kept": stats["kept"]}
    storage.write_json(storage.join(output_uri, SUCCESS), marker)
    if journal is not None:
        journal.delete()  # the output is complete: nothing left to resume
    return stats


def cleared(output_uri: str, config: CurationConfig) -> None:
    """What a previous run wrote in the output, its marker first (from here on the output is
    visibly incomplete); the resume journal stays when the run resumes."""
    storage.delete(storage.join(output_uri, SUCCESS))
    resumed = () if config.resume else (RESUME,)
    for part in ("curated", "rejected", "shards", "stats.json", *resumed):
        storage.delete(storage.join(output_uri, part))


def write_records(
    decided: ray.data.Dataset, output_uri: str, config: CurationConfig
) -> tuple[Any, dict[str, Any] | None]:
    """One pass over the decided rows: the global rules reject their rows, the split is
    assigned, the rows are written and counted, and the samples are drawn (the counts, for
    stats.json); then the WebDataset shards of what was kept, when asked for. The written
    files are read again only to count them."""
    fs, path = storage.resolve(output_uri)
    written_out = decided.map_batches(
        write_outcomes,
        fn_kwargs={
            "split": config.split,
            "filesystem": fs,
            "directory": path,
            "samples": config.samples,
        },
        batch_format="pyarrow",
        batch_size=config.resources.rows_per_pass_task(config.with_images),
    )
    counts = gathered(written_out, outcome_tally)
    if not config.webdataset.enabled:
        return counts, None
    curated = written(output_uri, "curated")
    return counts, write_shards(curated, storage.join(output_uri, "shards"), config.webdataset)


def where_it_went(stats: Mapping[str, Any], output_uri: str, config: CurationConfig) -> str:
    """What the curate and import_conceptual jobs print after the funnel: where the kept and
    the rejected records went (an import's kept ones by split), or why nothing was kept."""
    curated = storage.join(output_uri, "curated")
    if stats["kept"]:
        splits = ", ".join(f"{name} {n}" for name, n in stats.get("splits", {}).items())
        by_split = f": {splits}" if config.captions == "released" else ""
        lines = [f"curated:  {curated}  ({stats['kept']} records{by_split})"]
    else:
        lines = [f"curated:  nothing kept, so nothing written to {curated}"]
        lines += [f"          {hint}" for hint in nothing_kept_hint(stats, config).splitlines()]
    if stats["input"] > stats["kept"]:
        rejected = storage.join(output_uri, "rejected")
        lines.append(
            f"rejected: {rejected}  ({stats['input'] - stats['kept']} records, with reasons)"
        )
    lines.append(f"stats:    {storage.join(output_uri, 'stats.json')}")
    return "\n".join(lines)


def nothing_kept_hint(stats: Mapping[str, Any], config: CurationConfig) -> str:
    """Which stage removed the last candidates, and the setting that changes it; then, in
    the same run, a later stage that would remove them all too: the entity-frequency rule
    (a concept must occur more than `more_than` times), when fewer candidates than that
    reached the stage that stopped them. One line each."""
    if not stats["input"]:
        return "the input held no candidates"
    last = next(row for row in reversed(stats["funnel"]) if row["rejected"])
    reasons = ", ".join(f"{r} {n}" for r, n in stats["rejected"][last["stage"]].items())
    setting = next(s.settings for s in funnel_stages(config) if s.name == last["stage"])
    more_than = config.entity_frequency.more_than
    if last["stage"] == ENTITY_FREQUENCY_STAGE:
        setting = f"{setting}; it is {more_than} now"
    rejected = f"the {last['stage']} stage rejected the last {last['entering']} ({reasons})"
    hints = [f"{rejected}: see {setting}"]
    names = stages(config)
    later = ENTITY_FREQUENCY_STAGE in names[names.index(last["stage"]) + 1 :]
    if later and more_than >= last["entering"]:
        hints.append(
            f"then the entity_frequency stage would reject them all: no concept of "
            f"{last['entering']} candidates occurs more than entity_frequency.more_than="
            f"{more_than} times (a small crawl: 0, as examples/pipeline_crawl.yaml sets it)"
        )
    return "\n".join(hints)


def run(
    input_uri: str | list[str], output_uri: str, config: CurationConfig
) -> tuple[dict[str, Any], str]:
    """The curation job: one MLflow run around the pipeline, web archives harvested first
    (pipelines/curation/harvest.py, harvest_first). Returns (stats, run id)."""
    from conceptual.pipelines.curation.harvest import harvest_first, log_harvest

    inputs = [input_uri] if isinstance(input_uri, str) else input_uri
    with tracking.start_run(config.experiment, job="curate") as active:
        tracking.log_config(config)
        source, harvested = harvest_first(inputs, output_uri, config.harvest)
        stats = curate(source, output_uri, config, active.info.run_id, harvested)
        funnel.log_to_mlflow(stats, " ".join(inputs), output_uri)
        if harvested is not None:
            log_harvest(harvested, "harvest.")
        for input_uri in inputs:
            lineage.log_read(input_uri, context="source")  # the candidates, read whole
        lineage.log_written(output_uri)
        return stats, active.info.run_id
