"""Every model family the platform trains, declared once in the family table FAMILIES (as
torchtune's recipe registry: one explicit list drives the command line and the configs;
"registry" alone is MLflow's model registry, conceptual.registry).

A family is its recipe (pipelines/training/training.py's Recipe: config, data, training
loop, the metric that picks the champion), the saved form its models take, its config file,
its jobs and how it is served. What used to be listed family by family is read from here
and from the two tables beside it in the outer layers, each importing its code directly:

- `saving.load` loads every `kind` (models/saving.py's KINDS, the Saved class that reads it);
- each family's recipe: conceptual.pipelines.families.recipes (RECIPES, by family name);
- each family's jobs: conceptual.jobs.family_jobs (and `train|evaluate|compare --family NAME`);
- tests/unit/house/test_configs.py checks each family's `config_file` against its recipe's config;
- the serving app runs the `captioning` entries' captioners (ServeConfig.captioners, chosen
  per request with `?captioner=` or `?language=`: conceptual/serve/captioner_deployment.py)
  and the `search` entries' retrievers (ServeConfig.retrievers, chosen with `?retriever=`:
  conceptual/serve/retriever_deployment.py); `captionings()` and `searches()` list them.

This table names no code: every job's command line reads it before torch or Ray load.
A new family is a model (or a variant of one), a recipe, a config file and an entry here,
in RECIPES and in family_jobs: docs/architecture.md counts the files the contrastive family
took.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Serving:
    """A family's models served by one deployment of the serving app: its key (what the
    ServeConfig lists to run it, and the routes' query parameter names), the deployment's
    name, and the registered model whose champion it follows."""

    key: str  # "text", "zh"
    deployment: str  # "TextRetriever", "CaptionerZh"
    model_name: str  # "retriever-text", "captioner-zh": its champion is served


@dataclass(frozen=True)
class Captioning(Serving):
    """Served for captioning (serve/captioner_deployment.py): ServeConfig.captioners lists
    the key, `/v1/captions?captioner=<key>` asks for it."""

    # The language its models write (a saved config writing another is not served), which
    # `?language=` asks for: the first captioner served that writes it answers.
    language: Literal["en", "zh"] = "en"


@dataclass(frozen=True)
class Search(Serving):
    """Served for search (serve/retriever_deployment.py): ServeConfig.retrievers lists the
    key, `/v1/search/images?retriever=<key>` asks for it."""

    # Its models' query tower (RetrieverConfig.modality), which the ingress must know before
    # a model is loaded: text queries (and images, for captions) or spoken ones.
    modality: Literal["text", "speech"] = "text"


@dataclass(frozen=True)
class Family:
    name: str  # "captioner": the family's word in docs and messages
    kind: str  # what its models are saved as: a key of models/saving.py's KINDS
    config_file: str  # configs/<config_file>: every key of the recipe's config, its default
    registers: str  # the registered model(s) its versions join, as its jobs' help says
    example: str  # a few of its config's overrides, as its training job's help shows them
    captioning: tuple[Captioning, ...] = ()  # its champions served for captioning, if any
    search: tuple[Search, ...] = ()  # its champions served for search, if any
    # The pipeline job's step that trains it on the features and registers it by the champion
    # rule (its config section has the step's name); None: not a generic step of the pipeline.
    pipeline_step: str | None = None

    @property
    def hears_speech(self) -> bool:
        """Whether its models have a speech tower (a search on spoken queries): only then do
        its jobs take clips (--speech)."""
        return any(search.modality == "speech" for search in self.search)


FAMILIES: dict[str, Family] = {
    family.name: family
    for family in (
        Family(
            name="captioner",
            kind="captioner",
            config_file="train_captioner.yaml",
            registers="captioner, captioner-zh for language=zh",
            example="model.architecture=rnn epochs=20",
            captioning=(
                Captioning("en", "Captioner", "captioner"),
                Captioning("zh", "CaptionerZh", "captioner-zh", language="zh"),
            ),
        ),
        Family(
            name="retriever",
            kind="retriever",
            config_file="train_retriever.yaml",
            registers="retriever-<modality>",
            example="modality=text loss=triplet epochs=4",
            search=(
                Search("text", "TextRetriever", "retriever-text"),
                Search("speech", "SpeechRetriever", "retriever-speech", modality="speech"),
            ),
            pipeline_step="train_retriever",
        ),
        Family(
            name="fluency",
            kind="fluency",
            config_file="train_fluency.yaml",
            registers="fluency-zh",
            example="epochs=4 threshold=0.45",
        ),
        Family(
            name="contrastive",
            kind="retriever",  # a dual encoder: saved, evaluated, indexed and served as one
            config_file="train_contrastive.yaml",
            registers="contrastive",
            example="batch_size=128 epochs=10 model.embed_dim=256",
            search=(Search("contrastive", "ContrastiveRetriever", "contrastive"),),
            pipeline_step="train_contrastive",
        ),
    )
}


def captionings() -> dict[str, Captioning]:
    """Every captioning key the table declares, with its entry: the captioners a service may
    run. Read when asked: a family added is served."""
    return {c.key: c for family in FAMILIES.values() for c in family.captioning}


def searches() -> dict[str, Search]:
    """Every search key the table declares, with its entry: the retrievers a service may
    run. Read when asked: a family added is served."""
    return {s.key: s for family in FAMILIES.values() for s in family.search}
