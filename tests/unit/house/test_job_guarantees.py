"""What every job guarantees its data, given once in jobs/arguments.py, jobs/runner.py,
conceptual.logs, conceptual.config and conceptual.storage (issue 31): an output never
overlaps an input, no line shows credentials, a mistyped key is named with the closest one,
and an s3:// URI with neither credentials nor an endpoint fails at once. None of these tests
starts Ray."""

from __future__ import annotations

import collections.abc
import importlib
import inspect
import logging
import os
import re
import subprocess
import sys
import time
import typing
from pathlib import Path

import pytest

from conceptual import logs, storage
from conceptual.config import Config, ConfigError, check_keys, dotted_keys, flatten, load
from conceptual.jobs import arguments

REPO = Path(__file__).resolve().parents[3]
SECRET = "SECRET-pw-31"
CREDENTIALED = f"http://admin:{SECRET}@127.0.0.1:9"


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("CONCEPTUAL_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


# --- 8: no job writes over what it reads ----------------------------------------------------

# Every job that writes a folder: how to call it with an input `i` and an output `o`.
WRITERS = {
    "curate": lambda i, o: ["--input", i, "--output", o],
    "import_conceptual": lambda i, o: ["--input", i, "--output", o],
    "synthesize_speech": lambda i, o: ["--input", i, "--output", o],
    "features": lambda i, o: ["--data", i, "--output", o],
    "score_fluency": lambda i, o: [
        "--model",
        "models:/fluency-zh@champion",
        "--data",
        i,
        "--output",
        o,
    ],  # fmt: skip
    "build_index": lambda i, o: [
        "--model",
        "models:/retriever-text@champion",
        "--data",
        i,
        "--output",
        o,
    ],  # fmt: skip
    "import_captions": lambda i, o: ["--folder", i, "--output", o],
    "harvest": lambda i, o: ["--input", i, "--output", o],
    "import_coco": lambda i, o: ["--root", i, "--output", o],
    "import_flickr8k_cn": lambda i, o: ["--images", i, "--cn", i, "--output", o],
    "import_flickr30k_cn": lambda i, o: ["--images", i, "--cn", i, "--output", o],
    "import_facc": lambda i, o: ["--folder", i, "--flickr8k", i, "--output", o],
    "pipeline": lambda i, o: [f"input={i}", f"output={o}"],
    "rating_tasks": lambda i, o: ["--kind", "caption_quality", "--data", i, "--output", o],
    "publish_dataset": lambda i, o: ["--data", i, "--output", o],
    "clean_split": lambda i, o: ["--data", i, "--tasks", i, "--output", o],
    "translate": lambda i, o: ["--data", i, "--output", o, "--to", "zh", "--cn", i],
    "recaption": lambda i, o: ["--data", i, "--output", o],
    "ablate": lambda i, o: [
        f"input={i}",
        f"eval_features={i}",
        f"output={o}",
        "variants={a: '', b: ''}",
    ],  # fmt: skip
}
# Where the output lies relative to the input folder.
LAYOUTS = {
    "same": lambda data: (data, data),
    "output inside input": lambda data: (data, data / "out"),
    "input inside output": lambda data: (data / "in", data),
}


@pytest.fixture(autouse=True)
def ray_starts(monkeypatch) -> list:
    """The calls that would start Ray (or join the Ray an earlier test started in this
    process): none may happen before a job has refused its arguments."""
    from conceptual import runtime

    calls = []
    monkeypatch.setattr(runtime, "init_ray", lambda *args, **kwargs: calls.append(args))
    if (ray := sys.modules.get("ray")) is not None:
        monkeypatch.setattr(ray, "init", lambda *args, **kwargs: calls.append(args))
    return calls


def _ray_started(calls: list) -> bool:
    return bool(calls)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("job", WRITERS)
def test_every_job_refuses_an_output_that_overlaps_an_input(
    job, layout, tmp_path, home, capsys, ray_starts
):
    data = tmp_path / "data"
    source, output = LAYOUTS[layout](data)
    (source / "sub").mkdir(parents=True)
    for name in ("stats.json", "_SUCCESS", "sub/part.parquet"):
        (source / name).write_text(name)
    before = {p: (p.read_text(), p.stat().st_mtime_ns) for p in data.rglob("*") if p.is_file()}
    module = importlib.import_module(f"conceptual.jobs.{job}")
    started = time.monotonic()
    assert module.main(WRITERS[job](str(source), str(output))) == 2
    err = capsys.readouterr().err
    assert re.search(r"^error: .*overlap", err, re.M), err
    assert str(output) in err and "neither holds nor lies inside" in err
    after = {p: (p.read_text(), p.stat().st_mtime_ns) for p in data.rglob("*") if p.is_file()}
    assert after == before  # nothing deleted, replaced or added
    assert not _ray_started(ray_starts)
    assert time.monotonic() - started < 30  # refused at once (the pipeline job imports a lot)


@pytest.mark.parametrize(
    "argv",
    [
        [
            "--model",
            "models:/r@champion",
            "--data",
            "{d}/features",
            "--speech",
            "{d}",
            "--output",
            "{d}/index",
        ],  # fmt: skip
        ["--annotations", "{d}/a.json", "--images", "{d}/images", "--output", "{d}/images"],
    ],
    ids=["build_index --speech", "import_coco --images"],
)
def test_every_input_counts_not_only_the_first(argv, tmp_path, capsys):
    job = "build_index" if "--model" in argv else "import_coco"
    module = importlib.import_module(f"conceptual.jobs.{job}")
    assert module.main([a.replace("{d}", str(tmp_path)) for a in argv]) == 2
    assert "overlap" in capsys.readouterr().err


def test_s3_outputs_are_refused_without_reaching_the_store(monkeypatch, capsys):
    for name in [n for n in list(__import__("os").environ) if n.startswith("AWS_")]:
        monkeypatch.delenv(name)
    from conceptual.jobs import curate

    assert curate.main(["--input", "s3://bucket/cands/", "--output", "s3://bucket/cands/out"]) == 2
    assert "overlap" in capsys.readouterr().err


def test_every_job_that_writes_a_folder_is_guarded_and_tested():
    """A new job gets the guard from JobParser and `type=output`; this test makes sure it
    uses them, and that the test above calls it."""
    for path in sorted((REPO / "jobs").glob("*.py")):
        if path.name in ("__init__.py", "arguments.py", "runner.py"):
            continue
        text = path.read_text()
        if re.search(r"^main = (registry_job|family_verb)\(", text, re.M):
            continue  # an alias of a family's job (or of any family's): that job is checked
        if made := re.search(r"^main = (translations_import|config_job)\(", text, re.M):
            assert path.stem in WRITERS, path.name  # arguments' factory of that kind of job:
            factory = inspect.getsource(getattr(arguments, made[1]))  # guarded as any job
            assert "JobParser(" in factory and "@job_main\n" in factory
            continue
        assert "argparse.ArgumentParser(" not in text, path.name
        assert re.search(r"JobParser\(|training_parser\(", text), path.name
        assert re.search(r"@job_main\ndef main\(|@family_job\ndef job\(", text), path.name
        assert 'type=location, help="where' not in text, path.name  # an output typed as input
        if re.search(r'"--output"|add_data_arguments|output=URI', text):
            assert path.stem in WRITERS, f"{path.name} writes a folder: add it to WRITERS"


def test_every_family_job_is_the_registry_s(capsys):
    """A family's jobs are the family table's (conceptual.pipelines.families): each one runs as
    `<verb> --family NAME`, and as a file of its own where users know its name (a family
    added needs none: the attend family's jobs have no file); every job file with a factory
    is listed."""
    from conceptual.jobs import family_jobs, family_verb
    from conceptual.pipelines.families import FAMILIES

    jobs = family_jobs()
    for family in FAMILIES.values():
        for verb, job in family.jobs.items():
            assert jobs[job][0] is family
            with pytest.raises(SystemExit) as help_shown:  # argparse's --help
                family_verb(verb)(["--family", family.name, "--help"])
            assert help_shown.value.code == 0, job
            assert f"usage: python -m conceptual.jobs.{job}" in capsys.readouterr().out
            if (REPO / "jobs" / f"{job}.py").exists():
                assert callable(importlib.import_module(f"conceptual.jobs.{job}").main), job
    assert not any(
        (REPO / "jobs" / f"{job}.py").exists() for job in FAMILIES["attend"].jobs.values()
    )
    factories = [p.stem for p in (REPO / "jobs").glob("*.py") if "\ndef job(" in p.read_text()]
    assert factories and set(factories) <= set(jobs)


# --- 46: a job writes only its own files ----------------------------------------------------


def foreign_folder(tmp_path: Path) -> Path:
    out = tmp_path / "precious"
    (out / "sub").mkdir(parents=True)
    (out / "thesis.txt").write_text("four years of work")
    (out / "sub" / "data.csv").write_text("a,b\n1,2\n")
    return out


def untouched(out: Path) -> bool:
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
    return files == ["sub", "sub/data.csv", "thesis.txt"] and (
        (out / "thesis.txt").read_text() == "four years of work"
        and (out / "sub" / "data.csv").read_text() == "a,b\n1,2\n"
    )


@pytest.mark.parametrize("job", WRITERS)
def test_every_job_refuses_a_folder_it_did_not_write(job, tmp_path, home, capsys, ray_starts):
    """`rating_tasks --output precious/` once replaced the folder's files with its task set:
    every job now refuses a folder holding files no job wrote, naming it and the option that
    allows it, and leaves it as it was."""
    (tmp_path / "in").mkdir()
    out = foreign_folder(tmp_path)
    module = importlib.import_module(f"conceptual.jobs.{job}")
    assert module.main(WRITERS[job](str(tmp_path / "in"), str(out))) == 2
    err = capsys.readouterr().err
    assert re.search(r"^error: .*holds files no job of this platform wrote", err, re.M), err
    assert str(out) in err and "(sub/, thesis.txt)" in err and "--into-existing" in err
    assert untouched(out) and not _ray_started(ray_starts)


def test_a_new_empty_or_own_folder_is_claimed(tmp_path):
    storage.claim_output(str(tmp_path / "new"), "job")
    (tmp_path / "empty").mkdir()
    storage.claim_output(str(tmp_path / "empty"), "job")
    (tmp_path / "new" / "part-0.parquet").write_bytes(b"written by the job")
    storage.claim_output(str(tmp_path / "new"), "job")  # a rerun into its own output
    assert (tmp_path / "empty" / storage.OWNER).is_file()
    with pytest.raises(storage.ForeignOutputError, match="is a file"):
        storage.claim_output(str(tmp_path / "new" / "part-0.parquet"), "job")


def test_a_job_stopped_before_writing_leaves_no_output_folder(tmp_path, home, capsys):
    """A job refused after its output was claimed (here: a value its config refuses) takes
    back the folder it created; one that holds anything it wrote stays."""
    from conceptual.jobs import curate

    (tmp_path / "in.tsv").write_text("A dog runs on the grass.\thttp://x.test/a.jpg\n")
    argv = ["--input", str(tmp_path / "in.tsv"), "--output", str(tmp_path / "out"),
            "with_images=false", "limits.row_bytes=1000"]  # fmt: skip
    assert curate.main(argv) == 2
    assert "limits.row_bytes" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    storage.claim_output(str(tmp_path / "kept"), "job")
    (tmp_path / "kept" / "part-0.parquet").write_bytes(b"written")
    storage.settle_claims(used=False)
    assert (tmp_path / "kept" / "part-0.parquet").is_file()


def test_a_task_set_written_into_an_existing_folder_replaces_only_its_own_files(tmp_path):
    """`rating_tasks --into-existing`: the task set goes beside the folder's files (it once
    deleted the folder first), and a second one replaces the first."""
    import random

    from conceptual.rating.tasks import ITEMS, MANIFEST, new_task_set, read_task_set

    out = foreign_folder(tmp_path)
    storage.claim_output(str(out), "rating_tasks", into_existing=True)
    items = [{"item_id": f"i{n}", "approach": "model", "text": "a cat", "image": b"jpeg",
              "image_id": None, "source_id": f"r{n}", "results": None} for n in range(2)]  # fmt: skip
    for n in (2, 1):
        tasks = new_task_set("caption_quality", items[:n], 3, 0, {}, random.Random(0))
        tasks.write(str(out))
    assert len(read_task_set(str(out)).items) == 1
    for name in (storage.OWNER, ITEMS, MANIFEST, storage.SUCCESS):
        (out / name).unlink()
    assert untouched(out)


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("/data/x", "/data/x", True),
        ("/data/x", "/data/x/", True),
        ("/data/x/out", "/data/x", True),
        ("/data/x", "/data/x/in.tsv", True),
        ("/data/x", "/data/xy", False),
        ("/data/x", "/data/y", False),
        ("file:///data/x", "/data/x/out", True),
        ("s3://b/p", "s3://b/p/q", True),
        ("s3://b/p/", "s3://b/p", True),
        ("s3://b/p", "s3://b/pq", False),
        ("s3://b/p", "s3://c/p", False),
        ("s3://b/p", "/b/p", False),
        ("models:/m@champion", "/data", False),
    ],
)
def test_overlapping(a, b, expected):
    assert storage.overlapping(a, b) is expected
    assert storage.overlapping(b, a) is expected


