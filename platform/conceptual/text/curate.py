"""Text curation of a batch of alt-texts, engine-agnostic: the Ray pipeline's NLP actor and
the `hypernymize` command both call `TextCurator.process`, so they cannot disagree.

Stages, in order (each candidate stops at the first that rejects it):
- `text`: cheap filters on the cleaned alt-text (conceptual.text.filters), no parse;
- `syntax`: filters that need POS tags (no determiner / noun / preposition, noun ratio);
- `hypernymize`: the text transformation (conceptual.text.hypernymize), which may reject
  what it leaves too short or inconsistent.
Each text is parsed by spaCy once (Hypernymizer.parse, which restores capitals in caseless
text first); the syntax filters and the transformation share the Doc, and a text the syntax
filters reject is spared the parse's second pass (lemmas and entities).

The `text` stage's out_of_vocabulary filter judges capitalized words (after the first)
last, on the caption: a rare name that hypernymization removed or replaced rejects nothing
("A Kenyan farmer harvests tea near Kericho, Kenya"), one it left in the caption does
(stage `text`, as if rejected there).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from conceptual.config import Config
from conceptual.errors import failing_as
from conceptual.records import Rejection
from conceptual.text.bounds import BOUND_REASONS, TEXT_STAGE
from conceptual.text.filters import CHEAP_FILTERS, DOC_FILTERS, TextFilterConfig, TextFilters
from conceptual.text.hypernymize import HypernymConfig, Hypernymizer

# The stages, and the reasons each rejects with (the hypernymize package's are in its doc).
SYNTAX_STAGE, HYPERNYMIZE_STAGE = "syntax", "hypernymize"  # after TEXT_STAGE (text/bounds.py)
TEXT_REASONS = (*BOUND_REASONS, *CHEAP_FILTERS)
SYNTAX_REASONS = DOC_FILTERS
HYPERNYMIZE_REASONS = ("unresolved_entity", "too_short", "no_noun_left")


class TextCurationConfig(Config):
    filters: TextFilterConfig = TextFilterConfig()
    hypernym: HypernymConfig = HypernymConfig()
    # What a kept record's caption is: the hypernymized text (the paper's dataset), or the
    # cleaned alt-text in the same style, not hypernymized (`alt_text`: the paper's Figure 3
    # trains on both). Every rule runs either way, so both keep the same records.
    caption: Literal["hypernymized", "alt_text"] = "hypernymized"


@dataclass
class Outcome:
    """What became of one alt-text: a caption, or the stage and the Rejection that dropped it."""

    text: str  # the cleaned alt-text that the later stages saw
    caption: str | None = None
    entities: list[dict] = field(default_factory=list)
    types: list[str] = field(default_factory=list)
    stage: str | None = None
    rejection: Rejection | None = None

    @property
    def kept(self) -> bool:
        return self.rejection is None

    def reject(self, stage: str, rejection: Rejection) -> None:
        self.stage, self.rejection = stage, rejection


class TextCurator:
    """Loads the filters, spaCy and WordNet once; then processes batches."""

    def __init__(self, config: TextCurationConfig | None = None):
        self.config = config or TextCurationConfig()
        self.filters = TextFilters(self.config.filters)
        self.hypernymizer = Hypernymizer(self.config.hypernym)

    def process(self, texts: Sequence[str | None], apply_filters: bool = True) -> list[Outcome]:
        # The strings spaCy meets in a batch go with it: over millions of texts (an NLP actor's
        # life) its vocabulary would otherwise grow, and the actor's memory with it. No doc
        # outlives the call; the outcomes hold plain strings.
        with self.hypernymizer.nlp.memory_zone():
            return self._process(texts, apply_filters)

    def _process(self, texts: Sequence[str | None], apply_filters: bool) -> list[Outcome]:
        outcomes: list[Outcome | None] = [None] * len(texts)
        to_parse: list[int] = []
        for i, raw in enumerate(texts):
            if apply_filters:
                with failing_as(TEXT_STAGE):
                    cleaned, rejection = self.filters.check(raw, names_later=True)
                if rejection:
                    outcomes[i] = Outcome(cleaned, stage=TEXT_STAGE, rejection=rejection)
                    continue
            else:
                cleaned = " ".join((raw or "").split())
            outcomes[i] = Outcome(cleaned)
            to_parse.append(i)

        # a caption the syntax filters reject is not read for names (Hypernymizer.parse)
        keep = (lambda doc: self.filters.check_doc(doc) is None) if apply_filters else None
        with failing_as(SYNTAX_STAGE):
            docs = self.hypernymizer.parse([outcomes[i].text for i in to_parse], keep)
        for i, doc in zip(to_parse, docs):
            outcome = outcomes[i]
            with failing_as(SYNTAX_STAGE):
                rejection = self.filters.check_doc(doc) if apply_filters else None
            if rejection:
                outcome.reject(SYNTAX_STAGE, rejection)
                continue
            with failing_as(HYPERNYMIZE_STAGE):
                result = self.hypernymizer.transform_doc(doc)
            outcome.entities, outcome.types = result.entities, result.types
            if result.rejection:
                outcome.reject(HYPERNYMIZE_STAGE, result.rejection)
            elif apply_filters and (rare := self._rare_names_left(outcome.text, result.caption)):
                detail = f"not in the English vocabulary: {', '.join(sorted(rare)[:5])}"
                outcome.reject(TEXT_STAGE, Rejection("out_of_vocabulary", detail))
            elif self.config.caption == "alt_text":
                outcome.caption = self.hypernymizer.styled(doc)
            else:
                outcome.caption = result.caption
        return outcomes  # type: ignore[return-value]

    def _rare_names_left(self, text: str, caption: str) -> set[str]:
        """The rare capitalized words of the text still in its caption."""
        if "out_of_vocabulary" not in self.filters.names:
            return set()
        return self.filters.rare_names(text) & set(caption.split())
