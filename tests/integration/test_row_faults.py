"""No row ends a curation job: each stage is made to raise on one chosen row (its real
operator runs, with one of its parts patched inside the Ray worker); the job completes,
that row is an internal_error of its stage in the rejected Parquet, the funnel, stats.json
and MLflow, and every other row comes out byte for byte as in a run without the fault.
Past the error budget the job fails with one line."""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter

import mlflow
import pytest
from curated_rows import outputs, own_files, scores_rounded
from fault_injection import Faulty, ship

from conceptual import storage
from conceptual.config import load
from conceptual.errors import INTERNAL_ERROR, TooManyErrors
from conceptual.pipelines.curation import curation
from conceptual.pipelines.curation.curation import curate, run
from conceptual.pipelines.curation.curation_config import CurationConfig
from conceptual.pipelines.curation.image_operators import fetch_images
from conceptual_demo.corpus import generate_candidates, write_candidates
from conceptual_demo.images import build_images, demo_candidates, fetch_overrides
from conceptual_demo.server import serve_directory

pytestmark = pytest.mark.integration

ship(__name__)  # the fault injectors run inside Ray workers


def what(argument) -> object:
    """What a patched part is looking at: a text, a spaCy doc's text (both lowercased: the
    parse restores capitals to caseless text), or a list of images."""
    text = getattr(argument, "text", argument)
    return text.lower() if isinstance(text, str) else text


def opening(text: str) -> str:
    """A caption's first words, as every text stage sees them."""
    return " ".join(text.lower().split()[:4])


def seen_in(needle, argument) -> bool:
    return needle in what(argument)


def holding(needle) -> tuple:
    """(hits, needle) for fault_injection: raise on what holds `needle`."""
    return functools.partial(seen_in, needle), needle


def faulty_fetch(batch, needle, **kwargs):
    if needle in batch["image_url"].to_pylist():
        raise ConnectionResetError("injected fault while fetching")
    return fetch_images(batch, **kwargs)


def with_faults(monkeypatch, patches: dict[str, list], fetch_url: str | None = None):
    """curation's per-candidate steps, with the NLP and vision actors' parts patched and the
    fetch raising on one URL."""
    real = curation.per_candidate_steps

    def steps(config):
        changed = []
        for step in real(config):
            if step.operator is fetch_images and fetch_url:
                step = dataclasses.replace(
                    step, operator=faulty_fetch, kwargs={"needle": fetch_url, **step.kwargs}
                )
            elif isinstance(step.operator, type) and step.operator.__name__ in patches:
                kwargs = {
                    "operator": step.operator,
                    "patches": patches[step.operator.__name__],
                    **step.kwargs,
                }
                step = dataclasses.replace(step, operator=Faulty, kwargs=kwargs)
            changed.append(step)
        return tuple(changed)

    monkeypatch.setattr(curation, "per_candidate_steps", steps)


def without(rows: list[dict], ids: set[str]) -> list[dict]:
    return [r for r in rows if r["id"] not in ids]


def unique_by(rows: list[dict], key: str) -> list[dict]:
    counts = Counter(r[key] for r in rows)
    return [r for r in rows if counts[r[key]] == 1]


# --- the text stages ---------------------------------------------------------------------

TEXT_SETTINGS = [
    "with_images=false",
    "entity_frequency.enabled=false",  # a global count: three rows less could change others
    "resources.batch_size=32",
    "samples=0",
]


