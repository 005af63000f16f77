"""Hypernymization: the text transformation of spec §4.

Proper names cannot be learned from pixels, so a caption's named entities become the
concepts they stand for, and what no image shows (dates, places, counts) goes:

    "Crowd at a concert in Los Angeles"  -> "crowd at a concert"
    "Albert Einstein giving a lecture"   -> "physicist giving a lecture"
    "artist and artist"                  -> "artists"

    hypernymizer = Hypernymizer(HypernymConfig())
    [result] = hypernymizer.transform(["Italian cuisine"])   # result.caption == "cuisine"

One caption, parsed by spaCy (POS, dependencies, entities), goes through these rules. The
`label` each records in `Transformed.entities` is given in brackets.

1. Names are spaCy's entities and the runs of proper nouns it left unlabelled [PROPN].
   A name needs a word that is one: WordNet knows it only capitalized as a named instance
   ("London"), or not at all ("Priyanka"); for NORP also a capitalized class ("Italian").
   Common words are no name ("Fireworks", "piggy bank"), unless capitalized inside a
   sentence of a cased text ("made in China"), or WordNet knows the whole span as a named
   instance ("Cayman Islands"). The small model mislabels, so WordNet's kind of a name it
   knows overrides spaCy's label, and a name coordinated with a person is a person.
2. Dates and times holding a cardinal number go ("on July 4, 2015", "in 1976") [DATE,
   TIME], with their preposition when they were its only object; "a summer day", "the
   18th century" and "Saturday" are things an image can show and stay.
3. Names modifying a noun go: "the Paraguay flag", "Italian cuisine", "London's parks"
   [their label]. The noun already says what the thing is.
4. Preposition-based locations: a preposition whose object is a place or organization
   (GPE, LOC, FAC, ORG; an unlabelled name after "in", "at", "near") goes with its
   phrase, "in Los Angeles", "at Wembley Stadium", "of Barcelona" [LOCATION_PP], while
   "at a concert" stays. When the phrase has other nouns ("at sunset UK") the name alone
   goes.
5. A name after a title noun of its kind goes and the title stays: "actor Colin Farrell"
   -> "actor", "the singer, Adele," -> "the singer", "the village Manang" -> "the
   village"; a plural title takes its coordinated names along ("actors Tommy Lee Jones
   and Faye Dunaway" -> "actors").
6. Other names are replaced by a hypernym, from WordNet first: the name's most frequent
   sense must be a named instance (a person by full name only: a lone "Jones" or
   "Thomas" is mostly someone else), and it is named by the nearest single common word
   among its instance hypernyms and their hypernyms (`max_wordnet_depth` levels, at least
   `min_head_zipf` frequent, ties to the most frequent), the short heads the released
   captions prefer: Einstein -> physicist, Paris -> national capital -> "city", Spain ->
   European country -> "country". Else the entity type gives it (TYPE_HEADS): PERSON ->
   "person", GPE -> "city" (countries and states are in WordNet, so unknown places are
   mostly towns), ORG -> "organization", a plural NORP -> "people"... An unlabelled name
   WordNet does not know becomes "person" (captions are mostly of people). WordNet knows
   few living people and this is no knowledge graph: "Former Miss World Priyanka Chopra on
   the red carpet" gives "former person on the red carpet", where Google's pipeline said
   "actor"; and the small model's mistakes pass through ("Calista Flockhart" tagged ORG
   becomes "organization").
7. Numbers and units modifying nouns go: counts, "two sculptures" -> "sculptures", "a
   dozen roses" -> "roses" [CARDINAL]; measures, "a 2 litre bottle" -> "a bottle"
   [QUANTITY, MONEY, PERCENT].
8. Coordinated heads that now name the same concept, with no modifiers left but
   articles, merge into one plural: "actor and actor" -> "actors" (WordNet's irregular
   plurals, or the most frequent of the regular and -men forms).
9. Output in the released dataset's style: lowercase spaCy tokens joined by single
   spaces, punctuation as separate tokens; an article before a changed word agrees with
   it, and punctuation or conjunctions left dangling by removals go.

Lowercase input (the dev set's URL slugs) defeats spaCy's NER, so `parse` (and with it
`transform`) restores capitals in caseless texts first (`restore_case`): words and
multiword names WordNet spells with capitals ("new york" -> "New York"), unknown words
rarer than `name_max_zipf` ("dacosta"), but not derivations of common words ("biker").
Texts with capitals are parsed as they are.

Rejections (`Transformed.rejection.reason`, stable metric names):
- "unresolved_entity": with `reject_unresolved`, a name neither spaCy nor WordNet could
  type (rule 6's "person" guess), for precision over recall as the paper's pipeline;
- "too_short": fewer than `min_tokens` words left (released captions have at least 3);
- "no_noun_left": no noun left, so nothing for the entity-type frequency rule to count.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from conceptual.config import Config
from conceptual.records import Rejection


class HypernymConfig(Config):
    """Thresholds and switches of the rules in the module doc."""

    min_tokens: int = 3  # reject captions left with fewer words ("too_short")
    max_wordnet_depth: int = 3  # hypernym levels searched for a short common head
    min_head_zipf: float = 3.0  # a head word is at least this frequent (wordfreq zipf)
    restore_case: bool = True  # capitalize likely names in caseless texts before parsing
    name_max_zipf: float = 4.0  # restore_case: an unknown word rarer than this is a name
    reject_unresolved: bool = False  # reject names neither spaCy nor WordNet could type
    spacy_pipeline: str | None = None  # None: assets.load_spacy's default pipeline
    wordnet_path: str | None = None  # a WordNet 3.0 directory; None: assets.wordnet's search
    batch_size: int = 256  # texts per nlp.pipe batch


@dataclass
class Transformed:
    """One caption's result. `caption`: lowercase and tokenized, None when rejected.
    `entities`: what was removed or replaced, {"text", "label", "action": "removed" |
    "replaced", "replacement", "source": "wordnet" | "entity_type" | "rule"}. `types`: the
    sorted concepts the caption mentions (its nouns' lemmas and the replacements), for the
    entity-type frequency rule. `rejection`: why it was rejected, else None."""

    caption: str | None
    entities: list[dict] = field(default_factory=list)
    types: list[str] = field(default_factory=list)
    rejection: Rejection | None = None


# Fallback heads by spaCy entity label, when WordNet does not know the name.
TYPE_HEADS = {
    "PERSON": "person",
    "NORP": "person",  # "an American"; "Americans" -> "people"
    "FAC": "building",
    "ORG": "organization",
    "GPE": "city",
    "LOC": "location",
    "PRODUCT": "product",
    "EVENT": "event",
    "WORK_OF_ART": "work",
    "LAW": "law",
    "LANGUAGE": "language",
    "PROPN": "person",  # a name neither spaCy nor WordNet could type: captions are mostly of people
}
PLACE_LABELS = {"GPE", "LOC", "FAC", "ORG"}
PLACE_PREPOSITIONS = {"in", "at", "near"}
# spaCy label of a name WordNet knows, by the first of these classes among its hypernyms.
LABEL_ROOTS = (
    ("PERSON", "person.n.01"),
    ("GPE", "location.n.01"),  # cities, countries, regions, districts, villages
    ("FAC", "artifact.n.01"),  # towers, castles, streets, hotels
    ("LOC", "body_of_water.n.01"),  # rivers, seas, lakes
    ("LOC", "object.n.01"),  # mountains, islands, beaches: the other natural objects
    ("ORG", "group.n.01"),  # organizations, bands, teams
)
# Labels of the same kind for the title rule: a place name goes after any place noun.
KINDS = {"GPE": "place", "LOC": "place", "FAC": "place"}
TIME_LABELS = {"DATE", "TIME"}
MEASURE_LABELS = {"QUANTITY", "MONEY", "PERCENT"}
NUMBER_LABELS = {"CARDINAL", "ORDINAL", *MEASURE_LABELS}
MODIFIER_DEPS = {"compound", "nmod", "amod", "poss", "npadvmod"}
TITLE_DEPS = {"compound", "nmod", "amod", "appos"}
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
# Doc.user_data key marking a doc parsed from restore_case's output.
CASE_RESTORED = "conceptual.case_restored"
# Irregular plurals WordNet's noun.exc lacks (it lists inflections, not suppletion).
SUPPLETIVE_PLURALS = {"person": "people"}


class Hypernymizer:
    """Applies the module's rules to parsed captions. Heavy loads happen once, here."""

    def __init__(self, config: HypernymConfig | None = None, nlp=None):
        from conceptual import assets

        self.config = config or HypernymConfig()
        self.nlp = nlp if nlp is not None else assets.load_spacy(self.config.spacy_pipeline)
        self.wn = assets.wordnet(self.config.wordnet_path)
        self.lexicon = Lexicon(self.wn, self.config)
        self.stop_words = frozenset(self.nlp.Defaults.stop_words)

    def transform(self, texts: Sequence[str]) -> list[Transformed]:
        return [self.transform_doc(doc) for doc in self.parse(texts)]

    def parse(self, texts: Sequence[str]) -> Iterator:
        """spaCy docs of the texts, batched, caseless ones with capitals restored first
        (`restore_case`): the docs `transform_doc` expects, for a caller who also reads them."""
        cased = [self.restore_case(t) for t in texts] if self.config.restore_case else texts
        for text, doc in zip(texts, self.nlp.pipe(cased, batch_size=self.config.batch_size)):
            if doc.text != text:
                doc.user_data[CASE_RESTORED] = True  # its capitals are guesses, not evidence
            yield doc

    def restore_case(self, text: str) -> str:
        """A caseless text with likely names capitalized, so spaCy can see them: names
        WordNet spells with capitals ("new york" -> "New York", "christmas"), and unknown
        words rarer than `name_max_zipf`. Any text with a capital letter stays as it is."""
        if text != text.lower():
            return text
        words = text.split(" ")
        out = []
        while words:
            for size in (3, 2, 1):
                spelling = self._cased(words[:size])
                if spelling:
                    out.extend(spelling)
                    del words[:size]
                    break
            else:
                out.append(words.pop(0))
        return " ".join(out)

    def _cased(self, words: list[str]) -> list[str] | None:
        """The words as WordNet capitalizes them, or capitalized as an unknown rare word;
        None when they are not a name."""
        if not all(word.isalpha() for word in words) or words[0] in self.stop_words:
            return None
        kind, spelling = self.lexicon.word_kind("_".join(words))
        if kind in ("name", "capitalized"):
            return spelling.split("_")
        if len(words) == 1 and kind == "unknown":
            if self.lexicon.zipf(words[0]) < self.config.name_max_zipf:
                return [words[0].capitalize()]
        return None

    def transform_doc(self, doc) -> Transformed:
        """The rules applied to a doc parsed by `self.nlp` (by `parse` for caseless texts)."""
        edits = Edits(doc)
        for span in doc.ents:
            if span.label_ in TIME_LABELS and any(t.pos_ == "NUM" or t.is_digit for t in span):
                self._remove_date(span, edits)
        for span, label in self._names(doc):
            if not edits.touches(span):
                self._resolve_name(span, label, edits)
        self._remove_numbers(doc, edits)
        self._merge_coordinations(doc, edits)
        return self._finish(edits)

    # --- rules ------------------------------------------------------------------------------

    def _names(self, doc) -> list:
        """(span, label) for the names in doc: spaCy's entities other than numbers and
        times, then runs of proper nouns it left unlabelled (label "PROPN"). The small
        model mislabels, so WordNet's kind of a name it knows overrides spaCy's label, and
        a name coordinated with a person is a person ("Ronan Farrow and Rina Amiri")."""
        covered = set()
        candidates = []
        for ent in doc.ents:
            covered.update(range(ent.start, ent.end))
            if ent.label_ not in TIME_LABELS | NUMBER_LABELS:
                candidates.append((trim(ent), ent.label_))
        run = []
        for token in [*doc, None]:
            if token is not None and token.pos_ == "PROPN" and token.i not in covered:
                run.append(token)
            elif run:
                candidates.append((doc[run[0].i : run[-1].i + 1], "PROPN"))
                run = []
        names = []
        cased = capitals_mark_names(doc)
        for span, label in candidates:
            if label == "PROPN" and all(token.lower_ in self.stop_words for token in span):
                continue  # "US", "IT" tagged as proper nouns: words first
            known = self.lexicon.instance(wordnet_key(span))
            if known or any(self._is_name_word(token, label, cased) for token in span):
                names.append((span, known[0] if known else label))
        people = {span.root.i for span, label in names if label == "PERSON"}
        return [
            (
                span,
                "PERSON" if label in ("ORG", "PROPN") and conjuncts(span.root) & people else label,
            )
            for span, label in names
        ]

    def _is_name_word(self, token, label: str, cased: bool) -> bool:
        """Whether a word is a name: WordNet knows it only as a name, or not at all
        ("Priyanka"); for nationalities and groups (NORP) also a capitalized class word
        ("Italian"). A common word is a name only where capitals mark names and it has one
        inside a sentence ("made in China", "President Bush"); otherwise it is a word
        ("Fireworks", "piggy bank", "Marines", whose lemma "marine" is common), and so are
        capitalized classes ("Christmas")."""
        if not token.is_alpha or token.lower_ in self.stop_words:
            return False
        kinds = ("name", "unknown", "capitalized") if label == "NORP" else ("name", "unknown")
        kind, lemma_kind = (
            self.lexicon.word_kind(w)[0] for w in (token.lower_, token.lemma_.lower())
        )
        if kind in kinds and lemma_kind != "common":
            return True
        return cased and token.is_title and not token.is_sent_start and kind != "unknown"

    def _remove_date(self, span, edits):
        edits.remove(span_with_dets(span), span.label_, span.text)
        prep = span.root.head
        if span.root.dep_ == "pobj" and [c.dep_ for c in prep.children] == ["pobj"]:
            edits.remove([prep])

    def _resolve_name(self, span, label, edits):
        root, head = span.root, span.root.head
        outside = head.i < span.start or head.i >= span.end
        if root.dep_ in MODIFIER_DEPS and outside and head.pos_ in ("NOUN", "PROPN"):
            possessive = [c for c in root.children if c.dep_ == "case"]
            edits.remove([*span, *possessive], label, span.text)
        elif (
            self._is_place(label, head)
            and root.dep_ == "pobj"
            and head.dep_ == "prep"
            and not ends_complex_preposition(head)
        ):
            phrase = prepositional_phrase(head, span)
            if any(t.pos_ in ("NOUN", "PROPN") and t not in span for t in phrase):
                edits.remove(span, label, span.text)  # "at sunset UK": the place alone goes
            else:
                text = span.doc[phrase[0].i : phrase[-1].i + 1].text
                edits.remove(phrase, "LOCATION_PP", text)
        elif title := self._title(span, label):
            edits.remove(span, label, span.text)
            if self._is_plural(title):  # "actors Tommy Lee Jones and Faye Dunaway": all of them
                for conjunct in (c for c in root.children if c.dep_ == "conj"):
                    name = span.doc[conjunct.left_edge.i : conjunct.right_edge.i + 1]
                    edits.remove(span.doc[span.end : name.end], label, name.text)
        else:
            concept, source = self._hypernym(span, label)
            if label == "PROPN" and source == "entity_type":
                edits.unresolved.append(span.text)  # neither spaCy nor WordNet could type it
            # "Cubans" -> "people"; WordNet's names are singular ("Leeds", "Athens")
            plural = root.tag_ in ("NNS", "NNPS") and source == "entity_type"
            word = self.lexicon.plural(concept) if plural else concept
            edits.replace(span, word, concept, label, source)

    @staticmethod
    def _is_place(label: str, preposition) -> bool:
        """Whether a name after this preposition is a place: a place or organization label,
        or an unlabelled name after "in", "at", "near"."""
        return label in PLACE_LABELS or (
            label == "PROPN" and preposition.lower_ in PLACE_PREPOSITIONS
        )

    def _title(self, span, label: str):
        """A common noun before or around the name that already says what it is: "actor"
        in "actor Colin Farrell", "singer" in "the singer, Adele", "village" in "the
        village Manang"; then the name alone goes. The noun must have a sense of the name's
        kind (a person noun for a person, a place noun for a place; either for an
        unlabelled name)."""
        nouns = [c for t in span for c in t.children if c.dep_ in TITLE_DEPS and c.i < span.start]
        if span.root.dep_ == "appos":
            nouns.append(span.root.head)
        kind = KINDS.get(label, label)
        for noun in nouns:
            common = noun.pos_ == "NOUN" or self.lexicon.word_kind(noun.lower_)[0] == "common"
            # The small tagger calls some titles verbs ("actress Meryl Streep" -> VERB
            # compound); a compound before a name is a noun all the same.
            if noun.pos_ not in ("NOUN", "PROPN") and noun.dep_ != "compound" or not common:
                continue
            kinds = {KINDS.get(lb, lb) for lb in self.lexicon.noun_labels(noun.lemma_.lower())}
            if kind in kinds or (kind == "PROPN" and kinds & {"PERSON", "place"}):
                return noun
        return None

    def _hypernym(self, span, label) -> tuple[str, str]:
        """(concept, source) for a name: WordNet first, then the entity type."""
        if known := self.lexicon.instance(wordnet_key(span)):
            return known[1], "wordnet"
        return TYPE_HEADS[label], "entity_type"

    def _remove_numbers(self, doc, edits):
        """Numbers and units modifying nouns: measures ("a 2 litre bottle", QUANTITY, MONEY,
        PERCENT spans; "a 15 m circle") and counts ("two sculptures", "a dozen roses")."""
        for span in doc.ents:
            head = span.root.head
            is_modifier = span.root.dep_ in MODIFIER_DEPS | {"nummod"} and head.i >= span.end
            if span.label_ in MEASURE_LABELS and is_modifier and head.pos_ == "NOUN":
                edits.remove(span, span.label_, span.text)
        for token in doc:
            is_count = token.dep_ == "nummod" and (token.like_num or token.ent_type_ == "CARDINAL")
            if not is_count or token.i in edits.dropped or token.ent_type_ in TIME_LABELS:
                continue  # not "almost no yellow", "a few paces"
            removed = list(token.subtree)
            unit = token.head  # "a 15 m circle": the number measures a unit modifying a noun
            if unit.dep_ in MODIFIER_DEPS and self.lexicon.is_unit(unit.lemma_.lower()):
                removed.append(unit)
            edits.remove(removed, "CARDINAL", " ".join(t.text for t in removed))

    def _merge_coordinations(self, doc, edits):
        """ "actor and actor" -> "actors": a head and its conjuncts that now name the same
        concept, with no modifiers left but articles, become its plural ("dining room and
        living room" stay)."""
        for head in doc:
            conjuncts = [c for c in head.children if c.dep_ == "conj"]
            concept = edits.concept(head)
            if not conjuncts or concept is None:
                continue
            same = all(edits.concept(c) == concept for c in conjuncts)
            if same and all(edits.is_bare(t) for t in (head, *conjuncts)):
                head_span = edits.span_of(head)
                last = edits.span_of(conjuncts[-1])
                between = range(head_span[-1] + 1, last[-1] + 1)
                edits.remove([doc[i] for i in between])
                articles = [c for c in head.children if c.dep_ == "det" and c.lower_ in ("a", "an")]
                edits.remove(articles)
                edits.pluralize(head, self.lexicon.plural(concept))

    def _is_plural(self, noun) -> bool:
        """Tagged plural, or inflected by WordNet's reckoning (a capitalized "Actors" is
        tagged as a singular proper noun)."""
        base = self.wn.morphy(noun.lower_, "n")
        return noun.tag_ in ("NNS", "NNPS") or base not in (None, noun.lower_)

    def _lemma(self, token) -> str:
        """A noun's lemma; WordNet's for words tagged as proper nouns, which spaCy leaves
        inflected ("Awards")."""
        if token.pos_ == "PROPN":
            return self.wn.morphy(token.lower_, "n") or token.lower_
        return token.lemma_.lower()

    def _finish(self, edits) -> Transformed:
        words = edits.words()
        word_count = sum(1 for w in words if any(c.isalnum() for c in w))
        types = edits.types(self._lemma)
        rejection = None
        if edits.unresolved and self.config.reject_unresolved:
            rejection = Rejection("unresolved_entity", ", ".join(edits.unresolved))
        elif word_count < self.config.min_tokens:
            rejection = Rejection("too_short", f"{word_count} words left: {' '.join(words)!r}")
        elif not types:
            rejection = Rejection("no_noun_left", " ".join(words))
        caption = None if rejection else " ".join(words)
        return Transformed(caption, edits.entities, types, rejection)


class Edits:
    """What the rules decided for one doc: the tokens dropped, the words put in place of
    others, the concepts of replaced names, and the record of what was removed or replaced."""

    def __init__(self, doc):
        self.doc = doc
        self.dropped: set[int] = set()
        self.words_at: dict[int, str] = {}  # token index -> the word standing in its place
        self.spans: dict[int, range] = {}  # root index of a replaced name -> its tokens
        self.concepts: dict[int, str] = {}  # root index -> the concept that replaced it
        self.entities: list[dict] = []
        self.unresolved: list[str] = []

    def touches(self, span) -> bool:
        return any(i in self.dropped or i in self.words_at for i in range(span.start, span.end))

    def remove(self, tokens, label: str | None = None, text: str | None = None):
        """Drop tokens; with a label and text, record them as a removed entity."""
        self.dropped.update(t.i for t in tokens)
        if label and text:
            self.entities.append(
                {
                    "text": text,
                    "label": label,
                    "action": "removed",
                    "replacement": None,
                    "source": "rule",
                }
            )

    def replace(self, span, word: str, concept: str, label: str, source: str):
        """Put `word` in place of the span; it stands for `concept` (its singular)."""
        self.dropped.update(range(span.start + 1, span.end))
        self.words_at[span.start] = word
        self.spans[span.root.i] = range(span.start, span.end)
        self.concepts[span.root.i] = concept
        self.entities.append(
            {
                "text": span.text,
                "label": label,
                "action": "replaced",
                "replacement": word,
                "source": source,
            }
        )

    def concept(self, token) -> str | None:
        """The concept a token now stands for: a name's replacement, or a kept noun's lemma."""
        if token.i in self.concepts:
            return self.concepts[token.i]
        if token.pos_ == "NOUN" and token.i not in self.dropped and token.i not in self.words_at:
            return token.lemma_.lower()
        return None

    def is_bare(self, token) -> bool:
        """Whether no modifier of the token is left but articles and determiners."""
        span = self.span_of(token)
        return not any(
            c.i not in self.dropped and c.i not in span and c.dep_ in MODIFIER_DEPS | {"nummod"}
            for i in span
            for c in self.doc[i].children
        )

    def span_of(self, token) -> range:
        return self.spans.get(token.i, range(token.i, token.i + 1))

    def pluralize(self, token, plural: str):
        self.concepts.setdefault(token.i, token.lemma_.lower())
        self.words_at[self.span_of(token)[0]] = plural

    def words(self) -> list[str]:
        """The output tokens, lowercase. Where tokens were removed, an article before the
        next word agrees with it, and punctuation or conjunctions left dangling go: doubled
        ("the singer, , on stage" -> "the singer on stage") or at either end."""
        out: list[tuple[str, object]] = []  # (word, its token; None for a replacement)
        removed_before = False  # tokens were removed since the last word kept
        for token in self.doc:
            if token.i in self.dropped or token.is_space:
                removed_before = True
                continue
            replaced = token.i in self.words_at
            word = self.words_at.get(token.i, token.lower_)
            if (removed_before or replaced) and out and out[-1][0] in ("a", "an"):
                out[-1] = ("an" if word[0] in "aeiou" else "a", out[-1][1])
            if removed_before and is_joiner(token) and (not out or is_joiner(out[-1][1])):
                if out and word == out[-1][0] == ",":
                    out.pop()  # the commas around a removed apposition
                continue
            out.append((word, None if replaced else token))
            removed_before = False
        if removed_before:  # the caption's end was removed
            while out and is_joiner(out[-1][1]) and out[-1][0] not in ".!?":
                out.pop()
        return [word for word, _ in out]

    def types(self, lemma) -> list[str]:
        """The concepts the caption mentions: the lemmas of its kept nouns (by `lemma`) and
        the concepts that replaced names."""
        found = set()
        for token in self.doc:
            if token.i in self.concepts and self.span_of(token)[0] not in self.dropped:
                found.add(self.concepts[token.i])
            elif token.i in self.dropped or token.i in self.words_at:
                continue
            elif token.pos_ in ("NOUN", "PROPN") and token.is_alpha:
                found.add(lemma(token))
        return sorted(found)


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
        self.zipf = cache(lambda word: zipf_frequency(word, "en"))
        self.word_kind = cache(self._word_kind)
        self.instance = cache(self._instance)
        self.label_of = cache(self._label_of)
        self.head_name = cache(self._head_name)
        self.noun_labels = cache(
            lambda lemma: frozenset(self.label_of((s,)) for s in wn.synsets(lemma, "n"))
        )
        self.plural = cache(self._plural)
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


def trim(span):
    """The span without leading determiners or punctuation and trailing possessives:
    "the Jardin Majorelle" -> "Jardin Majorelle"."""
    start, end = span.start, span.end
    while start < end and span.doc[start].pos_ in ("DET", "PUNCT"):
        start += 1
    while end > start and (span.doc[end - 1].tag_ == "POS" or span.doc[end - 1].is_punct):
        end -= 1
    return span.doc[start:end]


def is_joiner(token) -> bool:
    """A comma-like punctuation mark or a coordinating conjunction (None: a replacement)."""
    if token is None or token.is_quote or token.is_bracket:
        return False
    return token.is_punct or token.dep_ == "cc"


def capitals_mark_names(doc) -> bool:
    """Whether capitals in the text single out names: most words inside its sentences are
    lowercase (not a Title Case Headline, not all lowercase), and `restore_case` did not
    put them there."""
    if doc.user_data.get(CASE_RESTORED):
        return False
    inner = [t for t in doc if t.is_alpha and not t.is_sent_start]
    capitalized = sum(t.is_title or t.is_upper for t in inner)
    return 0 < capitalized < len(inner) / 2


def conjuncts(token) -> set[int]:
    """Indices of the tokens coordinated with token ("A and B": each other's)."""
    linked = {c.i for c in token.children if c.dep_ == "conj"}
    if token.dep_ == "conj":
        linked.add(token.head.i)
    return linked


def span_with_dets(span) -> list:
    return [*(c for c in span.root.children if c.dep_ == "det" and c.i < span.start), *span]


def prepositional_phrase(preposition, name) -> list:
    """The preposition and its object's phrase, the whole name included ("at the University
    of Oxford"), without the clauses and phrases hanging off the name ("in Paris with
    friends" -> "in Paris")."""
    obj = name.root
    hanging = {
        t.i
        for c in obj.children
        if c.dep_ in ("prep", "acl", "relcl") and not name.start <= c.i < name.end
        for t in c.subtree
    }
    return [preposition, *(t for t in obj.subtree if t.i not in hanging)]


def ends_complex_preposition(preposition) -> bool:
    """Whether a preposition ends a multiword one ("in front of", "on top of", "next to"),
    which cannot lose its object: removing "of Tower Bridge" would leave "in front"."""
    head = preposition.head
    if head.pos_ in ("ADV", "ADJ"):
        return True
    bare = not any(c.dep_ in ("det", "poss") for c in head.children)
    return head.pos_ == "NOUN" and head.dep_ == "pobj" and bare


def wordnet_key(span) -> str:
    """How WordNet spells a multiword name: "Albert Einstein" -> "albert_einstein"."""
    return "_".join(token.lower_ for token in span if not token.is_punct)
