"""Table 4 in both directions and Table 3's crop condition: retrieval items of a photo and
the captions found for it (`--direction image_to_query`), the rating page showing them
(server-side, through Starlette's test client), and items whose photos are the centre
square the model saw (`--photo crop`)."""

from __future__ import annotations

import io
import random

import mlflow
import numpy as np
from PIL import Image
from starlette.testclient import TestClient
from test_rating_tasks import curated_dataset, english, features_of

from conceptual import tracking
from conceptual.jobs import rating_tasks
from conceptual.pipelines.families.retriever.evaluate_retriever import rankings
from conceptual.rating.page import form_token, rating_app
from conceptual.rating.store import RatingStore
from conceptual.rating.tasks import new_task_set, read_task_set


def captions_run(tmp_path) -> str:
    """An evaluate_retriever run whose rankings.json ranks captions for two photos: one with
    its own caption at rank 2, one whose own caption is below the top 5."""
    features = features_of(tmp_path, [english(n) for n in range(8)])
    top = [
        {"caption": f"a photo number {n}", "score": 1 - n / 10, "correct": False} for n in range(7)
    ]
    top_of_1 = [{**r, "correct": r["caption"] == "a photo number 1"} for r in top]
    rankings = {
        "query_to_image": [],
        "image_to_query": [
            {"image_id": "img01", "answers": ["a photo number 1"], "top": top_of_1},
            {"image_id": "img07", "answers": ["a photo number 7"], "top": top},
        ],
    }
    with tracking.start_run("retrieval", job="evaluate_retriever") as run:
        mlflow.log_param("features_uri", features)
        mlflow.log_dict(rankings, "rankings.json")
        mlflow.log_metrics({"image_to_text.R_1": 0.5, "image_to_text.R_5": 1.0})
    return run.info.run_id


def test_a_photo_and_the_captions_found_for_it(tmp_path, platform_home):
    out = tmp_path / "tasks"
    argv = ["--kind", "retrieval", "--run", captions_run(tmp_path), "--output", str(out)]
    assert rating_tasks.main([*argv, "--direction", "image_to_query"]) == 0
    tasks = read_task_set(str(out))
    assert tasks.manifest["source"]["direction"] == "image_to_query"
    assert tasks.manifest["source"]["automatic"] == {"R@1": 0.5, "R@5": 1.0}
    assert "captions" in tasks.question and tasks.question == tasks.manifest["question"]
    by_image = {item["image_id"]: item for item in tasks.items}
    found, missed = by_image["img01"], by_image["img07"]
    for item, n in ((found, 1), (missed, 7)):
        assert item["image"] == english(n)["image"] and item["text"] is None
        assert all(r["image"] is None for r in item["results"])
    assert sorted(r["rank"] for r in found["results"]) == [1, 2, 3, 4, 5]
    assert [(r["rank"], r["text"]) for r in found["results"] if r["correct"]] == [
        (2, "a photo number 1")
    ]
    assert [(r["rank"], r["text"]) for r in missed["results"] if r["correct"]] == [
        (None, "a photo number 7")  # its own caption, added below the top 5
    ]


def test_a_direction_is_for_retrieval_and_must_be_logged(tmp_path, platform_home, capsys):
    data = curated_dataset(tmp_path / "ds", [english(0)])
    argv = ["--kind", "caption_quality", "--data", data, "--output", str(tmp_path / "t")]
    assert rating_tasks.main([*argv, "--direction", "image_to_query"]) == 2
    assert "error:" in capsys.readouterr().err
    features = features_of(tmp_path / "r", [english(0)])
    with tracking.start_run("retrieval", job="evaluate_retriever") as run:
        mlflow.log_param("features_uri", features)
        mlflow.log_dict({"query_to_image": []}, "rankings.json")  # an older run
    argv = ["--kind", "retrieval", "--run", run.info.run_id, "--output", str(tmp_path / "u")]
    assert rating_tasks.main([*argv, "--direction", "image_to_query"]) == 2
    assert "logged no image_to_query rankings" in capsys.readouterr().err


