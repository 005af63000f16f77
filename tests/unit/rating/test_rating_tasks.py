"""Rating task sets from a curated dataset and from an evaluation run, sampled reproducibly;
and rating_results from a ratings CSV into MLflow."""

from __future__ import annotations

import io
import json

import mlflow
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

from conceptual import storage, tracking
from conceptual.jobs import rating_results, rating_tasks
from conceptual.rating.tasks import read_task_set
from conceptual.records import CURATED_LANGUAGE


def jpeg(shade: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), (shade, 0, 0)).save(buffer, "JPEG")
    return buffer.getvalue()


def curated_dataset(folder, rows: list[dict]) -> str:
    """An import's output: curated/ Parquet (CURATED_LANGUAGE) and the _SUCCESS marker."""
    (folder / "curated").mkdir(parents=True)
    full = [{name: row.get(name) for name in CURATED_LANGUAGE.names} for row in rows]
    pq.write_table(pa.Table.from_pylist(full, CURATED_LANGUAGE), folder / "curated/part-0.parquet")
    (folder / storage.SUCCESS).write_text("{}")
    return str(folder)


def english(n: int) -> dict:
    return {"id": f"rec{n:02d}", "caption": f"a photo number {n}", "image": jpeg(n),
            "image_id": f"img{n:02d}", "split": "test"}  # fmt: skip


def test_caption_quality_tasks_are_reproducible(tmp_path, platform_home):
    data = curated_dataset(tmp_path / "ds", [english(n) for n in range(12)])
    made = []
    for name, seed in (("a", 1), ("b", 1), ("c", 2)):
        argv = ["--kind", "caption_quality", "--data", data, "--output", str(tmp_path / name)]
        assert rating_tasks.main([*argv, "--items", "5", "--seed", str(seed)]) == 0
        made.append(read_task_set(str(tmp_path / name)))
    a, b, c = made
    assert [i["item_id"] for i in a.items] == [i["item_id"] for i in b.items]
    assert {i["item_id"] for i in a.items} != {i["item_id"] for i in c.items}
    assert a.name == b.name != c.name
    assert len(a.items) == 5 and a.raters == 3 and a.manifest["approaches"] == ["curated"]
    by_record = {row["id"]: row for row in (english(n) for n in range(12))}
    for item in a.items:  # each caption with its own photo
        assert item["image"] == by_record[item["source_id"]]["image"]
        assert item["text"] == by_record[item["source_id"]]["caption"]


def test_asking_for_more_items_than_the_source_holds_says_so(tmp_path, platform_home, capsys):
    data = curated_dataset(tmp_path / "ds", [english(n) for n in range(12)])
    argv = ["--kind", "caption_quality", "--data", data, "--output", str(tmp_path / "t")]
    assert rating_tasks.main([*argv, "--items", "200"]) == 0
    out = capsys.readouterr().out
    assert "(12 items: curated 12" in out
    assert "note:     --items 200, and the source holds 12: all of them are in" in out


def test_chinese_captions_of_an_image_side_by_side_one_per_source(tmp_path, platform_home):
    rows = [
        {**english(n), "id": f"{source}{n}", "language": "zh", "source": source,
         "caption": "一个 男人", "text": f"一个男人{n}"}
        for n in range(4)
        for source in ("baidu", "native")
    ]  # fmt: skip
    data = curated_dataset(tmp_path / "zh", rows)
    out = tmp_path / "tasks"
    argv = ["--kind", "zh_caption", "--data", data, "--output", str(out), "--items", "3"]
    assert rating_tasks.main(argv) == 0
    tasks = read_task_set(str(out))
    assert len(tasks.items) == 3  # 3 images, each with both sources' captions
    assert sorted(tasks.manifest["approaches"]) == ["baidu", "native"]
    for item in tasks.items:
        n = int(item["image_id"][3:])
        assert item["image"] == english(n)["image"] and item["text"] is None
        assert sorted(s["approach"] for s in item["sentences"]) == ["baidu", "native"]
        assert {s["text"] for s in item["sentences"]} == {f"一个男人{n}"}


def test_retrieval_from_data_is_refused(tmp_path, platform_home, capsys):
    data = curated_dataset(tmp_path / "ds", [english(0)])
    argv = ["--kind", "retrieval", "--data", data, "--output", str(tmp_path / "t")]
    assert rating_tasks.main(argv) == 2
    assert "come from a run" in capsys.readouterr().err


def retriever_run(tmp_path) -> str:
    """What evaluate_retriever logs that the tasks read: its stage and modality tags, the
    features it read (whose features.json names the curated data), rankings.json, R@k."""
    features = features_of(tmp_path, [english(n) for n in range(8)])
    top = [{"image_id": f"img{n:02d}", "score": 1 - n / 10, "correct": False} for n in range(7)]
    rankings = {
        "query_to_image": [
            {"query": "a photo number 1", "answer": "img01", "top": top},  # at rank 2
            {"query": "a photo number 7", "answer": "img07", "top": top},  # not in the top 5
        ]
    }
    tags = {"stage": "evaluate_retriever", "modality": "text"}  # as runs were tagged before `job`
    with tracking.start_run("retrieval", tags=tags) as run:
        mlflow.log_param("features_uri", str(features))
        mlflow.log_dict(rankings, "rankings.json")
        mlflow.log_metrics({"text_to_image.R_1": 0.25, "text_to_image.R_5": 0.5})
    return run.info.run_id


