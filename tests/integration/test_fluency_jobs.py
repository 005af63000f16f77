"""The fluency jobs end to end on a local Ray: train_fluency on a tiny Flickr8k-CN folder made
here (one epoch of a tiny model; registered, its run id printed), then score_fluency with
`runs:/<id>/model` on a tiny import holding translations and native sentences, and the
features job reading the scored output as curated data."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from PIL import Image

from conceptual.splits import SplitConfig, split_of_key

pytestmark = pytest.mark.integration

MODEL_NAME = "fluency-job-test"
EXPERIMENT = "test-fluency"
# (English, its human translation = the fluent machine translation, a broken one)
SENTENCES = [
    ("A dog runs on the grass .", "一只狗在草地上跑。", "狗草地运行在一只上。"),
    ("Two children play soccer in a park .", "两个孩子在公园里踢足球。", "孩子两个足球踢公园在。"),
    ("A man rides a bike .", "一个男人在骑自行车。", "男子自行车乘坐一个。"),
    ("A girl is swimming in the pool .", "一个女孩在游泳池里游泳。", "女孩游泳池一个游泳在里。"),
]
NATIVE = ["小狗在草地上奔跑。", "孩子们在踢球。"]
TINY = [
    "model.embed_dim=16",
    "model.hidden=16",
    "model.max_tokens=16",
    "epochs=1",
    "batch_size=16",
    "cpus_per_worker=0.5",
    "min_eval_size=1",  # the champion rule on these few dev photos
    f"experiment={EXPERIMENT}",
]


def photo_names() -> list[str]:
    """Photos whose hash split (train_fluency's default fractions) puts at least two in each
    of val and test, and the rest in train: 24 photos."""
    splits = SplitConfig(train=0.8, val=0.1, test=0.1)
    by_split: dict[str, list[str]] = {"train": [], "val": [], "test": []}
    i = 0
    while min(len(by_split["val"]), len(by_split["test"])) < 2 or len(by_split["train"]) < 20:
        name = f"{i:04d}_photo.jpg"
        split = split_of_key(name.encode(), splits)
        if len(by_split[split]) < (20 if split == "train" else 2):
            by_split[split].append(name)
        i += 1
    return sorted(sum(by_split.values(), []))


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, Path]:
    """The CN folder (every photo: its sentences in English, the human translation, Baidu's
    fluent copy of it and Google's broken one, a native caption) and an images folder with
    three of its photos."""
    root = tmp_path_factory.mktemp("fluency")
    cn, images = root / "cn", root / "images"
    cn.mkdir()
    images.mkdir()
    files = {"enc": [], "zhm": [], "zhb": [], "zhg": [], "zhc": []}
    for p, name in enumerate(photo_names()):
        for n in range(2):
            english, human, broken = SENTENCES[(p + n) % len(SENTENCES)]
            # Every third Baidu sentence broken too, so each system has both labels.
            baidu = broken if (p + n) % 3 == 0 else human
            for tag, text in [("enc", english), ("zhm", human), ("zhb", baidu), ("zhg", broken)]:
                files[tag].append(f"{name}#{tag}#{n} {text}")
        files["zhc"].append(f"{name}#zhc#0 {NATIVE[p % len(NATIVE)]}")
        if p < 3:
            Image.new("RGB", (64, 48), ("red", "green", "blue")[p]).save(images / name)
    names = {
        "enc": "flickr8kenc.caption.txt",
        "zhm": "flickr8kzhmtest.captions.txt",
        "zhb": "flickr8kzhb.caption.txt",
        "zhg": "flickr8kzhg.caption.txt",
        "zhc": "flickr8kzhc.caption.txt",
    }
    for tag, lines in files.items():
        (cn / names[tag]).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return {"root": root, "cn": cn, "images": images}


@pytest.fixture(scope="module")
def trained(ray_local, platform_home, data) -> tuple[int, str]:
    from conceptual.jobs import train_fluency

    argv = ["--cn", str(data["cn"]), "--model-name", MODEL_NAME, *TINY]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = train_fluency.main(argv)
    return code, out.getvalue()


def test_train_job_logs_the_held_out_table_and_registers_the_model(trained):
    import mlflow

    from conceptual.models.saving import SavedFluency, load
    from conceptual.registry import resolve

    code, out = trained
    assert code == 0, out[-3000:]
    run_id = re.search(r"mlflow:\s+run ([0-9a-f]{32}) ", out).group(1)
    assert f"registered: models:/{MODEL_NAME}/1" in out and "champion: first_champion" in out
    rows = ("four_view", "zh_words", "zh_pos", "en_words", "en_pos", "random", "length_en")
    for row in (*rows, "length_zh", "length"):
        assert re.search(rf"^\| {row}\b", out, re.M), row

    run = mlflow.MlflowClient().get_run(run_id)
    assert run.data.params["adam_betas"] == "[0.9, 0.9]"
    assert int(run.data.params["labelled_pairs"]) == 24 * 2 * 2
    metrics = run.data.metrics
    assert {"F1", "AUC", "zh_words.F1", "test.four_view.precision", "test.length.recall"} <= set(
        metrics
    )
    table = mlflow.artifacts.load_text(f"runs:/{run_id}/held_out.md")
    assert table.strip() in out  # the printed table is the logged one
    labels = mlflow.artifacts.load_dict(f"runs:/{run_id}/labels.json")
    assert labels["train"]["photos"] == 20 and labels["val"]["pairs"] == 2 * 2 * 2
    saved = load(resolve(f"runs:/{run_id}/model"), kind=SavedFluency)
    model, vocabs = saved.model, saved.vocabs
    assert len(vocabs["zh_words"]) == model.config.vocab_sizes["zh_words"]
    version = mlflow.MlflowClient().get_model_version_by_alias(MODEL_NAME, "champion")
    assert version.run_id == run_id and version.tags["variant"] == "four-view-lstm"


def test_score_job_scores_every_record_and_features_reads_the_output(
    trained, data, ray_local, platform_home, capsys
):
    import mlflow

    from conceptual.fluency.flickr8k_cn import Flickr8kCnConfig, import_flickr8k_cn
    from conceptual.fluency.scorer import FluencyScorer
    from conceptual.jobs import score_fluency
    from conceptual.pipelines.features.features import FeaturesConfig, extract
    from conceptual.records import CURATED_LANGUAGE
    from conceptual.registry import resolve

    _, out = trained
    run_id = re.search(r"mlflow:\s+run ([0-9a-f]{32}) ", out).group(1)
    root = data["root"]
    # Baidu's translations of the three photos, and their native captions beside them.
    import_flickr8k_cn(data["images"], data["cn"], str(root / "import"))
    native = Flickr8kCnConfig(source="native")
    import_flickr8k_cn(data["images"], data["cn"], str(root / "native"), native)
    for i, part in enumerate(sorted((root / "native" / "curated").glob("*.parquet"))):
        shutil.copy(part, root / "import" / "curated" / f"native-{i}.parquet")

    model = f"runs:/{run_id}/model"
    argv = ["--model", model, "--data", str(root / "import"), "--output", str(root / "scored")]
    assert score_fluency.main([*argv, "actors=1", f"experiment={EXPERIMENT}"]) == 0
    printed = capsys.readouterr().out

    table = pq.read_table(root / "scored" / "curated")
    assert table.schema == CURATED_LANGUAGE
    rows = table.drop(["image"]).to_pylist()
    assert len(rows) == 3 * 2 + 3 and {r["source"] for r in rows} == {"baidu", "native"}
    assert all(0 <= r["fluency"] <= 1 for r in rows)
    scorer = FluencyScorer(resolve(model))
    for row in rows:  # a native sentence is scored on its Chinese views alone
        expected = scorer.score([row["text"]], [row["original"]])[0]
        assert row["fluency"] == pytest.approx(expected, abs=1e-5)
    summary = json.loads((root / "scored" / "fluency.json").read_text())
    assert (summary["records"], summary["scored"], summary["without_original"]) == (9, 9, 3)
    assert summary["sentences_per_second"] > 0 and summary["actors"] == 1
    assert set(summary["fluent_by_source"]) == {"baidu", "native"}
    assert summary["fluent"] == pytest.approx(np.mean([r["fluency"] > 0.5 for r in rows]), abs=1e-4)
    assert (root / "scored" / "_SUCCESS").is_file()
    score_run = re.search(r"mlflow:\s+run ([0-9a-f]{32}) ", printed).group(1)
    logged = mlflow.MlflowClient().get_run(score_run).data.metrics
    assert logged["sentences_per_second"] == summary["sentences_per_second"]

    features = extract(str(root / "scored"), str(root / "features"), FeaturesConfig(actors=1))
    assert features["records"] == 9 and features["images"] == 9


def test_jobs_refuse_what_they_cannot_use(data, ray_local, platform_home, capsys, tmp_path):
    from conceptual.fluency.flickr8k_cn import import_flickr8k_cn
    from conceptual.jobs import score_fluency, train_fluency

    assert train_fluency.main(["--cn", str(tmp_path / "missing"), *TINY]) == 2
    assert f"--cn {tmp_path / 'missing'}: no such file or folder" in capsys.readouterr().err
    import_flickr8k_cn(data["images"], data["cn"], str(tmp_path / "import"))
    argv = ["--model", str(tmp_path / "no-model"), "--data", str(tmp_path / "import")]
    assert score_fluency.main([*argv, "--output", str(tmp_path / "out")]) == 2
    assert f"--model {tmp_path / 'no-model'}: no such file or folder" in capsys.readouterr().err


@pytest.mark.slow  # 34 s; the train job with derived labels stays in the default run
def test_train_job_reads_human_fluency_labels_beside_the_derived_ones(
    data, ray_local, platform_home, tmp_path, capsys
):
    """A fluency_label task set of a Baidu import, two raters' answers as a CSV (agreeing on
    some sentences, not on others), and train_fluency --labels reading the agreed ones."""
    import mlflow

    from conceptual.fluency.flickr8k_cn import import_flickr8k_cn
    from conceptual.jobs import rating_tasks, train_fluency
    from conceptual.rating.tasks import read_task_set

    imported, tasks_dir = tmp_path / "import", tmp_path / "tasks"
    import_flickr8k_cn(data["images"], data["cn"], str(imported))
    argv = ["--kind", "fluency_label", "--data", str(imported), "--output", str(tasks_dir)]
    assert rating_tasks.main([*argv, "--raters", "2", "--seed", "0"]) == 0
    tasks = read_task_set(str(tasks_dir))
    assert len(tasks.items) == 3 * 2 and {i["approach"] for i in tasks.items} == {"baidu"}
    # Both raters agree on the first four items, disagree on the fifth; nobody rates the last.
    lines = ["rater,item_id,answer"]
    for n, item in enumerate(tasks.items[:5]):
        first = "FLUENT" if n % 2 else "NOT_FLUENT"
        second = first if n < 4 else "DIFFICULT"
        lines += [f"ann,{item['item_id']},{first}", f"bob,{item['item_id']},{second}"]
    ratings = tmp_path / "ratings.csv"
    ratings.write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    argv = ["--cn", str(data["cn"]), "--labels", str(tasks_dir), "--no-register"]
    assert train_fluency.main([*argv, f"labels_ratings={ratings}", *TINY]) == 0
    run_id = re.search(r"mlflow:\s+run ([0-9a-f]{32}) ", capsys.readouterr().out).group(1)
    params = mlflow.MlflowClient().get_run(run_id).data.params
    assert params["human_labelled_pairs"] == "4" and params["labels"] == str(tasks_dir)
