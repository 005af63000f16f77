"""The WordNet and word-frequency lookups the rules make (`Lexicon`), each cached."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from conceptual.text.hypernymize.tokens import PLACE_LABELS

if TYPE_CHECKING:
    from conceptual.text.hypernymize.config import HypernymConfig

# spaCy label of a name WordNet knows, by the first of these classes among its hypernyms.
LABEL_ROOTS = (
    ("PERSON", "person.n.01"),
    ("GPE", "location.n.01"),  # cities, countries, regions, districts, villages
    ("FAC", "artifact.n.01"),  # towers, castles, streets, hotels
    ("LOC", "body_of_water.n.01"),  # rivers, seas, lakes
    ("LOC", "object.n.01"),  # mountains, islands, beaches: the other natural objects
    ("ORG", "group.n.01"),  # organizations, bands, teams
)
# Classes of the common nouns that name places ("beach", "mall", "airport", "studio").
PLACE_NOUN_ROOTS = (
    "location.n.01",
    "structure.n.01",
    "facility.n.01",
    "geological_formation.n.01",
    "body_of_water.n.01",
)
# Suffixes that derive words from words of a part of speech ("colorful" -> "colorfully").
DERIVATIONAL_SUFFIXES = (
    ("ly", "a"),  # adverbs of adjectives
    ("er", "v"),  # agents of verbs
    ("ers", "v"),
    ("ed", "v"),  # inflections WordNet's morphy misses ("gutted")
    ("ing", "v"),
    ("ness", "a"),
    ("less", "n"),
    ("ful", "n"),
)
# Irregular plurals WordNet's noun.exc lacks (it lists inflections, not suppletion).
SUPPLETIVE_PLURALS = {"person": "people"}


class Lexicon:
    """The WordNet and word-frequency lookups the rules make, each cached: a corpus repeats
    its words, and WordNet walks are the slow part after parsing."""

    def __init__(self, wn, config: HypernymConfig):
        from wordfreq import zipf_frequency

        self.wn = wn
        self.max_depth = config.max_wordnet_depth
        self.min_zipf = config.min_head_zipf
        with wn.open("noun.exc") as lines:  # "plural base" lines: irregular inflections
            self.irregular_plurals = {base: plural for plural, base, *_ in map(str.split, lines)}
        self.irregular_plurals.update(SUPPLETIVE_PLURALS)
        cache = functools.lru_cache(maxsize=None)
        event = wn.synset("event.n.01")
        self.zipf = cache(lambda word: zipf_frequency(word, "en"))
        self.word_kind = cache(self._word_kind)
        self.instance = cache(self._instance)
        self.label_of = cache(self._label_of)
        self.head_name = cache(self._head_name)
        self.noun_labels = cache(
            lambda lemma: frozenset(self.label_of((s,)) for s in wn.synsets(lemma, "n"))
        )
        self.plural = cache(self._plural)
        self.is_noun = cache(lambda word: bool(wn.synsets(word, "n")))
        self.is_person_noun = cache(self._is_person_noun)
        self.common_role = cache(self._common_role)
        self.is_only_noun = cache(
            lambda word: word.isalpha() and {s.pos() for s in wn.synsets(word)} == {"n"}
        )
        self.is_event = cache(  # one of its two most frequent senses is an event
            lambda lemma: any(
                event in s.closure(lambda s: s.hypernyms()) for s in wn.synsets(lemma, "n")[:2]
            )
        )
        animal = wn.synset("animal.n.01")
        self.is_animal = cache(  # its most frequent sense is an animal ("cat", "puppy")
            lambda lemma: any(
                animal in s.closure(lambda s: s.hypernyms()) for s in wn.synsets(lemma, "n")[:1]
            )
        )
        places = frozenset(wn.synset(name) for name in PLACE_NOUN_ROOTS)
        self.place_senses = cache(  # whether each of its two most frequent senses is a place
            lambda lemma: tuple(
                bool(places.intersection(s.closure(lambda s: s.hypernyms())))
                for s in wn.synsets(lemma, "n")[:2]
            )
        )
        self.is_unit = cache(  # its most frequent sense is a unit of measure
            lambda lemma: [s.lexname() for s in wn.synsets(lemma, "n")][:1] == ["noun.quantity"]
        )

    def _word_kind(self, word: str) -> tuple[str, str]:
        """How WordNet knows a lowercase word or underscored phrase, and how it spells it:
        "common" when spelled in lowercase in some sense ("father", "einstein" = genius),
        "name" when only capitalized and a named instance ("london" -> "London"),
        "capitalized" when only capitalized but a class ("christmas", "italian"),
        "unknown" when WordNet does not have it. A word WordNet lacks but derives from a
        common one by a suffix is common too ("colorfully", "biker")."""
        forms = {word} | {self.wn.morphy(word, pos) for pos in "nvar"}
        senses = [
            (name, synset)
            for synset in self.wn.synsets(word)
            for name in synset.lemma_names()
            if name.lower() in forms
        ]
        if not senses:
            return ("common" if self._is_derived(word) else "unknown"), word
        if any(name == name.lower() for name, _ in senses):
            return "common", word
        spelling = next((name for name, _ in senses if name.lower() == word), word.capitalize())
        named = any(synset.instance_hypernyms() for _, synset in senses)
        return ("name" if named else "capitalized"), spelling

    def _is_person_noun(self, lemma: str) -> bool:
        """Whether the most frequent noun sense spelled in lowercase is a person: "actor",
        "chancellor"; not "tom" (a male cat or turkey; "Tom" is a name)."""
        senses = [s for s in self.wn.synsets(lemma, "n") if lemma in s.lemma_names()]
        return bool(senses) and self.label_of(tuple(senses[:1])) == "PERSON"

    def _common_role(self, lemma: str) -> str | None:
        """The role a female form derives from, by WordNet's hypernym of the same stem:
        "actress" -> "actor", "waitress" -> "waiter", "empress" -> "emperor"; None for
        others ("princess" is an aristocrat, "singer" is a role already)."""
        senses = self.wn.synsets(lemma, "n")[:1]
        for hypernym in senses[0].hypernyms() if senses and lemma.endswith("ess") else ():
            role = hypernym.lemma_names()[0]
            if role[:3] == lemma[:3] and role != lemma:
                return role
        return None

    def _is_derived(self, word: str) -> bool:
        """Whether a word derives by a suffix from a common word of the right part of
        speech ("colorfully" from the adjective "colorful", "biker" from the verb "bike",
        "gutted" from the verb "gut": WordNet's morphy does not undouble consonants)."""
        for suffix, pos in DERIVATIONAL_SUFFIXES:
            if not word.endswith(suffix):
                continue
            stem = word[: -len(suffix)]
            bases = [stem, stem + "e"]
            if len(stem) > 1 and stem[-1] == stem[-2]:
                bases.append(stem[:-1])
            for base in bases:
                senses = self.wn.synsets(base, pos) if len(base) >= 3 else []
                if any(base in synset.lemma_names() for synset in senses):
                    return True
        return False

    def _instance(self, key: str) -> tuple[str, str] | None:
        """(label, head) when the most frequent noun sense of `key` is a named instance:
        "paris" -> ("GPE", "city"), "albert_einstein" -> ("PERSON", "physicist"). Only a
        place or organization is known by one word: a lone word naming a person (or god) is
        mostly a first name or surname of someone else ("Jones", "Owen", "Nina")."""
        synsets = self.wn.synsets(key, "n")
        if not synsets or not synsets[0].instance_hypernyms():
            return None
        # NLTK keeps a synset's pointers in a set: sort them, or results vary by process.
        hypernyms = tuple(sorted(synsets[0].instance_hypernyms(), key=lambda s: s.name()))
        label = self.label_of(hypernyms)
        if label not in PLACE_LABELS and "_" not in key:
            return None
        return label, self.head_name(hypernyms)

    def _label_of(self, synsets: tuple) -> str:
        """The spaCy label matching WordNet classes: the first of LABEL_ROOTS among their
        hypernyms, else "PROPN" (a named thing of no listed kind)."""
        ancestors = {a for s in synsets for a in (s, *s.closure(lambda s: s.hypernyms()))}
        for label, root in LABEL_ROOTS:
            if self.wn.synset(root) in ancestors:
                return label
        return "PROPN"

    def _head_name(self, synsets: tuple) -> str:
        """The nearest single common word naming one of the synsets or their hypernyms
        (ties: the most frequent), else the first synset's own name: national_capital ->
        "city", (city, port_of_entry) -> "city"."""
        level = synsets
        for _ in range(self.max_depth + 1):
            names = [s.lemma_names()[0].lower() for s in level]
            common = [n for n in names if "_" not in n and self.zipf(n) >= self.min_zipf]
            if common:
                return max(sorted(common), key=self.zipf)
            parents = {h for s in level for h in s.hypernyms() + s.instance_hypernyms()}
            level = sorted(parents, key=lambda s: s.name())
        return synsets[0].lemma_names()[0].lower().replace("_", " ")

    def _plural(self, noun: str) -> str:
        """Plural of a noun phrase's last word: the most frequent (wordfreq) of its regular
        plural, WordNet's irregular one (noun.exc lists archaic ones too: "brethren") and
        the -man -> -men form."""
        *modifiers, word = noun.split(" ")
        if word.endswith(("s", "x", "z", "ch", "sh")):
            regular = word + "es"
        elif word.endswith("y") and word[-2:-1] not in tuple("aeiou"):
            regular = word[:-1] + "ies"
        else:
            regular = word + "s"
        candidates = [regular, self.irregular_plurals.get(word)]
        if word.endswith("man"):
            candidates.append(word[:-3] + "men")
        best = max((c for c in candidates if c), key=self.zipf)
        return " ".join([*modifiers, best])