def test_overlapping_follows_links(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert storage.overlapping(str(tmp_path / "link" / "out"), str(tmp_path / "real"))


# --- 10: no line shows credentials ----------------------------------------------------------


def test_error_lines_are_redacted(capsys):
    logs.error(f"API request to {CREDENTIALED}/api/2.0/x failed")
    err = capsys.readouterr().err
    assert err.startswith("error: API request to http://***@127.0.0.1:9/") and SECRET not in err


@pytest.mark.parametrize("verbose", [False, True])
def test_a_job_prints_and_logs_nothing_with_credentials(verbose, home, capsys, monkeypatch):
    monkeypatch.setattr(sys, "excepthook", sys.__excepthook__)
    with pytest.raises(RuntimeError), logs.job_output("unit", verbose=verbose) as log_path:
        print(f"tracking at {CREDENTIALED}")
        logging.getLogger("mlflow.unit").warning("retrying %s/api", CREDENTIALED)
        try:
            raise OSError(f"connection to {CREDENTIALED} refused")
        except OSError:
            logging.getLogger("urllib3.unit").exception("request failed")
        print(f"to stderr {CREDENTIALED}", file=sys.stderr)
        raise RuntimeError(f"API request to {CREDENTIALED}/api failed")
    captured = capsys.readouterr()
    shown = captured.out + captured.err + (log_path.read_text() if log_path else "")
    assert SECRET not in shown
    assert "tracking at http://***@127.0.0.1:9" in captured.out
    if log_path:  # quiet: a line on the terminal, the traceback it points at in the log
        line = "error: RuntimeError: API request to http://***@127.0.0.1:9/api failed"
        assert line in captured.err and "Traceback" in log_path.read_text()
    # An exception that ends the process is printed redacted too.
    assert sys.excepthook is logs._redacting_excepthook
    try:
        raise RuntimeError(CREDENTIALED)
    except RuntimeError:
        sys.excepthook(*sys.exc_info())
    assert SECRET not in capsys.readouterr().err
    assert not getattr(logging.getLogRecordFactory(), "redacting", False)  # only while a job runs


def test_the_shared_runners_redact_the_errors_they_report(home, capsys):
    import argparse
    import types

    from conceptual.jobs.runner import job_main, run_training_job
    from conceptual.pipelines.training import training

    args = argparse.Namespace(config=None, overrides=[], verbose=False, no_register=True)

    class Settings(Config):
        experiment: str = "x"

    def failing(kind):
        def prepare(config):
            raise kind(f"API request to {CREDENTIALED}/api/2.0/mlflow/runs/create failed")

        recipe = types.SimpleNamespace(job="unit", config=Settings, prepare=prepare)
        # a family of that recipe, trained as Family.train trains (the real training path)
        family = types.SimpleNamespace(
            jobs={"train": "unit"},
            recipe=lambda: recipe,
            train=lambda config, *data: training.train(recipe, config, *data),
        )
        return job_main(lambda argv: run_training_job(args, family))

    assert failing(ValueError)() == 2
    with pytest.raises(RuntimeError):  # what MLflow raises: not a user error
        failing(RuntimeError)()
    err = capsys.readouterr().err
    assert err.count("error: ") == 2 and "http://***@127.0.0.1:9" in err and SECRET not in err


def _unreachable_mlflow(monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", CREDENTIALED)


def test_a_data_job_with_an_unreachable_tracking_server_shows_no_password(
    tmp_path, home, capsys, monkeypatch, ray_starts
):
    """build_index opens its MLflow run before Ray starts."""
    _unreachable_mlflow(monkeypatch)
    (tmp_path / "features").mkdir()
    from conceptual.jobs import build_index

    argv = ["--model", "models:/retriever-text@champion", "--data", str(tmp_path / "features"),
            "--output", str(tmp_path / "index")]  # fmt: skip
    assert build_index.main(argv) == 2
    err = capsys.readouterr().err
    logged = "".join(p.read_text() for p in (home / "logs").glob("build_index-*.log"))
    assert "error: the tracking server http://***@127.0.0.1:9 cannot be reached" in err
    assert SECRET not in err + logged
    assert not _ray_started(ray_starts)


def test_a_model_job_with_an_unreachable_registry_shows_no_password(tmp_path, home, capsys,
                                                                    monkeypatch):  # fmt: skip
    _unreachable_mlflow(monkeypatch)
    image = tmp_path / "a.jpg"
    image.write_bytes(b"not read: the model cannot be found first")
    from conceptual.jobs import caption

    assert caption.main(["--model", "models:/captioner@champion", str(image)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: the tracking server http://***@127.0.0.1:9 cannot be reached")
    assert "Connection refused" in err and SECRET not in err


def test_a_tracking_server_that_never_answers_is_named_within_seconds(
    tmp_path, home, capsys, monkeypatch
):
    """A server that accepts and then says nothing cost 259 s of MLflow's retries before
    `caption` said so; the health check gives it REACH_ATTEMPTS x REACH_TIMEOUT_S."""
    import socket

    from conceptual import tracking
    from conceptual.jobs import caption

    monkeypatch.setattr(tracking, "REACH_TIMEOUT_S", 1.0)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # accepted by the kernel, never read or answered
        port = silent.getsockname()[1]
        monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://admin:{SECRET}@127.0.0.1:{port}")
        image = tmp_path / "a.jpg"
        image.write_bytes(b"not read")
        started = time.monotonic()
        assert caption.main(["--model", "models:/captioner@champion", str(image)]) == 2
        seconds = time.monotonic() - started
    err = capsys.readouterr().err
    assert f"http://***@127.0.0.1:{port} cannot be reached (timed out)" in err, err
    assert SECRET not in err and seconds < 2 * tracking.REACH_ATTEMPTS + 5


def test_metrics_a_tracking_server_did_not_take_are_kept_to_send_again(monkeypatch):
    """While a model trains, a server that is down costs one quick try per call (MLflow's
    client retried 7 times with backoff), and nothing is lost: what it did not take is kept
    (in the checkpoint) for the next call; once trained, the run waits a bounded time."""
    from conceptual import tracking

    monkeypatch.setenv("MLFLOW_TRACKING_URI", CREDENTIALED)
    monkeypatch.setenv(tracking.WAIT_ENV, "1")
    import mlflow

    previous, retries = mlflow.get_tracking_uri(), os.environ.get("MLFLOW_HTTP_REQUEST_MAX_RETRIES")
    mlflow.set_tracking_uri(CREDENTIALED)
    try:
        metrics = [["loss", 0.5, 1, 0], ["CIDEr", 0.1, 1, 1]]
        started = time.monotonic()
        with tracking.impatient():
            assert tracking.send_metrics("0" * 32, metrics) == metrics
        assert time.monotonic() - started < 10
        with pytest.raises(tracking.TrackingUnreachable) as stopped:
            tracking.wait_for_store("/models/run-1")
    finally:
        mlflow.set_tracking_uri(previous)
    message = str(stopped.value)
    assert "has not answered for 1 s" in message and "saved at /models/run-1" in message
    assert SECRET not in message
    assert os.environ.get("MLFLOW_HTTP_REQUEST_MAX_RETRIES") == retries  # impatient only inside


# --- 16: a mistyped key is named with the closest one, before anything starts ----------------


class Model(Config):
    hidden: int = 64
    layers: int = 2


class Training(Config):
    epochs: int = 1
    batch_size: int = 8
    model: Model = Model()
    optional: Model | None = None


@pytest.mark.parametrize(
    ("override", "suggestion"),
    [
        ("epoch=3", "epoch: unknown key, did you mean epochs?"),
        ("model.hiden=3", "model.hiden: unknown key, did you mean model.hidden?"),
        ("hidden=3", "hidden: unknown key, did you mean model.hidden?"),
        ("batchsize=3", "did you mean batch_size?"),
        ("optional.layer=3", "did you mean optional.layers?"),
    ],
)
def test_an_unknown_key_is_named_with_the_closest(override, suggestion):
    with pytest.raises(ConfigError, match=re.escape(suggestion)):
        load(Training, None, [override])


def test_an_unrelated_key_gets_no_suggestion():
    with pytest.raises(ConfigError) as error:
        load(Training, None, ["zzz=1"])
    assert str(error.value).endswith("zzz: unknown key")


def test_dotted_keys():
    assert dotted_keys(Training) == [
        "epochs", "batch_size", "model", "model.hidden", "model.layers",
        "optional", "optional.hidden", "optional.layers",
    ]  # fmt: skip


def test_a_job_reports_a_mistyped_key_before_ray(tmp_path, home, capsys, ray_starts):
    from conceptual.jobs import import_captions

    (tmp_path / "in").mkdir()
    argv = ["--folder", str(tmp_path / "in"), "--output", str(tmp_path / "out"), "split=1"]
    assert import_captions.main(argv) == 2
    err = capsys.readouterr().err
    assert re.search(r"^error: invalid ImportConfig: split: unknown key, did you mean", err, re.M)
    assert not _ray_started(ray_starts)


def test_a_mistyped_key_is_answered_before_the_pipeline_is_imported():
    """Not after torch, Ray and MLflow have loaded (13-20 s on a busy machine)."""
    code = (
        "import sys; from conceptual.jobs import train_captioner as job;"
        "code = job.main(['--features', '/nowhere', 'epoch=3', 'model.architecure=rnn']);"
        "heavy = [m for m in ('torch', 'ray', 'mlflow') if m in sys.modules];"
        "print(heavy); sys.exit(code)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 2 and result.stdout.strip() == "[]", result.stderr
    assert result.stderr.startswith(
        "error: invalid config: epoch: unknown key, did you mean epochs?"
    )
    assert "model.architecure: unknown key, did you mean model.architecture?" in result.stderr


def test_a_missing_input_is_said_before_the_pipeline_is_imported(tmp_path):
    """It took 1m51s under load (Ray and the pipeline imported first)."""
    code = (
        "import sys; from conceptual.jobs import curate as job;"
        f"code = job.main(['--input', '{tmp_path}/nowhere', '--output', '{tmp_path}/out']);"
        "heavy = [m for m in ('torch', 'ray', 'mlflow') if m in sys.modules];"
        "print(heavy); sys.exit(code)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 2 and result.stdout.strip() == "[]", result.stderr
    assert result.stderr.startswith(f"error: --input {tmp_path}/nowhere: no such file or folder")
    assert not (tmp_path / "out").exists()


def test_an_import_without_a_split_is_refused_before_ray(tmp_path, home, capsys, ray_starts):
    from conceptual.jobs import import_conceptual

    (tmp_path / "captions.tsv").write_text("a dog .\thttp://x.test/d.jpg\n")
    argv = ["--input", str(tmp_path / "captions.tsv"), "--output", str(tmp_path / "out")]
    assert import_conceptual.main(argv) == 2
    assert "--split" in capsys.readouterr().err
    assert not _ray_started(ray_starts)


def test_the_early_check_reads_the_config_file_too(tmp_path, capsys):
    from conceptual.jobs import train_retriever

    config = tmp_path / "c.yaml"
    config.write_text("epochs: 2\nmodel:\n  embed_dimm: 8\n")
    assert train_retriever.main(["--features", "/nowhere", "--config", str(config)]) == 2
    assert "model.embed_dimm: unknown key, did you mean model.embed_dim?" in capsys.readouterr().err


def test_the_shipped_files_can_check_every_key_early(repo):
    """check_keys knows a config's keys from its shipped file: sound while every free-form
    mapping (whose keys the file could not list) ships as null, a leaf whose keys check_keys
    leaves to `load` (the ablation's variants and training keys)."""
    from test_configs import CONFIG_FILES, config_class

    def mappings(model, prefix=""):
        for name, field in model.model_fields.items():
            annotation = field.annotation
            for arg in (annotation, *typing.get_args(annotation)):
                mapping = typing.get_origin(arg) in (dict, collections.abc.Mapping) or arg is dict
                if mapping and field.default is not None:
                    yield f"{prefix}{name}"
                if isinstance(arg, type) and issubclass(arg, Config):
                    yield from mappings(arg, f"{prefix}{name}.")

    for name in CONFIG_FILES:
        cls = config_class(name)
        assert not list(mappings(cls)), name
        check_keys(name, [f"{key}=1" for key in flatten(cls())])  # every key passes


def test_job_errors_have_one_spelling():
    pattern = re.compile(r"""print\(f?["'](?!error: )[^"']*(?i:error)""")
    for path in [*(REPO / "jobs").glob("*.py"), REPO / "platform/conceptual/importers.py"]:
        assert not pattern.search(path.read_text()), path.name


# --- 16: s3:// with nothing to reach it says so at once --------------------------------------


@pytest.fixture
def no_aws(tmp_path, monkeypatch):
    import os

    for name in [n for n in os.environ if n.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def test_s3_without_credentials_or_endpoint_fails_at_once(no_aws):
    started = time.monotonic()
    with pytest.raises(storage.StorageError, match="needs credentials or an endpoint"):
        storage.exists("s3://bucket/key")
    assert time.monotonic() - started < 1


@pytest.mark.parametrize(
    "setting", ["endpoint", "keys", "profile", "credentials file", "instance role"]
)
def test_s3_with_a_way_to_the_store_is_accepted(setting, no_aws, monkeypatch):
    if setting == "endpoint":
        monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    elif setting == "keys":
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    elif setting == "profile":
        monkeypatch.setenv("AWS_PROFILE", "research")
    elif setting == "credentials file":
        (no_aws / ".aws").mkdir()
        (no_aws / ".aws" / "credentials").write_text("[default]\n")
    else:
        monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "false")
    fs, path = storage.resolve("s3://bucket/key")
    assert fs.type_name == "s3" and path == "bucket/key"
