"""What a small curation pays for besides its work (BENCHMARKS.md, "CPU-seconds of a small
curation"): no more NLP actors than the input has blocks for, samples drawn by the write
pass instead of a second read of the output, and workers that import no more than their
step needs. No Ray needed: the pool sizes are computed against a stated cluster."""

from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from conceptual.pipelines.curation import curation_report
from conceptual.pipelines.curation.curation import per_candidate_steps, steps
from conceptual.pipelines.curation.curation_config import CurationConfig
from conceptual.pipelines.dataflow import executors
from conceptual.pipelines.dataflow.readers import most_blocks
from conceptual.pipelines.dataflow.rows import write_outcomes
from conceptual.pipelines.dataflow.steps import Step, fitted
from conceptual.records import PROCESSED
from conceptual.splits import SplitConfig


@pytest.fixture
def four_cpus(monkeypatch):
    monkeypatch.setattr(executors.ray, "cluster_resources", lambda: {"CPU": 4.0})


def test_a_one_block_input_starts_one_nlp_actor(four_cpus):
    config = CurationConfig(with_images=False)
    (text, *_) = fitted(steps(config), blocks=1)
    assert text.resources.placement()["compute"].min_size == 1
    (three, *_) = fitted(steps(config), blocks=3)
    assert three.resources.placement()["compute"].min_size == 3
    (unknown, *_) = fitted(steps(config), blocks=None)  # a Parquet input: the whole cluster
    assert unknown.resources.placement()["compute"].min_size == 4
    (many, *_) = fitted(steps(config), blocks=40)
    assert many.resources.placement()["compute"].min_size == 4


def test_a_pool_of_a_set_size_and_the_later_pools_are_left_as_they_are(four_cpus):
    set_size = CurationConfig.model_validate({"resources": {"nlp_actors": 3}})
    (text, *_) = fitted(steps(set_size), blocks=1)
    assert text.resources.placement()["compute"].min_size == 3
    with_images = CurationConfig()
    fitted_steps = fitted(steps(with_images), blocks=1)
    vision = [s for s in fitted_steps if isinstance(s, Step)][2]
    assert vision.resources.most is None  # its blocks are the fetched ones, not the input's
    assert vision.resources.placement()["compute"].min_size == 4
    # released captions: tasks, not a pool
    released = CurationConfig(captions="released", with_images=False)
    assert fitted(steps(released), 1)[0] == per_candidate_steps(released)[0]


def test_most_blocks_is_what_the_reader_cuts_the_files_into(tmp_path):
    (tmp_path / "a.tsv").write_bytes(b"a dog\thttp://x.test/a.jpg\n" * 4000)  # 104,000 bytes
    (tmp_path / "b.tsv").write_bytes(b"a cat\thttp://x.test/b.jpg\n" * 10)
    assert most_blocks(str(tmp_path), "auto", 1 << 20, enough=8) == 2
    assert most_blocks(str(tmp_path), "auto", 50_000, enough=8) == 4  # 3 ranges, and b
    assert most_blocks(str(tmp_path), "auto", 1000, enough=8) >= 8  # counted to enough
    pq.write_table(pa.table({"alt_text": ["x"]}), tmp_path / "c.parquet")
    assert most_blocks(str(tmp_path / "c.parquet"), "auto", 1 << 20, enough=8) is None


def rows(first: int, count: int) -> list[dict]:
    """Candidates at positions first.., every third rejected (two reasons), every fourth
    kept one with an image."""
    out = []
    for position in range(first, first + count):
        rejected = position % 3 == 0
        out.append(
            {
                "id": f"c{position}",
                "position": position,
                "image_url": f"http://img.test/{position}.jpg",
                "page_url": None,
                "alt_text": f"alt text {position}",
                "image": f"jpeg {position}".encode() if position % 4 == 0 else None,
                "stage": ("text" if position % 2 else "syntax") if rejected else None,
                "reason": ("hashtag" if position % 2 else "no_determiner") if rejected else None,
                "detail": "why" if rejected else None,
                "caption": None if rejected else f"a caption {position}",
                "entities": [],
                "types": [],
                "labels": [],
                "matched": [],
            }
        )
    return out


def test_samples_are_the_ones_a_read_of_the_output_would_give(tmp_path, monkeypatch):
    """The first n curated records in the output's order (files by name, rows in order),
    images included, and the first three rejections of each stage and reason: as the job
    once read them back from OUTPUT, now from what the write pass held."""
    fs, tallies = pafs.LocalFileSystem(), []
    for first, count in ((40, 25), (0, 30), (100, 12)):  # batches come in any order
        batch = pa.Table.from_pylist(rows(first, count), schema=PROCESSED)
        tallies.append(write_outcomes(batch, SplitConfig(), fs, str(tmp_path), samples=7))

    def read_back(part: str) -> list[dict]:
        files = sorted((tmp_path / part).iterdir())
        return pa.concat_tables(pq.read_table(f) for f in files).to_pylist()

    kept_then = read_back("curated")[:7]
    rejected_then: dict[tuple, list] = {}
    for record in read_back("rejected"):
        examples = rejected_then.setdefault((record["stage"], record["reason"]), [])
        if len(examples) < 3:
            examples.append(record)

    def no_second_read(*args, **kwargs):
        raise AssertionError("the output was read again for the samples")

    monkeypatch.setattr(curation_report, "written", no_second_read)
    samples = curation_report.samples(pa.concat_tables(tallies), str(tmp_path), 7)
    assert samples["kept"] == kept_then
    assert any(record["image"] for record in samples["kept"])
    assert samples["rejected"] == [r for rs in rejected_then.values() for r in rs]
    assert curation_report.samples(pa.concat_tables(tallies), str(tmp_path), 0) == {
        "kept": [],
        "rejected": [],
    }


def test_the_stage_workers_import_no_torch():
    """A worker that runs a step's tasks imports pipelines/dataflow/steps.py (its guard), and its
    executors once imported the CNN's module, so torch, in every such worker (1.7 CPU-s)."""
    code = (
        "import sys; import conceptual.pipelines.dataflow.steps, conceptual.pipelines.dataflow.rows,"
        " conceptual.pipelines.dataflow.readers; print('torch' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "False", result.stderr