def test_retrieval_tasks_and_their_human_table(tmp_path, platform_home, capsys):
    run_id = retriever_run(tmp_path)
    out = tmp_path / "tasks"
    argv = ["--kind", "retrieval", "--run", run_id, "--output", str(out), "--raters", "2"]
    assert rating_tasks.main(argv) == 0
    tasks = read_task_set(str(out))
    assert tasks.manifest["source"]["automatic"] == {"R@1": 0.25, "R@5": 0.5}
    by_query = {item["text"]: item for item in tasks.items}
    found, missed = by_query["a photo number 1"], by_query["a photo number 7"]
    assert sorted(r["rank"] for r in found["results"]) == [1, 2, 3, 4, 5]
    assert [r["rank"] for r in found["results"] if r["correct"]] == [2]
    assert len(missed["results"]) == 6  # the top 5 and its own image, unranked
    assert [r["rank"] for r in missed["results"] if r["correct"]] == [None]

    # Both raters mark the rank-1 image of the first query and the own image of the second.
    lines = ["rater,item_id,answer"]
    for item in tasks.items:
        marked = 1 if item is found else None
        marks = "".join("Y" if r["rank"] == marked else "N" for r in item["results"])
        lines += [f"{rater},{item['item_id']},{marks}" for rater in ("ann", "bob")]
    csv = tmp_path / "ratings.csv"
    csv.write_text("\n".join(lines) + "\n")
    assert rating_results.main(["--tasks", str(out), "--ratings", str(csv)]) == 0
    printed = capsys.readouterr().out
    assert "human R@1" in printed
    client = mlflow.MlflowClient()
    human = client.get_run(printed.split("mlflow:   run ")[1].split()[0])
    assert human.data.tags[tracking.PARENT_TAG] == run_id  # linked to the run it rates
    metrics = human.data.metrics
    # human R@1: the first query's rank-1 image is a match, the second's top 5 are not: 1/2.
    assert metrics["human.R_1"] == 0.5 and metrics["automatic.R_1"] == 0.0
    assert metrics["automatic.R_5"] == 0.5 and metrics["own_image_match"] == 0.5
    assert metrics["fleiss_kappa"] == 1.0  # the two raters agree on every image
    artifacts = {a.path for a in client.list_artifacts(human.info.run_id)}
    assert {"human_table.json", "human_table.png", "raters.json", "raters.png"} <= artifacts


def test_ratings_csv_without_its_columns_is_refused(tmp_path, platform_home, capsys):
    data = curated_dataset(tmp_path / "ds", [english(0)])
    assert (
        rating_tasks.main(
            ["--kind", "caption_quality", "--data", data, "--output", str(tmp_path / "t")]
        )
        == 0
    )
    csv = tmp_path / "ratings.csv"
    csv.write_text("worker,item,label\nann,x,GOOD\n")
    assert rating_results.main(["--tasks", str(tmp_path / "t"), "--ratings", str(csv)]) == 2
    assert "rater,item_id,answer" in capsys.readouterr().err


def features_of(tmp_path, rows: list[dict]) -> str:
    """A features folder whose features.json names curated data holding `rows`."""
    data = curated_dataset(tmp_path / "ds", rows)
    features = tmp_path / "features"
    features.mkdir()
    (features / "features.json").write_text(json.dumps({"curated": f"{data}/curated"}))
    return str(features)


def test_captions_of_an_evaluation_and_of_the_fluency_comparison(tmp_path, platform_home):
    features = features_of(tmp_path, [english(n) for n in range(6)])
    samples = {
        "id": [f"rec{n:02d}" for n in range(6)],
        "generated": [f"model caption {n}" for n in range(6)],
        "baseline": [f"nearest caption {n}" for n in range(6)],
        "references": ["a reference"] * 6,
    }
    with tracking.start_run("captioning", job="evaluate_captioner") as run:
        mlflow.log_param("features_uri", features)
        mlflow.log_table(samples, "samples.json")
    out = tmp_path / "tasks"
    argv = ["--kind", "caption_quality", "--run", run.info.run_id, "--output", str(out)]
    assert rating_tasks.main([*argv, "--items", "4"]) == 0
    tasks = read_task_set(str(out))
    assert tasks.manifest["approaches"] == ["model", "baseline"]  # the model's keys are plain
    images = {item["source_id"] for item in tasks.items}
    assert len(tasks.items) == 8 and len(images) == 4  # 4 images, each with both captions
    for item in tasks.items:
        n = int(item["source_id"][3:])
        assert (
            item["text"] == samples["generated" if item["approach"] == "model" else "baseline"][n]
        )
        assert item["image"] == english(n)["image"]

    captions = {
        "weighted loss": {f"img{n:02d}": "一个 男人 在 跑步" for n in range(6)},
        "late translation": {f"img{n:02d}": "一个 人" for n in range(6)},
    }
    with tracking.start_run("fluency", job="compare_fluency") as run:
        mlflow.log_params({"features_uri": str(tmp_path / "zh-f"), "references.human": features})
        mlflow.log_dict(captions, "captions.json")
    argv = ["--kind", "zh_caption", "--run", run.info.run_id, "--output", str(tmp_path / "zh")]
    assert rating_tasks.main([*argv, "--items", "2"]) == 0
    zh = read_task_set(str(tmp_path / "zh"))
    assert len(zh.items) == 2 and zh.manifest["approaches"] == list(captions)
    for item in zh.items:  # the image's caption of each approach, once, shown unsegmented
        assert item["image"] == english(int(item["image_id"][3:]))["image"]
        by_approach = {s["approach"]: s["text"] for s in item["sentences"]}
        assert by_approach == {"weighted loss": "一个男人在跑步", "late translation": "一个人"}
    argv = ["--kind", "retrieval", "--run", run.info.run_id, "--output", str(tmp_path / "r")]
    assert rating_tasks.main(argv) == 2  # a fluency comparison ranks no images
