"""Every curation judged by the model it trains: the same candidates curated under each of N
curation configs, a model of one family trained on each result with one seed and budget,
and every model scored on one fixed held-out set (docs/curation.md, "Choosing a curation:
the ablation").

    CANDIDATES  ->  per variant, the pipeline job's curate and features steps under
                    OUTPUT/variants/<name>/ (skipped when done with the same inputs and
                    config: a rerun, or a variant added later, curates only what is new)
                ->  one training run per variant (the family's, the shared `train` keys)
                ->  one evaluation per variant on EVAL FEATURES' `evaluate.split`
                ->  the comparison run: comparison.json/.md/.png; OUTPUT/ablation.json,
                    ablation.md, ablation.png

It is the comparison driver (pipelines/evaluation/comparison.py) where a variant is a curation config:
each variant is a child run of the comparison run holding its funnel (funnel.json,
funnel.txt, `kept`) and, as its children, its pipeline run (curation, features), its
training run and its evaluation run; the table ranks the variants by the family's metric
(mean_R@10) with its 95% bootstrap interval over the held-out images and a paired p-value
against the best.

A variant is `name: key=value ...` of curation keys over the shared `curate` section
(configs/ablate.yaml: `no-overlap: overlap.enabled=false`); every variant is validated
before anything runs, so a typo in the last one is said before the first curates.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from typing import Any

import mlflow
from matplotlib.figure import Figure

from conceptual import funnel, storage
from conceptual.config import Config, ConfigError, merge, validated
from conceptual.intervals import error_bars
from conceptual.models.saving import SavedRetriever
from conceptual.pipelines import pipeline
from conceptual.pipelines.curation.curation_config import CurationConfig
from conceptual.pipelines.evaluation.comparison import Comparison, Trained, Variant, parse_variant
from conceptual.pipelines.evaluation.comparison import compare as run_comparison
from conceptual.pipelines.evaluation.comparison import markdown_table as comparison_markdown
from conceptual.pipelines.families import FAMILIES
from conceptual.pipelines.families.retriever.compare_retrievers import (
    cell,
    comparison_row,
    held_out_score,
)
from conceptual.pipelines.families.retriever.evaluate_retriever import (
    SELECT_BY,
    RetrieverEvalConfig,
)
from conceptual.pipelines.features.features import FeaturesConfig
from conceptual.vision.alignment import check_scorer

JOB = "ablate"
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # a variant's name: its folder, its run
STEPS = ["curate", "features"]  # the pipeline job's steps each variant runs
SHOWN = ("text_to_image.R@10", "image_to_text.R@10")  # beside SELECT_BY in the table
# The families a curation is judged by: those that train on the features alone and are
# scored as retrievers on text queries (evaluate_retriever's code, each run tagged as its
# family's evaluate job).
FAMILY_NAMES = tuple(f.name for f in FAMILIES.values() if issubclass(f.saved(), SavedRetriever))


class AblateConfig(Config):
    input: str | None = None  # the candidates every variant curates (required)
    # The held-out set every model is scored on: a features job's output whose photos are
    # never among the candidates (required).
    eval_features: str | None = None
    output: str | None = None  # variants/<name>/, ablation.json, ablation.md (required)
    experiment: str = "ablation"  # the comparison run and every run below it
    family: str = "contrastive"  # the model trained on each curation (FAMILY_NAMES)
    # name -> curation overrides over `curate`, "key=value ..." ("" keeps it as it is);
    # at least two (null: none yet).
    variants: dict[str, str] | None = None
    # What every variant starts from: curate job keys (configs/curation.yaml lists them),
    # `image: {min_side: 300}`; null: its defaults.
    curate: CurationConfig | None = None
    features: FeaturesConfig = FeaturesConfig()
    # The family's training keys (its config file's), the same for every variant: the seed
    # and the budget (epochs) among them; null: its defaults.
    train: dict[str, Any] | None = None
    evaluate: RetrieverEvalConfig = RetrieverEvalConfig()  # split: the held-out split scored


class Planned:
    """An ablation checked before anything runs: the family's training config and every
    variant's curation config."""

    def __init__(self, config: AblateConfig) -> None:
        missing = [k for k in ("input", "eval_features", "output") if not getattr(config, k)]
        if missing:
            raise ConfigError(f"the ablation needs {' and '.join(f'{k}=URI' for k in missing)}")
        if config.family not in FAMILY_NAMES:
            raise ConfigError(
                f"family {config.family!r} is not one a curation is judged by: "
                f"{', '.join(FAMILY_NAMES)}"
            )
        if len(config.variants or {}) < 2:
            raise ConfigError(
                f"an ablation compares at least 2 variants, not {len(config.variants or {})}: "
                "variants: {name: 'key=value ...', ...}"
            )
        if bad := [n for n in config.variants or {} if not NAME.fullmatch(n)]:
            raise ConfigError(
                f"variant names are letters, digits and ._- (a folder and a run each), not "
                f"{', '.join(map(repr, bad))}"
            )
        self.config = config
        self.recipe = FAMILIES[config.family].recipe()
        train = validated(
            self.recipe.config, merge(config.train or {}, {"experiment": config.experiment})
        )
        if getattr(train, "modality", "text") != "text":
            raise ConfigError("train.modality=text: the ablation's held-out queries are captions")
        self.train = train
        self.curation = config.curate or CurationConfig()  # the shared one
        self.curations = dict(
            parse_variant(f"{name}: {overrides}", self.curation)
            for name, overrides in (config.variants or {}).items()
        )
        # A missing scorer is said now, not when its variant's turn comes.
        for scorer in {c.alignment.scorer: c.alignment for c in self.curations.values()}.values():
            check_scorer(scorer)

    def folder(self, name: str) -> str:
        return storage.join(self.config.output, "variants", name)

    def pipeline_config(self, name: str) -> Any:
        """The pipeline job's config that curates the candidates as variant `name` says and
        extracts their features, into the variant's folder."""
        return pipeline.PipelineConfig(
            input=self.config.input,
            output=self.folder(name),
            steps=STEPS,
            experiment=self.config.experiment,
            curate=self.curations[name],
            features=self.config.features,
        )

    def variants(self) -> list[Variant]:
        return [
            Variant(name, self.train, prepare=self._preparer(name), registrable=False)
            for name in self.curations
        ]

    def _preparer(self, name: str) -> Any:
        def prepare(run_id: str) -> Sequence[str]:
            """Curate and extract features (skipped when done), the funnel on the variant's
            run; train()'s data: the features."""
            pipeline.run(self.pipeline_config(name))
            stats = self.stats(name)
            with mlflow.start_run(run_id=run_id):
                mlflow.log_dict(funnel.without_samples(stats), "funnel.json")
                mlflow.log_text(funnel.render(stats), "funnel.txt")
                mlflow.log_metrics({"input": stats["input"], "kept": stats["kept"]})
            return [pipeline.step_folder(self.pipeline_config(name), "features")]

        return prepare

    def stats(self, name: str) -> dict[str, Any]:
        curated = pipeline.step_folder(self.pipeline_config(name), "curate")
        return storage.read_json(storage.join(curated, "stats.json"))

    def row(self, trained: Trained) -> dict[str, Any]:
        """A variant's row: its overrides and funnel, then the retriever comparison's."""
        stats = self.stats(trained.name)
        return {
            "variant": trained.name,
            "overrides": self.config.variants[trained.name],
            "input": stats["input"],
            "kept": stats["kept"],
            "funnel": stats["rejected"],  # stage -> reason -> candidates
            **{k: v for k, v in comparison_row(trained).items() if k != "variant"},
        }


