"""The hypernymizer's settings (`text.hypernym` in the curation configs)."""

from __future__ import annotations

from pydantic import field_validator

from conceptual.config import Config
from conceptual.text.hypernymize.hooks import RULE_NAMES


class HypernymConfig(Config):
    """Thresholds and switches of the rules (the package doc lists them)."""

    min_tokens: int = 3  # reject captions left with fewer words ("too_short")
    max_wordnet_depth: int = 3  # hypernym levels searched for a short common head
    min_head_zipf: float = 3.0  # a head word is at least this frequent (wordfreq zipf)
    restore_case: bool = True  # capitalize likely names in caseless texts before parsing
    name_max_zipf: float = 4.0  # restore_case: an unknown word rarer than this is a name
    reject_unresolved: bool = False  # reject names neither spaCy nor WordNet could type
    spacy_pipeline: str | None = None  # None: assets.load_spacy's default pipeline
    wordnet_path: str | None = None  # a WordNet 3.0 directory; None: assets.wordnet's search
    batch_size: int = 256  # texts per nlp.pipe batch
    disabled_rules: list[str] = []  # rules of hooks.RULES to switch off, e.g. [gazetteer]

    @field_validator("disabled_rules")
    @classmethod
    def _known_rules(cls, names: list[str]) -> list[str]:
        if wrong := [name for name in names if name not in RULE_NAMES]:
            raise ValueError(f"cannot disable {wrong}: the rules that can be are {RULE_NAMES}")
        return names
