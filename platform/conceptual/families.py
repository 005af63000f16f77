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
- tests/unit/test_configs.py checks each family's `config_file` against its recipe's config;
- the serving app runs the `search` entries' retrievers (ServeConfig.retrievers, chosen per
  request with `?retriever=`: conceptual/serve/retriever_deployment.py, routes.py).

This table names no code: every job's command line reads it before torch or Ray load.
A new family is a model (or a variant of one), a recipe, a config file and an entry here,
in RECIPES and in family_jobs: docs/architecture.md counts the files the contrastive family
took.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


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
    kind: str  # what its models are saved as: a key of models/saving.py's KINDS
    config_file: str  # configs/<config_file>: every key of the recipe's config, its default
    registers: str  # the registered model(s) its versions join, as its jobs' help says
    example: str  # a few of its config's overrides, as its training job's help shows them
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