def run(config: AblateConfig) -> dict[str, Any]:
    """Curate, train and score every variant (Planned checks them all first); the table to
    the comparison run and to OUTPUT/. Returns `run_id` (the comparison run), `rows` (best
    first) and `table` (ablation.md's text)."""
    planned = Planned(config)
    evaluation = config.evaluate.model_copy(update={"experiment": config.experiment})
    how = Comparison(
        recipe=planned.recipe,
        job=JOB,
        metric=SELECT_BY,
        score=held_out_score(FAMILIES[config.family], config.eval_features, evaluation),
        row=planned.row,
        table=markdown_table,
        plot=plot,
        also_logged=("kept",),
    )
    params = {
        "input": config.input,
        "eval_features": config.eval_features,
        "variants": " | ".join(f"{n}: {o}" for n, o in config.variants.items()),
    }
    result = run_comparison(how, config, planned.variants(), params, register="none")
    rows, table = result["rows"], markdown_table(result["rows"])
    storage.write_json(storage.join(config.output, "ablation.json"), rows)
    storage.write_bytes(storage.join(config.output, "ablation.md"), table.encode())
    picture = io.BytesIO()
    plot(rows).savefig(picture, format="png")
    storage.write_bytes(storage.join(config.output, "ablation.png"), picture.getvalue())
    return {"run_id": result["run_id"], "rows": rows, "table": table}


def markdown_table(rows: Sequence[dict[str, Any]]) -> str:
    """A line per variant, best first: its overrides, what its curation kept, R@10 both
    ways and mean R@10 with its 95% interval and its p-value against the best."""
    columns = ["variant", "overrides", "kept", *SHOWN, SELECT_BY, "p vs best", "train_seconds"]
    chance = ["chance", "", "", *(cell(rows[0].get(f"chance {c}")) for c in SHOWN), "", "", ""]
    return comparison_markdown(columns, rows, SELECT_BY, cell, "Evaluation set", last=chance)


def plot(rows: Sequence[dict[str, Any]]) -> Figure:
    """Each variant's mean R@10 with its 95% interval, beside how many candidates it kept."""
    figure = Figure(figsize=(10, 4))
    scores, kept = figure.subplots(1, 2)
    names = [row["variant"] for row in rows]
    values = [row[SELECT_BY] for row in rows]
    bars = [error_bars(row, [SELECT_BY])[:, 0] for row in rows]
    scores.bar(names, values, yerr=list(zip(*bars)), capsize=3)
    scores.set(title=f"held-out {SELECT_BY} [95% interval]", ylabel=SELECT_BY)
    kept.bar(names, [row["kept"] for row in rows])
    kept.set(title="candidates kept", ylabel="records")
    for ax in (scores, kept):
        ax.tick_params(axis="x", labelrotation=20)
    figure.tight_layout()
    return figure
