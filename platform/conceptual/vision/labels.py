"""The image&text filter (docs/spec/curation.md §3): keep a pair only when a caption word matches
one of the image's classifier labels.

ImageNet classes are WordNet noun synsets, so a label stands for its lemma names and those of
its hypernyms a few levels up ("espresso" -> coffee, beverage), never the generic synsets near
WordNet's root ("object", "whole") that every caption would match. Caption words and label
terms meet as noun lemmas reduced by the Porter stemmer ("cats" -> cat, "coffees" -> coffe);
multi-word lemma names ("coffee mug") match as a phrase.

Labels are nouns, so only a caption word used as a noun may match one: given the caption's
nouns (the NLP stage's `types`, the lemmas of the nouns it kept and the concepts that
replaced names, plus the names' own words), a phrase counts only when its last word is one
of them, or a word WordNet knows as a noun only (the small spaCy model tags "oven" a verb
and "tub" an interjection in lists of things). "A camera stands on the table" no longer
matches tripod's hypernym `stand`, nor "people working" a `work` label, nor "a skier skiing"
`ski` (the skier still may), while "a fly on a leaf" still matches `fly`. It matters most
where the stemmer meets an agent noun and its verb: "contains" stems as `container` does
(65 classes expand to it), "opening" as `can opener`'s "opener". The comparison is by word,
not position: a word used both ways in one caption counts, and the nouns need no alignment
with the text matched, the alt-text and its hypernymized caption together (the names' own
words and the concepts replacing them are both among the nouns). Without nouns
(`nouns=None`: a caller with no parse), every word may match.

With the defaults, on coco_mini's 159 photos, 57.6% of their human captions pass (59.2%
matching every word) and 4.7% of other photos' captions do (5.5%)
(tests/integration/test_overlap_realdata.py); most of the human captions lost are verbs
("skiing" 6, "working" 3, "contains", "drink") and one mis-tagged noun ("stove").

Labels the dataset carries (`labels.source=dataset`: the released `labeled` config, Google's
own labels such as "dog", "sky", "sports car", with a Freebase MID and no wnid) are names, not
synsets: a name stands for itself and, when WordNet knows it as a noun, for its first noun
sense expanded as above (the most frequent sense: "dog" is the animal, not the andiron).
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Literal, NamedTuple

from nltk.stem import PorterStemmer
from nltk.tokenize import wordpunct_tokenize

from conceptual.assets import wordnet
from conceptual.config import Config
from conceptual.records import Rejection

OVERLAP_REASONS = ("no_label_overlap", "no_labels")
Key = tuple[str, ...]  # a term or caption phrase as its word stems: ("coffe", "mug")


class LabelMatch(NamedTuple):
    """What `match` says of a pair: the caption words that match a label's terms, in caption
    order, and the Rejection when none does (None: keep the pair)."""

    words: list[str]
    rejection: Rejection | None


class OverlapConfig(Config):
    enabled: bool = True
    # How the label rule combines with the learned alignment score (alignment.*;
    # conceptual.vision.alignment): "labels", the paper's rule alone (the score, with an
    # alignment.scorer, only recorded); "alignment", the score alone; "either", a pair kept by
    # one of them is kept; "both", a pair must pass both.
    rule: Literal["labels", "alignment", "either", "both"] = "labels"
    top_k: int = 5  # labels per image used for matching, best first
    min_score: float = 0.02  # labels scoring less are ignored, except the best one
    hypernym_depth: int = 3  # hypernym levels each label expands to
    # Expansion stops at synsets this close to WordNet's root (entity 0, object 2, artifact 4,
    # organism 5, structure 5...): they would match every caption. Depth is the longest path
    # from the root: the shortest misleads (person: 3 through causal agent, 6 through organism).
    min_synset_depth: int = 6
    # A multi-word name also matches its last word when WordNet says the label is one:
    # "tandem bicycle" -> bicycle, "oscine bird" -> bird (never "hot dog" -> dog).
    head_words: bool = True


class LabelSourceConfig(Config):
    """Where an image's labels come from: the ImageNet classifier (vision/cnn.py), or the
    dataset itself (the released `labeled` config: its `labels`, `MIDs` and
    `confidence_scores`, read into the `labels` column; no classifier is loaded)."""

    source: Literal["classifier", "dataset"] = "classifier"


class LabelMatcher:
    """The filter: WordNet loads once per matcher (seconds), label terms are computed once."""

    def __init__(self, config: OverlapConfig | None = None):
        self.config = config or OverlapConfig()
        self._wordnet = wordnet()
        self._stemmer = PorterStemmer()
        self._terms: dict[str, frozenset[str]] = {}
        self._keys: dict[str, frozenset[Key]] = {}
        # Captions repeat their words a lot; a word's stem is worth remembering.
        self._stem = functools.lru_cache(maxsize=1 << 16)(self._stem_word)
        self._noun_only = functools.lru_cache(maxsize=1 << 16)(self._noun_only_word)

    def terms(self, wnid: str) -> frozenset[str]:
        """The label's lemma names and those of its hypernyms up to `hypernym_depth` levels,
        lowercase, words separated by spaces, with their confirmed head words (`head_words`):
        n07920052 (espresso) -> {"espresso", "coffee", "java", "beverage", ...}."""
        if wnid not in self._terms:
            synset = self._wordnet.synset_from_pos_and_offset("n", int(wnid[1:]))
            names = {
                name.replace("_", " ").lower()
                for expansion in self._expansions(synset)
                for name in expansion.lemma_names()
            }
            if self.config.head_words:
                names |= self._confirmed_heads(synset, names)
            self._terms[wnid] = frozenset(names)
        return self._terms[wnid]

    def match(
        self, caption: str, labels: Sequence[Mapping], nouns: Collection[str] | None = None
    ) -> LabelMatch:
        """The caption words matching a label's terms, or no words and a Rejection. With
        `nouns` (words or phrases), a match must end in one of their words."""
        usable = self.usable_labels(labels)
        if not usable:
            return LabelMatch([], Rejection("no_labels", "the image has no labels"))
        keys = frozenset().union(*map(self._keys_of, usable))
        matched = self._longest_matches(caption_words(caption), keys)
        if nouns is not None:
            noun_stems = {self._stem(word) for noun in nouns for word in caption_words(noun)}
            matched = [m for m in matched if self._as_noun(m.rsplit(" ", 1)[-1], noun_stems)]
        if matched:
            return LabelMatch(matched, None)
        names = ", ".join(label["name"] for label in usable)
        return LabelMatch([], Rejection("no_label_overlap", f"labels: {names}"))

    def usable_labels(self, labels: Sequence[Mapping]) -> list[Mapping]:
        """The best `top_k` labels scoring at least `min_score`; the best label always counts,
        so an image the classifier is unsure of is still judged on its best guess."""
        score = lambda label: label["score"] or 0.0  # noqa: E731 - a dataset label may have none
        ranked = sorted(labels, key=score, reverse=True)[: self.config.top_k]
        return ranked[:1] + [label for label in ranked[1:] if score(label) >= self.config.min_score]

    def _expansions(self, synset) -> Iterator:
        """The synset, then its (instance) hypernyms level by level, up to `hypernym_depth`
        levels, leaving out those within `min_synset_depth` of the root (and so their own
        hypernyms, which are closer still)."""
        yield synset
        level = [synset]
        for _ in range(self.config.hypernym_depth):
            level = [
                hypernym
                for member in level
                for hypernym in hypernyms(member)
                if self._specific(hypernym)
            ]
            yield from level

    def _confirmed_heads(self, synset, names: set[str]) -> set[str]:
        """Last words of the multi-word names that name a (specific) kind the label is, by
        WordNet: tandem bicycle -> bicycle, oscine bird -> bird; never hot dog -> dog, sea lion
        -> lion, protective covering -> covering."""
        ancestors = {ancestor for ancestor in synset.closure(hypernyms) if self._specific(ancestor)}
        heads = {words[-1] for words in map(caption_words, names) if len(words) > 1}
        return {head for head in heads if ancestors.intersection(self._wordnet.synsets(head, "n"))}

    def _specific(self, synset) -> bool:
        """Far enough from WordNet's root to say something about an image (`min_synset_depth`)."""
        return synset.max_depth() >= self.config.min_synset_depth

    def _longest_matches(self, words: list[str], keys: frozenset[Key]) -> list[str]:
        """Caption phrases whose stems are label keys, scanning left to right and taking the
        longest at each word: "a coffee mug" -> ["coffee mug"], not also "mug"."""
        stems = [self._stem(word) for word in words]
        longest = max(map(len, keys), default=0)
        matched, start = [], 0
        while start < len(words):
            ends = range(min(start + longest, len(words)), start, -1)
            end = next((end for end in ends if tuple(stems[start:end]) in keys), None)
            if end is None:
                start += 1
                continue
            matched.append(" ".join(words[start:end]))
            start = end
        return list(dict.fromkeys(matched))

    def _as_noun(self, word: str, noun_stems: set[str]) -> bool:
        """Used as a noun: among the caption's nouns, or a noun in every WordNet reading."""
        return self._stem(word) in noun_stems or self._noun_only(word)

    def _noun_only_word(self, word: str) -> bool:
        return not any(self._wordnet.synsets(word, pos) for pos in "vasr")

    def name_terms(self, name: str) -> frozenset[str]:
        """A dataset label's terms: its name, lowercase, and when WordNet knows the name as
        a noun, the terms of its first noun sense: "dog" -> {"dog", "domestic dog", "canine",
        ...}; "dog breed" (no synset) -> {"dog breed"}."""
        key = f"name:{name}"
        if key not in self._terms:
            names = {" ".join(caption_words(name))} - {""}
            senses = self._wordnet.synsets("_".join(caption_words(name)), "n")
            if senses:
                names |= self.terms(f"n{senses[0].offset():08d}")
            self._terms[key] = frozenset(names)
        return self._terms[key]

    def _keys_of(self, label: Mapping) -> frozenset[Key]:
        """The label's terms as stems: by its WordNet id, else (a dataset label) its name."""
        if label.get("wnid"):
            return self._label_keys(label["wnid"])
        key = f"name:{label['name']}"
        if key not in self._keys:
            self._keys[key] = frozenset(
                tuple(map(self._stem, caption_words(term)))
                for term in self.name_terms(label["name"])
            )
        return self._keys[key]

    def _label_keys(self, wnid: str) -> frozenset[Key]:
        if wnid not in self._keys:
            self._keys[wnid] = frozenset(
                tuple(map(self._stem, caption_words(term))) for term in self.terms(wnid)
            )
        return self._keys[wnid]

    def _stem_word(self, word: str) -> str:
        """The Porter stem of the word's shortest noun lemma (WordNetLemmatizer's rule, on the
        reader already loaded: NLTK's own lemmatizer loads a second WordNet, 3 s and 180 MB)."""
        lemma = min(self._wordnet._morphy(word, "n"), key=len, default=word)
        return self._stemmer.stem(lemma)


def caption_nouns(
    types: Sequence[str] | None, entities: Sequence[Mapping] | None
) -> list[str] | None:
    """What the NLP stage found a candidate's nouns to be: its `types` (the kept nouns'
    lemmas and the concepts that replaced names) and the names removed or replaced, whose
    words the alt-text still holds. None when the text was not parsed (no `types`, or none
    at all: a released caption, which no parse looked at; a parsed caption that is kept
    always has a noun)."""
    if types is None or not (types or entities):
        return None
    return [*types, *(entity["text"] for entity in entities or ())]


def caption_words(text: str) -> list[str]:
    """Lowercase words, punctuation dropped: "A hot-dog's bun" -> a hot dog s bun."""
    return [word for word in wordpunct_tokenize(text.lower()) if word.isalnum()]


def hypernyms(synset) -> list:
    """The synset's hypernyms, instance hypernyms included (Paris -> national capital)."""
    return synset.hypernyms() + synset.instance_hypernyms()