def test_the_page_shows_the_photo_and_takes_a_mark_per_caption(tmp_path):
    results = [
        {"image_id": None, "image": None, "text": f"caption <{n}>", "rank": n, "correct": n == 2}
        for n in (3, 1, 2)
    ]
    item = {"item_id": "i0", "approach": "model", "text": None, "image": english(4)["image"],
            "image_id": "img04", "source_id": "img04", "results": results}  # fmt: skip
    tasks = new_task_set("retrieval", [item], 1, 0, {}, random.Random(0))
    tasks.manifest["question"] = "Which of these captions describe the photo?"
    store = RatingStore(tasks, f"sqlite:///{tmp_path / 'ratings.db'}")
    client = TestClient(rating_app(store, open_raters=True, hosts=["testserver"]))
    shown = client.get("/rate/ann").text
    assert "Which of these captions describe the photo?" in shown
    assert "src='/rate/ann/image/i0/0'" in shown and "/image/i0/1" not in shown
    assert [f"caption &lt;{n}&gt;" in shown for n in (3, 1, 2)] == [True] * 3  # escaped
    assert "mark a caption" in shown
    assert client.get("/rate/ann/image/i0/0").content == english(4)["image"]
    csrf = form_token(store.csrf_key(), tasks.name, "ann")
    form = {"item_id": "i0", "csrf": csrf, "match": ["0", "2"]}
    assert client.post("/rate/ann/answer", data=form).status_code == 200  # the next page
    assert [r["answer"] for r in store.ratings()] == ["YNY"]


def wide_jpeg(n: int) -> bytes:
    """12 x 8: red outer columns, a coloured centre square (by n)."""
    image = Image.new("RGB", (12, 8), (255, 0, 0))
    image.paste((0, 20 * n, 255), (2, 0, 10, 8))
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=100)
    return buffer.getvalue()


def test_caption_quality_photos_cut_to_what_the_model_saw(tmp_path, platform_home, capsys):
    rows = [{**english(n), "image": wide_jpeg(n)} for n in range(3)]
    rows.append({**english(3), "image": b"not a photo"})
    data = curated_dataset(tmp_path / "ds", rows)
    argv = ["--kind", "caption_quality", "--data", data]
    assert rating_tasks.main([*argv, "--output", str(tmp_path / "whole")]) == 0
    assert rating_tasks.main([*argv, "--output", str(tmp_path / "crop"), "--photo", "crop"]) == 0
    assert "1 items left out" in capsys.readouterr().out
    whole, crop = read_task_set(str(tmp_path / "whole")), read_task_set(str(tmp_path / "crop"))
    assert whole.manifest["source"]["photo"] == "whole" and len(whole.items) == 4
    source = dict(crop.manifest["source"])
    run_id = source.pop("mlflow_run")
    assert source == {"data": data, "photo": "crop", "undecodable": 1}
    # The task set's run names what its items were drawn from (lineage).
    from mlflow import MlflowClient

    (read,) = MlflowClient().get_run(run_id).inputs.dataset_inputs
    assert read.dataset.source == data or data in read.dataset.source
    for item in crop.items:
        square = Image.open(io.BytesIO(item["image"])).convert("RGB")
        assert square.size == (8, 8)  # the centre square of a 12 x 8 photo
        red, _, blue = square.getpixel((0, 4))
        assert blue > 200 and red < 60  # no red column left


def test_evaluate_retriever_logs_each_photos_own_captions():
    evaluated = {"captions": ["a dog", "a cat", "a dog running"], "query_image": [0, 1, 0],
                 "image_ids": ["dog", "cat"]}  # fmt: skip
    scores = np.array([[0.9, 0.1], [0.2, 0.8], [0.3, 0.7]])  # queries x images
    by_image = rankings(evaluated, scores, shown=2)["image_to_query"]
    assert [entry["answers"] for entry in by_image] == [["a dog", "a dog running"], ["a cat"]]
    assert [r["caption"] for r in by_image[1]["top"]] == ["a cat", "a dog running", "a dog"]
