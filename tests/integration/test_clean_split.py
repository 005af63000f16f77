"""clean_split on photos of ../shared/data/flickr8k_mini: imported as curated records
(import_captions --curated), their caption_quality task set (rating_tasks --data), ratings
as a CSV, then the test split cleaned as the paper cleaned its test set (GOOD by 2+ of 3)."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re
import shutil

import mlflow
import pyarrow.parquet as pq
import pytest

from conceptual.rating.tasks import read_task_set

pytestmark = [pytest.mark.integration, pytest.mark.realdata]

PHOTOS = 30


@pytest.fixture(scope="module")
def rated(real_data, tmp_path_factory, platform_home):
    """The import, its task set, and a ratings CSV: the test split's items get 3, 2, 1 or 0
    GOOD answers of 3 in turn (every fifth test item is not rated), plus a rating of an
    item that is not in the task set and a rater's second answer."""
    from conceptual.jobs import import_captions, rating_tasks

    root = tmp_path_factory.mktemp("clean_split")
    source, folder = real_data / "flickr8k_mini", root / "flickr"
    (folder / "images").mkdir(parents=True)
    with open(source / "captions.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    names = sorted({row["image"] for row in rows})[:PHOTOS]
    for name in names:
        shutil.copy(source / "images" / name, folder / "images" / name)
    with open(folder / "captions.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, ["image", "caption"])
        writer.writeheader()
        writer.writerows(row for row in rows if row["image"] in names)
    data, tasks_uri = root / "curated", root / "tasks"
    splits = ["splits.train=0.5", "splits.val=0.2", "splits.test=0.3"]
    argv = ["--folder", str(folder), "--output", str(data), "--curated", *splits]
    assert import_captions.main(argv) == 0
    argv = ["--kind", "caption_quality", "--data", str(data), "--output", str(tasks_uri)]
    assert rating_tasks.main(argv) == 0

    test_ids = set(
        pq.read_table(data / "curated", columns=["id"], filters=[("split", "=", "test")])[
            "id"
        ].to_pylist()
    )
    tasks = read_task_set(str(tasks_uri))
    test_items = sorted(
        (i for i in tasks.items if i["source_id"] in test_ids), key=lambda i: i["item_id"]
    )
    expected: dict[str, str | None] = {}  # record id -> the reason it is dropped, or None
    lines = ["rater,item_id,answer"]
    for n, item in enumerate(test_items):
        if n % 5 == 4:
            expected[item["source_id"]] = "not_rated"
            continue
        good = 3 - n % 5  # 3, 2, 1, 0 GOOD of 3
        for r in range(3):
            lines.append(f"r{r},{item['item_id']},{'GOOD' if r < good else 'BAD'}")
        expected[item["source_id"]] = None if good >= 2 else "fewer_good_than_min"
    lines += ["r0,not-an-item,GOOD", f"r0,{test_items[0]['item_id']},BAD"]  # both skipped
    ratings = root / "ratings.csv"
    ratings.write_text("\n".join(lines) + "\n")
    return {"root": root, "data": data, "tasks": tasks_uri, "ratings": ratings,
            "expected": expected}  # fmt: skip


def run(*argv: str) -> tuple[int, str, str]:
    from conceptual.jobs import clean_split

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = clean_split.main(list(argv))
    return code, out.getvalue(), err.getvalue()


def test_the_test_split_keeps_captions_rated_good_by_two_or_more(rated):
    output = rated["root"] / "cleaned"
    code, out, err = run(
        "--data", str(rated["data"]), "--tasks", str(rated["tasks"]),
        "--ratings", str(rated["ratings"]), "--split", "test", "--min-good", "2",
        "--output", str(output),
    )  # fmt: skip
    assert code == 0, err

    before = pq.read_table(rated["data"] / "curated").to_pylist()
    after = pq.read_table(output / "curated").to_pylist()
    expected = rated["expected"]
    kept_test = {r["id"] for r in after if r["split"] == "test"}
    assert kept_test == {i for i, reason in expected.items() if reason is None}
    # the other splits unchanged, every column and photo
    assert [r for r in after if r["split"] != "test"] == [r for r in before if r["split"] != "test"]
    assert pq.read_schema(next((output / "curated").glob("*.parquet"))) == pq.read_schema(
        next((rated["data"] / "curated").glob("*.parquet"))
    )
    dropped = {r["id"]: r["reason"] for r in pq.read_table(output / "rejected").to_pylist()}
    assert dropped == {i: reason for i, reason in expected.items() if reason}

    stats = json.loads((output / "stats.json").read_text())
    reasons = {i: r for i, r in expected.items() if r}
    assert stats["input"] == len(expected) and stats["kept"] == len(expected) - len(reasons)
    assert stats["rejected"]["clean_split"] == {
        r: list(reasons.values()).count(r) for r in set(reasons.values())
    }
    assert stats["clean_split"]["min_good"] == 2 and stats["clean_split"]["copied"] == len(
        [r for r in after if r["split"] != "test"]
    )
    table3 = stats["captions_by_split"]
    assert table3["test"]["examples"] == len(kept_test)
    assert set(table3) == {"train", "val", "test"} and table3["train"]["unique_tokens"] > 20
    assert (output / "_SUCCESS").exists()

    run_id = re.search(r"mlflow:\s+run ([0-9a-f]{32}) ", out).group(1)
    logged = mlflow.MlflowClient().get_run(run_id)
    assert logged.data.tags["job"] == "clean_split"
    assert logged.data.metrics["rejected.clean_split.not_rated"] == list(reasons.values()).count(
        "not_rated"
    )
    assert logged.data.metrics["captions.test.examples"] == len(kept_test)
    assert logged.data.params["task_set"] == read_task_set(str(rated["tasks"])).name


def test_a_task_set_of_other_data_is_refused_before_anything_is_written(rated, tmp_path):
    """Ratings of another dataset's captions would drop every record as not rated."""
    from conceptual.rating.tasks import TaskSet

    tasks = read_task_set(str(rated["tasks"]))
    other = [dict(i, source_id=f"other-{n}") for n, i in enumerate(tasks.items)]
    TaskSet(tasks.manifest, other).write(str(tmp_path / "other"))
    code, _, err = run(
        "--data", str(rated["data"]), "--tasks", str(tmp_path / "other"),
        "--ratings", str(rated["ratings"]), "--output", str(tmp_path / "out"),
    )  # fmt: skip
    assert code == 2
    assert re.search(
        r"^error: .*no record of the test split has an item in the task set", err, re.M
    )
    assert not (tmp_path / "out" / "curated").exists()
    code, _, err = run(
        "--data", str(rated["data"]), "--tasks", str(rated["tasks"]), "--split", "holdout",
        "--ratings", str(rated["ratings"]), "--output", str(tmp_path / "out"),
    )  # fmt: skip
    assert code == 2 and "no records of the split 'holdout'" in err
