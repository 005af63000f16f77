"""What a model family is: a `Family`, the object the generic code calls (as torchtune's
recipe registry: one explicit list, conceptual.pipelines.families' FAMILIES, drives the
command line, the configs, the pipeline job and serving; "registry" alone is MLflow's model
registry, conceptual.registry).

A family's folder (pipelines/families/<name>/, its `folder`) holds its code; the module named
as its train job (captioner/train_captioner.py) holds its RECIPE. The table's entry names
the folder and what the command line, the configs and serving need to know before torch or
Ray load; the methods import the code only when called:

- `train(config, *data)` and `publish(result, config)`: a model trained and registered by
  the champion rule, with its `recipe()` (pipelines/training/training.py's Recipe: config,
  saved form, data, the training loop, the metric that picks the champion), for
  `train --family NAME`, the pipeline job's family steps and the ablation;
- `evaluate(model, features, config, *data)`: a model scored on a held-out split, the run
  tagged as its evaluate job (the evaluate module of the family it runs as);
- `saved()`: the form its models are saved in (a Saved class, which names its `kind` once);
  `load(directory)` reads one;
- `jobs`: its train, evaluate and compare jobs by verb, run with the command lines of the
  family it runs as (`runs_as`; conceptual.jobs' `factories`, by family and verb). A
  comparison's arguments are its family's own (captioner variants, retriever variants with
  held-out clips, fluency approaches), so compare stays its job's, not one signature;
- `captioning` and `search`: the deployments that serve its champions
  (conceptual/serve/captioner_deployment.py and retriever_deployment.py);
- `pipeline_step`: the pipeline job's step that trains it, when it has one.

docs/architecture.md counts what the last family added took.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import torch

    from conceptual.models.saving import Saved
    from conceptual.pipelines.training.training import Recipe

VERBS = ("train", "evaluate", "compare")


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
    """A model family: its folder, and what the jobs, configs and serving read of it."""

    folder: ModuleType  # its package: pipelines/families/<name>/
    # Its jobs' names, each <verb>_...: train_captioner, evaluate_captioner, compare_captioners.
    job_names: tuple[str, ...]
    registers: str  # the registered model(s) its versions join, as its jobs' help says
    example: str  # a few of its config's overrides, as its training job's help shows them
    # The family whose code and jobs' command lines (conceptual.jobs' factories) it reuses:
    # the contrastive family the retriever's, attend the captioner's. None: its own.
    runs_as: Family | None = None
    captioning: tuple[Captioning, ...] = ()  # its champions served for captioning, if any
    search: tuple[Search, ...] = ()  # its champions served for search, if any
    # The pipeline job's step that trains it on the features and registers it by the champion
    # rule (its config section has the step's name); None: not a generic step of the pipeline.
    pipeline_step: str | None = None

    def __post_init__(self) -> None:
        unknown = set(self.jobs) - set(VERBS)
        if unknown or "train" not in self.jobs or len(self.jobs) < len(self.job_names):
            raise ValueError(f"{self.name}: one job per verb, a train job first: {VERBS}")

    @property
    def name(self) -> str:
        """Its folder's name ("captioner"): the family's word in docs, messages and
        `--family NAME`."""
        return self.folder.__name__.rpartition(".")[2]

    @property
    def jobs(self) -> Mapping[str, str]:
        """Verb (train, evaluate, compare) -> its job's name."""
        return {job.partition("_")[0]: job for job in self.job_names}

    @property
    def config_file(self) -> str:
        """configs/<config_file>, named as its train job: every key of the recipe's config,
        with its default."""
        return f"{self.jobs['train']}.yaml"

    def recipe(self) -> Recipe:
        """What trains it: the RECIPE of its folder's module named as its train job."""
        return importlib.import_module(f"{self.folder.__name__}.{self.jobs['train']}").RECIPE

    def train(self, config: Any, *data: Any) -> dict[str, Any]:
        """One model trained on `data` under `config` (its recipe's config class): the
        result of training.train (the run, the best epoch's dev metrics, the model's folder)."""
        from conceptual.pipelines.training import training

        return training.train(self.recipe(), config, *data)

    def publish(
        self, result: dict[str, Any], config: Any, model_name: str | None = None
    ) -> dict[str, Any] | None:
        """The model `train` returned registered (as `model_name`, by default its recipe's),
        the champion alias moved by the champion rule: its decision (training.publish)."""
        from conceptual.pipelines.training import training

        return training.publish(self.recipe(), result, config, model_name)

    def evaluate(
        self, model_uri: str, features_uri: str, config: Any, *data: Any
    ) -> dict[str, Any]:
        """A model of this family (read as its saved form) scored on `config.split` of the
        features, the run tagged as its evaluate job: the evaluate module of the family it
        runs as (captioner/evaluate_captioner.py's `evaluate`; `data`: what that one takes
        besides). ValueError: the family has no evaluate job, or the model is another kind."""
        if "evaluate" not in self.jobs:
            raise ValueError(f"the {self.name} family has no evaluate job")
        code = self.runs_as or self
        module = importlib.import_module(f"{code.folder.__name__}.{code.jobs['evaluate']}")
        job = self.jobs["evaluate"]
        return module.evaluate(model_uri, features_uri, config, *data, kind=self.saved(), job=job)

    def saved(self) -> type[Saved]:
        """The Saved class its models are read as."""
        return self.recipe().saved

    def load(self, directory: str | Path, device: str | torch.device = "cpu") -> Saved:
        """One of its saved models (ValueError: the directory holds another kind)."""
        from conceptual.models.saving import load

        return load(directory, device, kind=self.saved())

    @property
    def command_lines(self) -> str:
        """The name of the family whose jobs' command lines its jobs run with."""
        return (self.runs_as or self).name

    @property
    def hears_speech(self) -> bool:
        """Whether its models have a speech tower (a search on spoken queries): only then do
        its jobs take clips (--speech)."""
        return any(search.modality == "speech" for search in self.search)
