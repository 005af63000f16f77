"""The passes after the per-candidate stages, on one batch (no Ray needed): the global steps
(exact duplicates, the entity-frequency rule of spec §5), the split, and the tallies
stats.json is built from."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from conceptual.pipelines.dataflow.rows import (
    assign_splits,
    concept_tally,
    duplicate_keys,
    duplicates,
    mark_rare,
    outcome_tally,
    rare_concepts,
    to_curated,
    to_rejected,
    write_outcomes,
)
from conceptual.records import CURATED, PROCESSED, REJECTED
from conceptual.splits import SplitConfig, assign_split


def row(id: str, caption: str | None, types: list[str], **fields) -> dict:
    base = {
        "id": id,
        "image_url": f"http://img.test/{id}.jpg",
        "page_url": None,
        "alt_text": f"alt {id}",
        "image": None,
        "stage": None,
        "reason": None,
        "detail": None,
        "caption": caption,
        "entities": [],
        "types": types,
        "labels": [],
        "matched": [],
        "width": None,
        "height": None,
        "split": None,
    }
    return base | fields


def batch() -> pa.Table:
    return pa.Table.from_pylist(
        [
            row("common", "actor in a city", ["actor", "city"]),
            row("rare", "actor at a festival", ["actor", "festival", "zeppelin"], image=b"jpeg"),
            row("no-types", "a dog on grass", []),
            row("with-image", "a city at night", ["city"], image=b"\xff\xd8bytes"),
            row("earlier", None, ["zeppelin"], stage="text", reason="hashtag", detail="#x"),
        ],
        schema=PROCESSED,
    )


def test_concept_tally_counts_the_concepts_of_captions_still_in_the_running():
    counts = concept_tally(batch()).to_pylist()
    by_key = {r["key"]: r["n"] for r in counts}
    assert {r["kind"] for r in counts} == {"type"}
    # The zeppelin of the candidate the text stage rejected does not count.
    assert by_key == {"actor": 2, "city": 2, "festival": 1, "zeppelin": 1}


def finalize(batch: pa.Table, rare: frozenset[str], more_than: int, split: SplitConfig):
    """The entity-frequency rule, then the split, as the pipeline runs them."""
    return assign_splits(mark_rare(batch, rare, more_than), split)


def test_the_rule_counts_every_concept_and_finds_the_rare_ones():
    counts = pa.concat_tables([concept_tally(batch()), concept_tally(batch())])
    arguments, report = rare_concepts(counts, enabled=True, more_than=2)
    assert arguments == {"rare": {"festival", "zeppelin"}, "more_than": 2}
    assert report == {"enabled": True, "more_than": 2, "types": 4, "types_kept": 2}
    arguments, report = rare_concepts(counts, enabled=False, more_than=2)
    assert arguments["rare"] == frozenset() and report["types_kept"] == 4


def test_the_first_of_each_image_url_or_image_is_kept():
    rows = [
        row("a", "a dog", [], position=3, image_url="u1", image_id="i1"),
        row("b", "a dog", [], position=1, image_url="u1", image_id="i2"),
        row("c", "a dog", [], position=2, image_url="u2", image_id="i2"),
        row("d", "a dog", [], position=4, image_url="u3", image_id=None),
        row("e", None, [], position=0, image_url="u3", stage="text", reason="hashtag"),
    ]
    keys = duplicate_keys(pa.Table.from_pylist(rows, schema=PROCESSED))
    # b (position 1) comes before a, and e was rejected before: d is the first of u3
    found = duplicates(keys, by_url=True, by_image=True)
    assert found.to_pylist() == [
        {"position": 2, "same_image": True},
        {"position": 3, "same_image": False},
    ]
    assert duplicates(keys, by_url=True, by_image=False)["position"].to_pylist() == [3]
    # Without the URL rule, a (i1) repeats nothing and c repeats b's bytes.
    assert duplicates(keys, by_url=False, by_image=True)["position"].to_pylist() == [2]
    assert duplicates(keys, by_url=False, by_image=False).num_rows == 0
    assert duplicates(keys.slice(0, 0), by_url=True, by_image=True).num_rows == 0


def test_finalize_rejects_captions_mentioning_a_rare_concept():
    split = SplitConfig()
    out = finalize(batch(), frozenset({"zeppelin", "festival"}), more_than=3, split=split)
    assert out.schema == PROCESSED
    rows = {r["id"]: r for r in out.to_pylist()}

    rare = rows["rare"]
    assert (rare["stage"], rare["reason"]) == ("entity_frequency", "rare_type")
    assert rare["detail"] == "occur 3 times or fewer: festival, zeppelin"
    assert rare["caption"] is None and rare["image"] is None and rare["split"] is None

    # An earlier rejection stands, untouched, though its concept is rare too.
    assert (rows["earlier"]["stage"], rows["earlier"]["reason"]) == ("text", "hashtag")
    assert rows["earlier"]["detail"] == "#x" and rows["earlier"]["split"] is None

    # The rest keep their captions and get the split of their image (or, without one, URL).
    assert rows["common"]["split"] == assign_split(b"http://img.test/common.jpg", split)
    assert rows["with-image"]["split"] == assign_split(b"\xff\xd8bytes", split)
    assert rows["with-image"]["image"] == b"\xff\xd8bytes"
    assert rows["no-types"]["reason"] is None and rows["no-types"]["caption"] == "a dog on grass"


def test_finalize_without_rare_concepts_keeps_everything_still_in_the_running():
    out = finalize(batch(), frozenset(), more_than=100, split=SplitConfig())
    assert out["reason"].to_pylist() == [None, None, None, None, "hashtag"]
    assert all(s is not None for s in out["split"].to_pylist()[:4])


def test_finalize_a_batch_with_nothing_left_to_keep():
    rejected = batch().filter(pa.array([False, False, False, False, True]))
    out = finalize(rejected, frozenset({"zeppelin"}), more_than=3, split=SplitConfig())
    assert out.to_pylist() == rejected.to_pylist()


def test_outputs_partition_the_batch_and_the_tally_describes_them():
    out = finalize(batch(), frozenset({"zeppelin"}), more_than=3, split=SplitConfig())
    curated, rejected = to_curated(out), to_rejected(out)
    assert sorted(curated["id"].to_pylist()) == ["common", "no-types", "with-image"]
    assert sorted(rejected["id"].to_pylist()) == ["earlier", "rare"]

    tally = {}
    for r in outcome_tally(out).to_pylist():
        tally.setdefault(r["kind"], {})[r["key"]] = r["n"]
    assert tally["outcome"] == {"\t": 3, "text\thashtag": 1, "entity_frequency\trare_type": 1}
    assert tally["length"] == {"4": 3}
    assert tally["token"]["city"] == 2 and tally["token"]["dog"] == 1
    assert sum(tally["split"].values()) == 3


def test_rare_concepts_are_found_in_a_batch_of_several_chunks():
    two = pa.concat_tables([batch(), batch()])  # each column in two chunks
    out = mark_rare(two, frozenset({"zeppelin"}), more_than=3)
    assert out["reason"].to_pylist() == [None, "rare_type", None, None, "hashtag"] * 2
    assert out["detail"].to_pylist()[6] == "occur 3 times or fewer: zeppelin"


def test_a_batch_is_written_once_to_curated_and_rejected_however_often_it_runs(tmp_path):
    rows = [r | {"position": 10 + i} for i, r in enumerate(batch().to_pylist())]
    marked = mark_rare(pa.Table.from_pylist(rows, schema=PROCESSED), frozenset({"zeppelin"}), 3)
    fs, split = pafs.LocalFileSystem(), SplitConfig()
    for _ in range(2):  # Ray ran the batch again: it overwrites its own files
        tally = write_outcomes(marked, split, fs, str(tmp_path))
    curated, rejected = (pq.read_table(tmp_path / part) for part in ("curated", "rejected"))
    assert [len(list((tmp_path / part).iterdir())) for part in ("curated", "rejected")] == [1, 1]
    assert sorted(curated["id"].to_pylist()) == ["common", "no-types", "with-image"]
    assert sorted(rejected["id"].to_pylist()) == ["earlier", "rare"]
    assert curated.schema.names == CURATED.names and rejected.schema.names == REJECTED.names
    assert set(curated["split"].to_pylist()) <= {"train", "val", "test"}
    assert tally.equals(outcome_tally(assign_splits(marked, split)))

    nothing = write_outcomes(marked.slice(0, 0), split, fs, str(tmp_path / "empty"))
    assert nothing.num_rows == 0 and not (tmp_path / "empty").exists()
