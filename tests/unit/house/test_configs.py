"""The shipped config files list every key of their config, and exactly its defaults, once
their `extends` are resolved: a key added to a config without its file (or left in the file
after leaving the config) fails."""

import importlib

import pytest
import yaml

from conceptual.config import EXTENDS, flatten, load, read_config
from conceptual.pipelines.families import FAMILIES

# Each shipped file and the config it lists, as "module:Class" (imported in the test, so that
# one config's import error fails only its file's test): the families' from the registry,
# their recipes' configs.
CONFIG_FILES = {
    "ablate.yaml": "conceptual.pipelines.curation.ablation:AblateConfig",
    "build_index.yaml": "conceptual.pipelines.retrieval.build_index:BuildIndexConfig",
    "harvest.yaml": "conceptual.pipelines.curation.harvest:HarvestConfig",
    "curation.yaml": "conceptual.pipelines.curation.curation_config:CurationConfig",
    "features.yaml": "conceptual.pipelines.features.features:FeaturesConfig",
    "import_conceptual.yaml": "conceptual.pipelines.curation.curation_config:ImportConceptualConfig",
    "pipeline.yaml": "conceptual.pipelines.pipeline:PipelineConfig",
    "publish_dataset.yaml": "conceptual.publishing:PublishConfig",
    "speech.yaml": "conceptual.pipelines.features.speech:SpeechConfig",
    "translate.yaml": "conceptual.pipelines.features.translate:TranslateConfig",
    "recaption.yaml": "conceptual.pipelines.curation.recaption:RecaptionConfig",
    **{family.config_file: family.recipe() for family in FAMILIES.values()},
}


def config_class(name: str) -> type:
    """The config class a shipped file lists (a family's recipe names its config)."""
    found = CONFIG_FILES[name]
    if isinstance(found, str):
        module, _, attr = found.partition(":")
        found = getattr(importlib.import_module(module), attr)
    return getattr(found, "config", found)


def leaf_keys(tree: dict, prefix: str = "") -> set[str]:
    keys = set()
    for key, value in tree.items():
        dotted = f"{prefix}{key}"
        keys |= leaf_keys(value, f"{dotted}.") if isinstance(value, dict) else {dotted}
    return keys


def test_every_config_file_is_checked(repo):
    assert {path.name for path in (repo / "configs").glob("*.yaml")} == set(CONFIG_FILES)


@pytest.mark.parametrize("name", sorted(CONFIG_FILES))
def test_config_file_lists_every_key_with_its_default(repo, name):
    cls = config_class(name)
    path = repo / "configs" / name
    assert leaf_keys(read_config(path)) == set(flatten(cls()))
    assert load(cls, path) == cls()


def test_no_shipped_file_repeats_the_file_it_extends(repo):
    """A file that extends another states only what differs: a key it sets to the value the
    extended file gives is a copy, kept in sync by nothing."""
    for path in (repo / "configs").glob("*.yaml"):
        raw = yaml.safe_load(path.read_text())
        sections = [(raw, "")] + [(v, f"{k}.") for k, v in raw.items() if isinstance(v, dict)]
        for node, prefix in sections:
            if EXTENDS in node:
                base = read_config(path.parent / node[EXTENDS])
                own = {k: v for k, v in node.items() if k != EXTENDS}
                copies = [f"{prefix}{k}" for k in leaf_keys(own) if leaf(base, k) == leaf(own, k)]
                assert not copies, f"{path.name} repeats {node[EXTENDS]}: {copies}"


def leaf(tree: dict, dotted: str):
    for part in dotted.split("."):
        tree = tree.get(part, {}) if isinstance(tree, dict) else {}
    return tree


def test_the_crawl_examples_curate_alike(repo):
    """The README's crawl path: `curate --config examples/curation_crawl.yaml` keeps what the
    pipeline's curate stage keeps with examples/pipeline_crawl.yaml, and both let a server
    on this machine be fetched at any port (a crawl kept 0, refused_port, without it)."""
    from conceptual.pipelines.curation.curation_config import CurationConfig
    from conceptual.pipelines.pipeline import PipelineConfig

    curation = load(CurationConfig, repo / "examples" / "curation_crawl.yaml")
    # The pipeline example's curate section extends the curation example.
    assert load(PipelineConfig, repo / "examples" / "pipeline_crawl.yaml").curate == curation
    assert "127.0.0.1" in curation.fetch.allow_hosts
    assert curation.entity_frequency.more_than < CurationConfig().entity_frequency.more_than
