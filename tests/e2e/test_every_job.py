"""Every job of `conceptual.jobs` submitted with `ray job submit --working-dir .` to a
`ray start --head`, chained where one's output is another's input, on small data (the
demo's photos, ../shared/data): each finishes with its documented outputs, or refuses with
exit code 2 and a one-line reason (a dataset that is not in ../shared/data). The table
below names every job: a new job without a step in it fails the first test here, in the
default run, before any cluster starts."""

from __future__ import annotations

import ast
import csv
import pkgutil
import re
import shlex
import shutil
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest
from ray_cli import REPO, free_port, job_logs, output_of, ray_env, start_head, stop_job, submit
from waiting import wait_until  # tests/waiting.py

pytestmark = pytest.mark.e2e


@dataclass(frozen=True)
class Step:
    """One submission: `python -m conceptual.jobs.JOB ARGS` ({t}: this run's folder, {real}:
    ../shared/data, {port}: a free port). It must exit 0, write `outputs` (under {t}) and
    print `says`; or, with `refuses`, exit 2 with that one line all it printed."""

    job: str
    args: str
    outputs: tuple[str, ...] = ()
    says: str = ""
    refuses: str = ""


def write_ratings(t: Path) -> None:
    """Three raters answer GOOD to every item of the caption_quality task set."""
    from conceptual.rating.tasks import read_task_set

    items = read_task_set(str(t / "tasks")).items
    with open(t / "ratings.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["rater", "item_id", "answer"])
        writer.writerows([r, i["item_id"], "GOOD"] for i in items for r in ("r0", "r1", "r2"))


CAPTIONER = (
    "model.d_model=32 model.layers=1 model.heads=2 model.ffn=64 min_count=1 optimizer=adamw "
    "epochs=1 batch_size=16 eval_metrics=[CIDEr] beam=2 cpus_per_worker=0.5 min_eval_size=1"
)
RETRIEVER = (
    "model.embed_dim=16 model.image_hidden=16 model.text_d_model=16 model.text_layers=1 "
    "model.text_heads=2 model.max_tokens=12 min_count=1 batch_size=8 epochs=1 "
    "cpus_per_worker=0.5 max_failures=0 min_eval_size=1"
)
FLUENCY = (  # splits of the 32 labelled photos (the default 10% leaves a split without any)
    "model.embed_dim=16 model.hidden=16 model.max_tokens=16 epochs=1 batch_size=64 "
    "cpus_per_worker=0.5 min_eval_size=1 splits.train=0.6 splits.val=0.2 splits.test=0.2"
)
ZH_CAPTIONER = " ".join(f"train.{key}" for key in CAPTIONER.split())
PIPELINE = (
    "steps=[curate,features,train,register,evaluate] model_name=every-job-pipeline "
    "curate.resources.nlp_actors=1 curate.resources.vision_actors=1 features.actors=1 "
    + " ".join(f"train.{key}" for key in CAPTIONER.split() if not key.startswith("optimizer"))
    + " evaluate.metrics=[CIDEr] evaluate.beam=2"
)
# Two curations of the captioned photos, a contrastive model each, scored on their test split
# (the e2e run checks the job, not the choice: BENCHMARKS.md holds a held-out ablation).
ABLATION = (
    "'variants={{all: \"\", no-overlap: overlap.enabled=false}}' "  # {{: Step.args is a format
    "curate.entity_frequency.more_than=2 curate.dedup.by_url=false curate.dedup.by_image=false "
    "curate.resources.nlp_actors=1 curate.resources.vision_actors=1 features.actors=1 "
    + " ".join(f"train.{key}" for key in RETRIEVER.split())
)
# The attend family: the captioner's keys but the Transformer's, its LSTM's architecture.
ATTEND = " ".join(k for k in CAPTIONER.split() if not k.startswith(("model.layers", "model.heads",
                                                                     "model.ffn")))  # fmt: skip
ATTEND += " model.architecture=rnn"
CAPTIONER_1 = "models:/every-job-captioner/1"
ATTEND_1 = "models:/every-job-attend/1"
RETRIEVER_1 = "models:/every-job-retriever/1"
CONTRASTIVE_1 = "models:/every-job-contrastive/1"
FEATURES = "{t}/features/_SUCCESS"  # what the retrieval chain waits for

# Each chain runs in order, beside the others; a str in a chain is a file it waits for
# (another chain's output), a callable a step of the test's own (given the run's folder).
CHAINS: dict[str, list] = {
    "captioning": [
        Step(
            "import_captions",
            "--folder {t}/dataset --output {t}/data --curated",
            ("data/curated", "data/import.json", "data/_SUCCESS"),
        ),
        Step(
            "features",
            "--data {t}/data --output {t}/features actors=1",
            ("features/features", "features/features.json", "features/_SUCCESS"),
        ),
        Step(
            "train_captioner",
            f"--features {{t}}/features --model-name every-job-captioner {CAPTIONER}",
            says=f"registered: {CAPTIONER_1}",
        ),
        Step(
            "evaluate_captioner",
            f"--model {CAPTIONER_1} --features {{t}}/features --split test metrics=[CIDEr] beam=2",
            says="baseline [95% interval]",
        ),
        Step(
            "caption",
            f"--model {CAPTIONER_1} --beam 2 --results-json {{t}}/captions.json "
            "{t}/dataset/images",
            ("captions.json",),
        ),
        Step(
            "compare_captioners",
            "--features {t}/features --variants rnn-1x1 "
            f"--register none {CAPTIONER} experiment=every-job",
            says="| rnn-1x1 |",
        ),
        Step(  # a family with no job file of its own: its jobs by their verb
            "train",
            f"--family attend --features {{t}}/features --model-name every-job-attend {ATTEND}",
            says=f"registered: {ATTEND_1}",
        ),
        Step(
            "evaluate",
            f"--family attend --model {ATTEND_1} --features {{t}}/features --split test "
            "metrics=[CIDEr] beam=2",
            says="baseline [95% interval]",
        ),
        Step(
            "caption",
            f"--model {ATTEND_1} --beam 2 --results-json {{t}}/attend_captions.json "
            "{t}/dataset/images",
            ("attend_captions.json",),
        ),
        Step(
            "benchmark_training",
            "--features {t}/features --steps 2 --warmup 1 "
            "model.architecture=rnn model.feature_map=1x1 model.d_model=32 batch_size=16",
            says="samples_per_s",
        ),
        Step(
            "publish_dataset",
            "--data {t}/data --output {t}/hub license=cc-by-4.0",
            ("hub/README.md", "hub/data"),
        ),
        Step("lineage", f"--model {CAPTIONER_1}", says="{t}/features"),
        Step(
            "rating_tasks",
            "--kind caption_quality --data {t}/data --output {t}/tasks",
            ("tasks/tasks.parquet",),
        ),
        write_ratings,
        Step("rating_page", "--tasks {t}/tasks --invite ann --port {port}"),  # a server: Run.serve
        Step(
            "rating_results",
            "--tasks {t}/tasks --ratings {t}/ratings.csv",
            says="agreement: fleiss_kappa",
        ),
        Step(
            "clean_split",
            "--data {t}/data --tasks {t}/tasks --ratings {t}/ratings.csv "
            "--split test --min-good 2 --output {t}/clean",
            ("clean/curated", "clean/stats.json", "clean/_SUCCESS"),
        ),
    ],
    "retrieval": [
        FEATURES,
        Step(
            "train_retriever",
            f"--features {{t}}/features --model-name every-job-retriever modality=text {RETRIEVER}",
            says=f"registered: {RETRIEVER_1}",
        ),
        Step(
            "evaluate_retriever",
            f"--model {RETRIEVER_1} --features {{t}}/features --split test",
            says="text_to_image.R@1",
        ),
        Step(
            "build_index",
            f"--model {RETRIEVER_1} --data {{t}}/features --output {{t}}/index",
            ("index/index.json",),
        ),
        Step(
            "compare_retrievers",
            "--features {t}/features --eval-features {t}/features "
            "--split test --variant 'mms: loss=mms' --register none modality=text "
            f"{RETRIEVER} experiment=every-job",
            says="| mms |",
        ),
        Step(
            "train_contrastive",
            f"--features {{t}}/features --model-name every-job-contrastive {RETRIEVER}",
            says=f"registered: {CONTRASTIVE_1}",
        ),
        Step(
            "evaluate_contrastive",
            f"--model {CONTRASTIVE_1} --features {{t}}/features --split test",
            says="text_to_image.R@1",
        ),
        Step(  # any family's job by its verb: the same job
            "evaluate",
            f"--family contrastive --model {CONTRASTIVE_1} --features {{t}}/features --split test",
            says="text_to_image.R@1",
        ),
        "{t}/captions.json",  # the captioning chain's captioner is registered
        Step(
            "recaption",
            f"--data {{t}}/data --output {{t}}/recaptioned --model {CAPTIONER_1} "
            f"scorer={CONTRASTIVE_1} actors=1",
            ("recaptioned/curated", "recaptioned/choices", "recaptioned/recaption.json"),
            says="the synthetic caption kept for",
        ),
        Step(
            "compare_contrastive",
            "--features {t}/features --eval-features {t}/features "
            "--split test --variant 'fast: lr=0.003' --register none "
            f"{RETRIEVER} experiment=every-job",
            says="| fast |",
        ),
        Step(
            "compare",
            "--family contrastive --features {t}/features --eval-features {t}/features "
            "--split test --variant 'slow: lr=0.0003' --register none "
            f"{RETRIEVER} experiment=every-job",
            says="| slow |",
        ),
        Step(
            "train",
            "--family contrastive --features {t}/features --model-name every-job-contrastive-2 "
            f"{RETRIEVER}",
            says="registered: models:/every-job-contrastive-2/1",
        ),
        Step(
            "synthesize_speech",
            "--input {t}/data --output {t}/speech",
            ("speech/clips", "speech/stats.json", "speech/_SUCCESS"),
        ),
        Step(
            "pipeline",
            "--config examples/pipeline_small.yaml input={t}/data/curated "
            f"output={{t}}/walk experiment=every-job {PIPELINE}",
            ("walk/summary.json",),
        ),
        Step(
            "ablate",
            "input={t}/data/curated eval_features={t}/features output={t}/ablation "
            f"experiment=every-job {ABLATION}",
            ("ablation/ablation.json", "ablation/ablation.md"),
            says="| no-overlap |",
        ),
    ],
    "text and imports": [
        Step("hypernymize", "--filters {t}/lines.txt", says="crowd at a concert"),
        Step(
            "harvest",
            "--input {t}/site.warc.gz --output {t}/harvest",
            ("harvest/candidates", "harvest/stats.json"),
        ),
        Step(
            "curate",
            "--input {t}/harvest/candidates --output {t}/crawl with_images=false "
            "entity_frequency.enabled=false resources.nlp_actors=1",
            ("crawl/curated", "crawl/stats.json", "crawl/_SUCCESS"),
        ),
        Step(
            "import_coco",
            "--root {real}/coco_mini --output {t}/coco --curated",
            ("coco/curated", "coco/import.json"),
        ),
        Step(
            "import_conceptual",
            "--input {t}/gcc/Validation_GCC-1.1.0-Validation.tsv.gz "
            "--output {t}/gcc-import fetch.allow_hosts=[127.0.0.1] samples=0 "
            "resources.nlp_actors=1 resources.vision_actors=1",
            ("gcc-import/curated", "gcc-import/stats.json", "gcc-import/_SUCCESS"),
        ),
        # Neither dataset is in ../shared/data: each says what it did not find.
        Step(
            "import_facc",
            "--folder {real}/flickr8k_mini --flickr8k {real}/flickr8k_mini --output {t}/facc",
            refuses="error: no such folder: {real}/flickr8k_mini/wavs",
        ),
        Step(
            "import_flickr30k_cn",
            "--images {real}/flickr8k_mini/images "
            "--cn {real}/flickr8k_cn --output {t}/flickr30k-cn",
            refuses="error: {real}/flickr8k_cn holds none of Flickr30k-CN's folders "
            "(flickr30kzhbbosontrain, flickr30kzhbbosonval, flickr30kzhmbosontest)",
        ),
    ],
    "fluency": [
        Step(
            "import_flickr8k_cn",
            "--images {t}/flickr --cn {t}/cn --output {t}/zh split=official",
            ("zh/curated",),
        ),
        Step(
            "train_fluency",
            f"--cn {{t}}/cn --model-name every-job-fluency {FLUENCY}",
            says="registered: models:/every-job-fluency/1",
        ),
        Step(
            "score_fluency",
            "--model models:/every-job-fluency/1 --data {t}/zh --output {t}/zh-scored actors=1",
            ("zh-scored/curated", "zh-scored/fluency.json", "zh-scored/_SUCCESS"),
        ),
        Step(
            "features",
            "--data {t}/zh-scored --output {t}/zh-features actors=1",
            ("zh-features/_SUCCESS",),
        ),
        Step(
            "compare_fluency",
            "--features {t}/zh-features --reference baidu={t}/zh-features "
            "strategies=[none] late_translation=false fluency_model=models:/every-job-fluency/1 "
            f"beam=2 registered=none experiment=every-job {ZH_CAPTIONER}",
            says="without fluency",
        ),
        Step(
            "import_flickr8k_cn",
            "--images {t}/flickr --cn {t}/cn --output {t}/en source=english split=official",
            ("en/curated",),
        ),
        Step(
            "translate",
            "--data {t}/en --output {t}/translated --to zh --cn {t}/cn "
            "nearest=false actors=1 errors.max_rate=0.5",
            ("translated/curated", "translated/translate.json", "translated/_SUCCESS"),
        ),
    ],
}


def every_job() -> set[str]:
    """The jobs of `conceptual.jobs`: each module that defines a `main` (not its helpers,
    such as arguments and runner); a family's job without a file of its own runs as its
    verb (`train --family attend`: tests/unit/house/test_job_guarantees.py checks each).
    Read from the sources, not imported: a job that cannot be imported is still a job."""
    import conceptual.jobs as jobs

    def defines_main(path: Path) -> bool:
        for node in ast.parse(path.read_text()).body:
            targets = node.targets if isinstance(node, ast.Assign) else [node]
            if any(
                getattr(target, "id", getattr(target, "name", None)) == "main" for target in targets
            ):
                return True
        return False

    folder = Path(jobs.__file__).parent
    modules = {m.name for m in pkgutil.iter_modules([str(folder)])}
    return {m for m in modules if defines_main(folder / f"{m}.py")}


def test_every_job_is_in_the_table_and_the_docs():
    """A new job fails here until it has a step above and a place in the documentation (the
    README and the documents under docs/ it links)."""
    table = {step.job for chain in CHAINS.values() for step in chain if isinstance(step, Step)}
    assert table == every_job(), "jobs without a step, or steps of no job"
    documents = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    docs = "\n".join(document.read_text() for document in documents)
    unnamed = [job for job in sorted(table) if not re.search(rf"conceptual\.jobs\.{job}\b", docs)]
    assert not unnamed, f"jobs no document names: {unnamed}"


@dataclass
class Run:
    """The cluster and the folders the steps read and write, with what each step took."""

    address: str
    env: dict[str, str]
    t: Path
    real: Path
    failed: threading.Event
    took: dict[str, float]

    def step(self, step: Step) -> None:
        fields = {"t": self.t, "real": self.real, "port": free_port()}
        args = shlex.split(step.args.format(**fields))
        name = f"every-job-{step.job}-{len(self.took)}-{time.monotonic_ns()}"
        start = time.monotonic()
        result = submit(self.address, self.env, f"conceptual.jobs.{step.job}", *args,
                        timeout=900, submission_id=name, wait=step.job != "rating_page")  # fmt: skip
        if step.job == "rating_page":
            self.serve(step, name)
        elif step.refuses:
            said = output_of(result)
            assert result.returncode != 0 and "failed with exit code 2" in said, said
            said = job_logs(self.address, self.env, name).strip()
            assert said == step.refuses.format(**fields), said
        else:
            assert result.returncode == 0, f"{step.job}: {output_of(result)}"
            assert step.says.format(**fields) in result.stdout, f"{step.job}: {output_of(result)}"
            for path in step.outputs:
                assert (self.t / path).exists(), f"{step.job} wrote no {path}"
        self.took[f"{step.job} {len(self.took)}"] = time.monotonic() - start

    def serve(self, step: Step, name: str) -> None:
        """A server job: its invitation link answers with the rating page, then `ray job
        stop` ends it, as Ctrl-C would."""
        links: list[str] = []

        def invited() -> bool:
            links[:] = re.findall(r"invite:\s+ann: (\S+)", job_logs(self.address, self.env, name))
            return bool(links)

        try:
            wait_until(invited, f"{step.job}'s invitation", 300, step_s=2)
            wait_until(lambda: answers(links[0]), f"{step.job} at {links[0]}", 60, step_s=0.5)
        finally:
            stop_job(self.address, self.env, name)

    def wait_for(self, path: Path) -> None:
        wait_until(lambda: path.exists() or self.failed.is_set(), str(path), 900, step_s=1)

    def chain(self, entries: list) -> None:
        try:
            for entry in entries:
                if self.failed.is_set():
                    return
                if isinstance(entry, Step):
                    self.step(entry)
                elif isinstance(entry, str):
                    self.wait_for(Path(entry.format(t=self.t)))
                else:
                    entry(self.t)
        except BaseException:
            self.failed.set()
            raise


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status == 200 and b"<form" in response.read()
    except OSError:
        return False


def prepare(t: Path, real: Path, stack: ExitStack) -> None:
    """The inputs: the demo's photos with captions, a line of text, a tiny crawl, released
    Conceptual Captions rows whose photos a server on 127.0.0.1 serves while the test runs,
    and Flickr8k-mini photos with their Flickr8k-CN sentences."""
    from released_fixtures import build, write_tsv  # tests/released_fixtures.py
    from web_archives import response, write_archive  # tests/web_archives.py

    from conceptual_demo.images import write_captioned_folder
    from conceptual_demo.server import serve_directory

    write_captioned_folder(t / "dataset", captions_per_photo=4)
    (t / "lines.txt").write_text("Crowd at a concert in Los Angeles\n")
    pages = [
        response(f"http://site.test/p{i}.html", f'<img src="/{i}.jpg" alt="{alt}">'.encode())
        for i, alt in enumerate(["A brown dog runs along the beach", "A boat on the lake"])
    ]
    write_archive(t / "site.warc.gz", pages)
    rows = build(real, t / "www", photos=4, gone=1)
    server = stack.enter_context(serve_directory(t / "www"))
    write_tsv(t / "gcc" / "Validation_GCC-1.1.0-Validation.tsv.gz", rows, server.url)
    write_flickr8k_cn(real, t / "flickr", t / "cn")


def write_flickr8k_cn(real: Path, images: Path, cn: Path, labelled: int = 30) -> None:
    """Flickr8k-mini photos of each official split in `images`, and Flickr8k-CN's lines of
    those photos and of `labelled` more test photos (the ones with human translations, whose
    machine translations train_fluency labels) in `cn`."""
    images.mkdir()
    cn.mkdir()
    mini = {p.stem for p in (real / "flickr8k_mini" / "images").glob("*.jpg")}
    kept: set[str] = set()
    for split, count in (("train", 6), ("val", 2), ("test", 2)):
        listed = (real / "flickr8k_cn" / f"flickr8k{split}.txt").read_text().split()
        photos = sorted(mini.intersection(listed))
        for stem in photos[:count]:
            shutil.copy(real / "flickr8k_mini" / "images" / f"{stem}.jpg", images)
        kept.update(photos[: count + (labelled if split == "test" else 0)])
    for source in (real / "flickr8k_cn").glob("*.txt"):
        lines = source.read_text(encoding="utf-8").splitlines()
        ours = [line for line in lines if line.split(".jpg", 1)[0].split("#", 1)[0] in kept]
        (cn / source.name).write_text("".join(f"{line}\n" for line in ours), encoding="utf-8")


@pytest.mark.slow  # every job once: minutes (the README's "Tests and benchmarks" gives the time)
@pytest.mark.realdata
@pytest.mark.timeout(1800)
def test_every_job_submitted_to_a_cluster(platform_home, real_data, tmp_path):
    env = ray_env()
    head, address, _ = start_head(tmp_path, env, "--num-cpus=2")
    run = Run(address, env, tmp_path, real_data, threading.Event(), {})
    start = time.monotonic()
    try:
        with ExitStack() as stack, ThreadPoolExecutor(len(CHAINS)) as pool:
            prepare(tmp_path, real_data, stack)
            for chain in [pool.submit(run.chain, entries) for entries in CHAINS.values()]:
                chain.result()
    finally:
        head.stop()
        took = time.monotonic() - start
        print(f"\nevery job: {took:.0f} s")
        for step, seconds in sorted(run.took.items(), key=lambda item: -item[1]):
            print(f"  {step}: {seconds:.0f} s")
    assert took < 15 * 60, f"every job took {took:.0f} s, over 15 minutes"