@pytest.fixture(scope="module")
def text_input(ray_local, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("faults-text")
    write_candidates(generate_candidates(300, seed=11), str(tmp / "in.tsv"), fmt="cc_tsv")
    uri = "s3://conceptual/faults/text"
    storage.write_bytes(f"{uri}/input/in.tsv", (tmp / "in.tsv").read_bytes())
    config = load(CurationConfig, overrides=TEXT_SETTINGS)
    curate(f"{uri}/input", f"{uri}/clean", config)
    return uri, outputs(f"{uri}/clean")


def test_a_row_that_raises_in_a_text_stage_is_rejected_and_the_rest_are_unchanged(
    text_input, monkeypatch
):
    uri, clean = text_input
    every = clean["curated"] + clean["rejected"]
    openings = Counter(opening(r["alt_text"] or "") for r in every)
    kept = [
        r for r in unique_by(clean["curated"], "image_url") if openings[opening(r["alt_text"])] == 1
    ]
    chosen = {"text": kept[0], "syntax": kept[1], "hypernymize": kept[2]}
    patches = {
        "NlpOperator": [
            ("curator.filters.check", *holding(opening(chosen["text"]["alt_text"]))),
            ("curator.filters.check_doc", *holding(opening(chosen["syntax"]["alt_text"]))),
            (
                "curator.hypernymizer.transform_doc",
                *holding(opening(chosen["hypernymize"]["alt_text"])),
            ),
        ]
    }
    with_faults(monkeypatch, patches)
    config = load(CurationConfig, overrides=[*TEXT_SETTINGS, "errors.max_rate=0.02"])
    stats, run_id = run(f"{uri}/input", f"{uri}/faulty", config)

    faulty = outputs(f"{uri}/faulty")
    failed = {r["id"]: r for r in faulty["rejected"] if r["reason"] == INTERNAL_ERROR}
    assert len(failed) == len(chosen)
    assert {r["stage"]: r["id"] for r in failed.values()} == {
        stage: row["id"] for stage, row in chosen.items()
    }
    for stage, row in chosen.items():
        assert failed[row["id"]]["alt_text"] == row["alt_text"]  # kept whole, to replay
        assert failed[row["id"]]["detail"].startswith("IndexError: [E1002] injected fault")
        assert stats["rejected"][stage][INTERNAL_ERROR] == 1
    on_disk = storage.read_json(f"{uri}/faulty/stats.json")
    assert on_disk["rejected"]["hypernymize"][INTERNAL_ERROR] == 1
    metrics = mlflow.get_run(run_id).data.metrics
    assert metrics["rejected.hypernymize.internal_error"] == 1
    # every other row, byte for byte
    ids = set(failed)
    assert faulty["curated"] == without(clean["curated"], ids)
    assert without(faulty["rejected"], ids) == without(clean["rejected"], ids)


@pytest.mark.slow  # the budget's line is unit-tested (test_quarantine.py); here the whole job
def test_past_the_error_budget_the_job_fails_with_one_line(text_input, monkeypatch):
    uri, clean = text_input
    kept = clean["curated"]
    # every kept caption's transformation raises: something is wrong with the system
    patches = {"NlpOperator": [("curator.hypernymizer.transform_doc", *holding(" "))]}
    with_faults(monkeypatch, patches)
    config = load(CurationConfig, overrides=TEXT_SETTINGS)
    with pytest.raises(TooManyErrors) as raised:
        curate(f"{uri}/input", f"{uri}/broken", config)
    message = str(raised.value)
    assert "\n" not in message and "stage hypernymize failed" in message
    assert "errors.max_rate=0.001" in message
    assert len(message.split("e.g. ids ")[1].split(";")[0].split(", ")) == 3
    assert len(kept) > 3
    assert not storage.exists(f"{uri}/broken/_SUCCESS")


# --- the image stages --------------------------------------------------------------------


@pytest.fixture(scope="module")
def image_input(ray_local, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("faults-images")
    catalogue = build_images(tmp / "images")
    server = serve_directory(catalogue.directory)
    rows = own_files(demo_candidates(catalogue, server.url, 80, seed=3), catalogue, server.url)
    write_candidates(rows, str(tmp / "in.tsv"), fmt="cc_tsv")
    uri = "s3://conceptual/faults/images"
    storage.write_bytes(f"{uri}/input/in.tsv", (tmp / "in.tsv").read_bytes())
    settings = [
        *fetch_overrides(catalogue),
        "entity_frequency.enabled=false",
        "resources.batch_size=32",
        "resources.vision_batch_size=8",
        "samples=0",
    ]
    curate(f"{uri}/input", f"{uri}/clean", load(CurationConfig, overrides=settings))
    yield uri, settings, outputs(f"{uri}/clean")
    server.stop()


@pytest.mark.slow  # 67 s with its fetch: the text stage's, above, keeps the quarantine in the default run
def test_a_row_that_raises_in_an_image_stage_is_rejected_and_the_rest_are_unchanged(
    image_input, monkeypatch
):
    uri, settings, clean = image_input
    every = clean["curated"] + clean["rejected"]
    openings = Counter(opening(r["alt_text"] or "") for r in every)
    # one file behind one URL and one candidate: a fault on its URL or bytes hits one row
    files = Counter(r["image_url"].split("?")[0] for r in every)
    kept = [
        r
        for r in unique_by(clean["curated"], "image_id")
        if openings[opening(r["alt_text"])] == 1 and files[r["image_url"].split("?")[0]] == 1
    ]
    assert len(kept) >= 3, "the demo input keeps too few distinct images for this test"
    chosen = {"fetch": kept[0], "image": kept[1], "overlap": kept[2]}
    patches = {
        "VisionOperator": [
            ("filters.check_many", *holding(chosen["image"]["image"])),
            ("matcher.match", *holding(opening(chosen["overlap"]["alt_text"]))),
        ]
    }
    with_faults(monkeypatch, patches, fetch_url=chosen["fetch"]["image_url"])
    config = load(CurationConfig, overrides=[*settings, "errors.max_rate=0.05"])
    stats = curate(f"{uri}/input", f"{uri}/faulty", config)

    faulty = outputs(f"{uri}/faulty")
    failed = {r["id"]: r for r in faulty["rejected"] if r["reason"] == INTERNAL_ERROR}
    assert len(failed) == len(chosen)
    assert {r["stage"]: r["id"] for r in failed.values()} == {
        stage: row["id"] for stage, row in chosen.items()
    }
    assert failed[chosen["fetch"]["id"]]["detail"] == (
        "ConnectionResetError: injected fault while fetching"
    )
    assert all(stats["rejected"][stage][INTERNAL_ERROR] == 1 for stage in chosen)
    ids = set(failed)
    # Byte for byte but the classifier's scores: the rows batched with a failed one are
    # classified again in batches of another size, whose float sums differ in the last bits.
    assert scores_rounded(faulty["curated"]) == scores_rounded(without(clean["curated"], ids))
    assert without(faulty["rejected"], ids) == without(clean["rejected"], ids)
