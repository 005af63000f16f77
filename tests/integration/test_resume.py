"""A killed curation resumes where it stopped (pipelines/dataflow/journal.py): what the journal holds
is neither parsed nor fetched again, and the output, ids and funnel equal an uninterrupted
run's. Here an attempt is stopped by cutting its journal back to what a kill would have
left (some finished batches, a half-written file); test_resume_kill.py kills a real
driver."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest
from curated_rows import outputs, own_files, scores_rounded

from conceptual import storage
from conceptual.config import load
from conceptual.pipelines.curation.curation import curate
from conceptual.pipelines.curation.curation_config import CurationConfig
from conceptual.pipelines.dataflow import journal as journaling
from conceptual_demo.corpus import generate_candidates, write_candidates
from conceptual_demo.images import build_images, demo_candidates, fetch_overrides
from conceptual_demo.server import serve_directory

pytestmark = pytest.mark.integration


def same_funnel(a: dict, b: dict) -> bool:
    keys = ("input", "kept", "rejected", "funnel", "captions", "splits", "entity_frequency")
    return all(a[k] == b[k] for k in keys)


def interrupted(monkeypatch, input_uri: str, output_uri: str, config, keep) -> list[str]:
    """A complete attempt whose journal is then cut back as a kill would have left it: of
    each step's files (in name order), those `keep(step, index)` keeps, plus a half-written
    one. Returns the journal files left."""
    monkeypatch.setattr(journaling.Journal, "delete", lambda self: None)
    curate(input_uri, output_uri, config)
    monkeypatch.undo()
    storage.delete(storage.join(output_uri, "_SUCCESS"))
    root = storage.join(output_uri, journaling.RESUME)
    fs, _ = storage.resolve(root)
    by_step: dict[int, list[str]] = {}
    for path in storage.list_files(root):
        if "/step-" in path:
            by_step.setdefault(int(path.split("/step-")[1].split("/")[0]), []).append(path)
    left = []
    for step, paths in sorted(by_step.items()):
        for index, path in enumerate(sorted(paths)):
            if keep(step, index):
                left.append(path)
            else:
                fs.delete_file(path)
        # a batch whose write the kill cut short: never read
        with fs.open_output_stream(f"{paths[0]}.0123abcd.tmp") as stream:
            stream.write(b"PAR1 half a file")
    return left


def test_a_text_run_resumes_and_equals_an_uninterrupted_one(ray_local, tmp_path, monkeypatch):
    write_candidates(generate_candidates(400, seed=5), str(tmp_path / "in.tsv"), fmt="cc_tsv")
    input_uri = str(tmp_path / "in.tsv")
    settings = ["with_images=false", "entity_frequency.more_than=2", "resources.batch_size=40"]
    config = load(CurationConfig, overrides=settings)
    clean = curate(
        input_uri,
        str(tmp_path / "clean"),
        load(CurationConfig, overrides=[*settings, "resume=false"]),
    )
    assert clean["resumed"] == 0

    out = str(tmp_path / "out")
    left = interrupted(monkeypatch, input_uri, out, config, keep=lambda step, i: i % 2 == 0)
    assert left, "the attempt wrote no journal"
    resumed = curate(input_uri, out, config)

    assert 0 < resumed["resumed"] < resumed["input"]
    assert same_funnel(resumed, clean)
    assert outputs(out) == outputs(str(tmp_path / "clean"))
    assert not storage.exists(storage.join(out, journaling.RESUME))  # complete: nothing to resume


@pytest.mark.slow  # three curations; the default run keeps the text resume above
def test_a_journal_of_other_settings_is_not_used(ray_local, tmp_path, monkeypatch):
    write_candidates(generate_candidates(120, seed=6), str(tmp_path / "in.tsv"), fmt="cc_tsv")
    input_uri, out = str(tmp_path / "in.tsv"), str(tmp_path / "out")
    first = load(CurationConfig, overrides=["with_images=false", "entity_frequency.more_than=1"])
    interrupted(monkeypatch, input_uri, out, first, keep=lambda step, i: True)
    other = load(
        CurationConfig,
        overrides=[
            "with_images=false",
            "entity_frequency.more_than=1",
            "text.filters.max_chars=80",
        ],
    )
    stats = curate(input_uri, out, other)
    assert stats["resumed"] == 0
    clean = curate(input_uri, str(tmp_path / "clean"), other.model_copy(update={"resume": False}))
    assert same_funnel(stats, clean)


@pytest.mark.slow  # a minute and a half; tests/e2e/test_resume_kill.py kills a real one
def test_an_image_run_resumes_without_fetching_what_it_has(ray_local, tmp_path, monkeypatch):
    catalogue = build_images(tmp_path / "images")
    with serve_directory(catalogue.directory) as server:
        rows = own_files(demo_candidates(catalogue, server.url, 120, seed=4), catalogue, server.url)
        write_candidates(rows, str(tmp_path / "in.tsv"), fmt="cc_tsv")
        input_uri = str(tmp_path / "in.tsv")
        settings = [
            *fetch_overrides(catalogue),
            "entity_frequency.more_than=1",
            "resources.batch_size=30",
            "resources.fetch_batch_size=10",
            "resources.vision_batch_size=8",
        ]
        config = load(CurationConfig, overrides=settings)
        clean = curate(
            input_uri, str(tmp_path / "clean"), config.model_copy(update={"resume": False})
        )

        out = str(tmp_path / "out")

        # the text step finished; half of the fetched batches were written; of those, the
        # vision step finished every other one
        def keep(step: int, index: int) -> bool:
            return step == 0 or (step == 1 and index % 2 == 0) or (step == 2 and index % 4 == 0)

        left = interrupted(monkeypatch, input_uri, out, config, keep)
        fs, _ = storage.resolve(out)
        fetched_before = set()
        for path in left:
            if "/step-1/" in path or "/step-2/" in path:
                with fs.open_input_file(path) as f:
                    fetched_before |= set(pq.read_table(f)["image_url"].to_pylist())
        before = server.requests
        resumed = curate(input_uri, out, config)
        requested = server.requests - before

    assert resumed["resumed"] == resumed["input"]  # the text step had finished every row
    assert same_funnel(resumed, clean)
    again, uninterrupted = outputs(out), outputs(str(tmp_path / "clean"))
    assert again["rejected"] == uninterrupted["rejected"]
    assert scores_rounded(again["curated"]) == scores_rounded(uninterrupted["curated"])
    # nothing the journal held after the fetch was asked for again (each row has a file of
    # its own; the server's error paths are shared), and what it lacked was
    paths_before = {url.removeprefix(server.url) for url in fetched_before}
    assert requested and not {p for p in paths_before & set(requested) if p.startswith("/row")}
