"""The shipped config files load, and show exactly the defaults they claim to."""

from conceptual.config import load
from conceptual.pipelines.curation import CurationConfig


def test_curation_yaml_lists_the_defaults(repo):
    path = repo / "configs" / "curation.yaml"
    assert load(CurationConfig, path) == CurationConfig()


def test_features_yaml_lists_the_defaults(repo):
    from conceptual.pipelines.features import FeaturesConfig

    assert load(FeaturesConfig, repo / "configs" / "features.yaml") == FeaturesConfig()
