"""Every model family the platform trains, declared once in the family table FAMILIES (as
torchtune's recipe registry: one explicit list drives the command line and the configs;
"registry" alone is MLflow's model registry, conceptual.registry).

A family is its recipe (pipelines/training/training.py's Recipe: config, data, training loop, the
metric that picks the champion), the saved form its models take, its config file, its jobs
and how it is served. What used to be listed family by family is read from FAMILIES:

- `saving.load` loads every family's `kind` through its `saved` class;
- `python -m conceptual.jobs.<job>` finds each family's jobs here (conceptual/jobs/__init__.py
  builds the ones that have no file of their own from `jobs`);
- tests/unit/test_configs.py checks each family's `config_file` against its recipe's config;
- the serving app runs the `search` entries' retrievers (ServeConfig.retrievers, chosen per
  request with `?retriever=`: conceptual/serve/retriever_deployment.py, routes.py).

A new family is a model (or a variant of one), a recipe, a config file and an entry here:
docs/architecture.md counts the files the contrastive family took.

Entries name code by "module:attribute" strings, resolved when used: the core declares the
families without importing the pipelines that train them (imports run one way).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass(frozen=True)
class Search:
    """A family's models served for search (serve/retriever_deployment.py): the deployment's
    name, the registered model whose champion it follows, and the routes' query parameter
    (`/v1/search/images?retriever=<key>`; the key is also ServeConfig.retrievers' entry)."""

    key: str  # "text": what ServeConfig.retrievers lists to run it
    deployment: str  # "TextRetriever"
    model_name: str  # "retriever-text": its champion is served
    # Its models' query tower (RetrieverConfig.modality), which the ingress must know before
    # a model is loaded: text queries (and images, for captions) or spoken ones.
    modality: Literal["text", "speech"] = "text"


@dataclass(frozen=True)
class Family:
    name: str  # "captioner": the family's word in docs and messages
    # "module:Class", the models.saving.Saved class its models load as; that class declares
    # the kind their config.json says (saving.load reads it)
    saved: str
    recipe: str  # "module:RECIPE", its pipelines.training.Recipe
    config_file: str  # configs/<config_file>: every key of the recipe's config, its default
    registers: str  # the registered model(s) its versions join, as its jobs' help says
    example: str  # a few of its config's overrides, as its training job's help shows them
    # Job name -> "module:factory"; factory(family, name) is the job's `main`. A job with a
    # file of its own (jobs/<name>.py) is that file; the others are built from the factory.
    jobs: Mapping[str, str] = field(default_factory=dict)
    search: tuple[Search, ...] = ()  # its champions served for search, if any
    # The pipeline job's step that trains it on the features and registers it by the champion
    # rule (its config section has the step's name); None: not a generic step of the pipeline.
    pipeline_step: str | None = None

    def resolve_recipe(self) -> Any:
        return resolve(self.recipe)

    @property
    def kind(self) -> str:
        """The kind its saved models are, as their Saved class declares it."""
        return resolve(self.saved).kind

    @property
    def hears_speech(self) -> bool:
        """Whether its models have a speech tower (a search on spoken queries): only then do
        its jobs take clips (--speech)."""
        return any(search.modality == "speech" for search in self.search)


def resolve(ref: str) -> Any:
    """The object a "module:attribute" string names."""
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


def _jobs(*own: str, **reused: str) -> dict[str, str]:
    """Job name -> "conceptual.jobs.<module>:job": a job's own file, or (`reused`, job=module)
    another family's job, run for this family."""
    modules = {job: job for job in own} | reused
    return {job: f"conceptual.jobs.{module}:job" for job, module in modules.items()}


FAMILIES: dict[str, Family] = {
    family.name: family
    for family in (
        Family(
            name="captioner",
            saved="conceptual.models.saving:SavedCaptioner",
            recipe="conceptual.pipelines.families.captioner.train_captioner:RECIPE",
            config_file="train_captioner.yaml",
            registers="captioner, captioner-zh for language=zh",
            example="model.architecture=rnn epochs=20",
            jobs=_jobs("train_captioner", "evaluate_captioner", "compare_captioners"),
        ),
        Family(
            name="retriever",
            saved="conceptual.models.saving:SavedRetriever",
            recipe="conceptual.pipelines.families.retriever.train_retriever:RECIPE",
            config_file="train_retriever.yaml",
            registers="retriever-<modality>",
            example="modality=text loss=triplet epochs=4",
            jobs=_jobs("train_retriever", "evaluate_retriever", "compare_retrievers"),
            search=(
                Search("text", "TextRetriever", "retriever-text"),
                Search("speech", "SpeechRetriever", "retriever-speech", modality="speech"),
            ),
            pipeline_step="train_retriever",
        ),
        Family(
            name="fluency",
            saved="conceptual.fluency.saved:SavedFluency",
            recipe="conceptual.pipelines.families.fluency.train_fluency:RECIPE",
            config_file="train_fluency.yaml",
            registers="fluency-zh",
            example="epochs=4 threshold=0.45",
            jobs=_jobs("train_fluency", "compare_fluency"),
        ),
        Family(
            name="contrastive",
            # a dual encoder: saved, evaluated, indexed and served as one
            saved="conceptual.models.saving:SavedRetriever",
            recipe="conceptual.pipelines.families.contrastive.train_contrastive:RECIPE",
            config_file="train_contrastive.yaml",
            registers="contrastive",
            example="batch_size=128 epochs=10 model.embed_dim=256",
            jobs=_jobs(
                train_contrastive="train_retriever",
                evaluate_contrastive="evaluate_retriever",
                compare_contrastive="compare_retrievers",
            ),
            search=(Search("contrastive", "ContrastiveRetriever", "contrastive"),),
            pipeline_step="train_contrastive",
        ),
    )
}


def saved_kinds() -> dict[str, Any]:
    """Saved kind -> the Saved class that loads it (one per kind: families may share one)."""
    return {family.kind: resolve(family.saved) for family in FAMILIES.values()}


def job_factories() -> dict[str, tuple[Family, str]]:
    """Every family job's name -> (its family, "module:factory")."""
    return {job: (f, ref) for f in FAMILIES.values() for job, ref in f.jobs.items()}
