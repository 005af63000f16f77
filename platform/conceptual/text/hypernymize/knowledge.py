"""What the rules know besides the parse (`Knowledge`): WordNet and word frequencies (the
`Lexicon`), spaCy's stop words, the config, and what the steps of the two offline sources
load (sources.py: `census_names`, `gazetteer`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from conceptual.text.hypernymize.lexicon import Lexicon
from conceptual.text.hypernymize.tokens import CASE_RESTORED

if TYPE_CHECKING:
    from conceptual.text.hypernymize.config import HypernymConfig
    from conceptual.text.hypernymize.sources import Gazetteer, PersonNames


class Knowledge:
    """The lookups the rules share, loaded once (a Hypernymizer makes one). `people` and
    `gazetteer` stay None unless the steps of their rules load them."""

    def __init__(self, config: HypernymConfig, wn, stop_words: frozenset):
        self.config = config
        self.wn = wn
        self.lexicon = Lexicon(wn, config)
        self.stop_words = stop_words
        self.people: PersonNames | None = None
        self.gazetteer: Gazetteer | None = None

    def place_kind(self, name: str) -> str | None:
        """The gazetteer's kind of a place name ("country", "state", "city"), None for
        names it lacks and for common words that name towns too ("bath", "reading")."""
        if self.gazetteer is None or not (kind := self.gazetteer.kind(name)):
            return None
        common = self.lexicon.word_kind(name.lower().replace(" ", "_"))[0] == "common"
        return None if common else kind

    def is_full_name(self, first: str, last: str) -> bool:
        """A given name then a surname ("eva green", "drew barrymore"): both in the census
        lists, or a word restore_case takes for a name after the given name; not two
        common words ("will power"), nor a place that ends in a surname ("victoria
        station": a place noun's first sense) or a place name."""
        if self.people is None or first not in self.people.given:
            return False
        if first in self.stop_words or last in self.stop_words:
            return False
        last_kind = self.lexicon.word_kind(last)[0]
        if last not in self.people.surnames and last_kind not in ("name", "unknown"):
            return False
        if self.lexicon.place_senses(last)[:1] == (True,) or self.lexicon.instance(last):
            return False  # a place noun or a place WordNet knows ("bari italy")
        return not (last_kind == "common" and self.lexicon.word_kind(first)[0] == "common")

    def census_label(self, span, label: str) -> str | None:
        """PERSON or GPE where the name's words say so better than the small model:
        a given name, at most one middle name and a surname (`is_full_name`: "Eva Green"
        tagged ORG), or a lone given name WordNet and the gazetteer lack ("Tasha" tagged
        ORG); a run of places ending in a country or state ("Bari Italy" tagged ORG)."""
        words = [token.lower_ for token in span]
        if not all(map(str.isalpha, words)):
            return None
        if 2 <= len(words) <= 3 and self.is_full_name(words[0], words[-1]):
            return "PERSON"
        given = self.people.given if self.people else frozenset()
        if len(words) == 1 and label in ("ORG", "PROPN") and words[0] in given:
            if self.lexicon.word_kind(words[0])[0] == "unknown" and not self.place_kind(words[0]):
                return "PERSON"
        places = [self.place_kind(word) or self.lexicon.instance(word) for word in words]
        if len(words) >= 2 and all(places) and places[-1] in ("country", "state"):
            return "GPE"
        return None

    def is_guessed_person(self, span, label: str) -> bool:
        """Whether a PERSON label is only the small model's guess: in caseless text, for a
        name the census lists do not know as a person's (`location_phrases` and `titles` may then read it as
        a place)."""
        if label != "PERSON" or not span.doc.user_data.get(CASE_RESTORED):
            return False
        return self.census_label(span, label) != "PERSON"

    def is_common(self, token) -> bool:
        """Whether WordNet spells the word in lowercase in some sense."""
        return self.lexicon.word_kind(token.lower_)[0] == "common"

    def is_title_word(self, token) -> bool:
        """A common word that mostly means a kind of person ("musician", "chancellor"; not
        "tom", mostly a male cat or turkey in lowercase)."""
        return (
            self.is_common(token)
            and token.is_alpha
            and self.lexicon.is_person_noun(self.lemma(token))
        )

    def is_noun_only(self, word: str) -> bool:
        """Whether a word can only be a noun: not a function word, and WordNet knows it
        as a noun and nothing else ("loafers", not "walks")."""
        return word not in self.stop_words and self.lexicon.is_only_noun(word)

    def is_participle(self, token) -> bool:
        """An "-ing" form of a verb, which the small model may read as a noun after a name
        ("a Lufthansa 747 landing at Frankfurt"); not a noun in "-ing" ("wing")."""
        word = token.lower_
        return word.endswith("ing") and self.wn.morphy(word, "v") not in (None, word)

    def is_plural(self, noun) -> bool:
        """Tagged plural, or inflected by WordNet's reckoning (a capitalized "Actors" is
        tagged as a singular proper noun)."""
        base = self.wn.morphy(noun.lower_, "n")
        return noun.tag_ in ("NNS", "NNPS") or base not in (None, noun.lower_)

    def lemma(self, token) -> str:
        """A noun's lemma; WordNet's for words tagged as proper nouns, which spaCy leaves
        inflected ("Awards")."""
        if token.pos_ == "PROPN":
            return self.wn.morphy(token.lower_, "n") or token.lower_
        return token.lemma_.lower()
