"""The text transformation never raises (issue 30: no row ever kills a job). Whatever an
alt-text holds, `TextCurator.process` ends with a caption or a rejection for it, with the
filters on (as the pipeline runs it) and off (as the `hypernymize` command does by
default, so every text reaches the transformation).

- regression cases: real alt-texts that raised ("A Lufthansa 747 landing at Frankfurt")
  and their variants;
- a Hypothesis generator of alt-texts built from real vocabulary: people, roles, carriers
  and makers with their model codes (747, A380, 737-800, F40), places, dates, titles in
  quotes, brackets, stray punctuation, other scripts (Chinese, Cyrillic, Arabic) and emoji,
  cased as the web writes them; bounded to a few hundred examples, no example database;
- the real texts of ../shared/data (`realdata`): a fixed sample of a few thousand by
  default, and all of them, as they are and lowercased, under `slow` (minutes; the script
  tests/benchmarks/text_never_raises.py counts them by where they raise).
"""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conceptual.text.curate import TextCurator

# Real alt-texts that raised, and variants of them: a carrier or maker with a model code.
RAISED = [
    "A Lufthansa 747 landing at Frankfurt",
    "a delta 767 parked at the gate in atlanta",
    "Silver and blue car marked 104 raises dust on road as two background people watch .",
]
MODEL_VARIANTS = [
    "A Delta 767 parked at the gate in Atlanta",
    "a lufthansa 747 landing at frankfurt",
    "A 747 landing at sunset",
    "An Airbus A380 taking off from Heathrow",
    "an emirates a380 on the tarmac in dubai",
    "A Boeing 737-800 on the runway",
    "a united 777-300ER at the gate",
    "A red Ferrari F40 parked on the street",
    "Porsche 911 GT3 on a race track",
    "A Douglas C-47 and a Mitchell B-25 at an air show",
    "Lufthansa 747 at the gate",
    "LUFTHANSA 747 LANDING AT FRANKFURT",
    "A Lufthansa Boeing 747-400 landing at Frankfurt airport, Germany, on May 3, 2015.",
    "747",
    "A380",
    "the 747",
    "Delta 767.",
    "A Boeing 747 cockpit",
    "two Delta 747s at the gate",
]
# Texts spaCy cannot take as they are: a lone surrogate (no character: UTF-8 cannot encode
# it; JSON can escape it), and a text past spaCy's max_length (1,000,000 characters).
UNPARSEABLE = ["A dog \ud83d on a beach", "\ud83d", "A dog on a beach. " * 60_000]


@pytest.fixture(scope="module")
def curator():
    return TextCurator()


def never_raises(curator, texts: list[str]) -> None:
    """Each text ends as a caption or a rejection, with the filters on and off."""
    for apply_filters in (True, False):
        outcomes = curator.process(texts, apply_filters=apply_filters)
        assert len(outcomes) == len(texts)
        for outcome in outcomes:
            assert (outcome.caption is None) != (outcome.rejection is None)


@pytest.mark.parametrize("text", RAISED + MODEL_VARIANTS)
def test_model_numbers_and_other_real_alt_texts_that_raised(curator, text):
    never_raises(curator, [text, text.lower()])


def test_texts_spacy_cannot_take_as_they_are(curator):
    never_raises(curator, UNPARSEABLE)
    [lone, _, long] = curator.process(UNPARSEABLE, apply_filters=False)
    assert lone.caption == "a dog \ufffd on a beach"
    assert long.caption == "a dog on a beach ."


# --- Hypothesis: alt-texts of real vocabulary -----------------------------------------------

PEOPLE = [
    "Albert Einstein", "Angela Merkel", "Priyanka Chopra", "Tom Hanks", "Eliud Kipchoge",
    "Jamie Foxx", "Eva Green", "Drew Barrymore", "Xi Jinping", "Vladimir Putin", "Beyoncé",
    "Zoë Kravitz", "Shah Rukh Khan", "Lin-Manuel Miranda", "Shaquille O'Neal", "J.K. Rowling",
    "Dr. Dre", "will.i.am", "Madonna", "Martin Luther King Jr.", "Tasha", "Jones",
]  # fmt: skip
ROLES = [
    "actor", "Actress", "singer", "President", "German Chancellor", "Musician", "Dame", "Sir",
    "Pope", "Queen", "Prince", "head coach", "Chef", "model", "designer", "Former Miss World",
    "the singer,", "Oscar winner",
]  # fmt: skip
MAKERS = [
    "Lufthansa", "Delta", "United", "American Airlines", "British Airways", "Emirates",
    "Qantas", "KLM", "Air France", "Ryanair", "easyJet", "Boeing", "Airbus", "Embraer",
    "Cessna", "Fokker", "Douglas", "Lockheed", "Ferrari", "Porsche", "BMW", "Mercedes-Benz",
    "Toyota", "Ford", "Fiat", "Tesla", "Volkswagen", "Harley-Davidson", "Ducati", "Canon",
    "Nikon", "Leica", "Apple", "Samsung", "Nokia", "Gucci", "Nike", "Starbucks",
]  # fmt: skip
MODELS = [
    "747", "767", "777-300ER", "737-800", "A380", "A320neo", "A350-900", "F40", "911",
    "911 GT3", "Model S", "C-47", "B-25", "F-16", "MD-11", "DC-3", "Mk II", "E-Type",
    "3 Series", "X5", "5D Mark III", "iPhone 7", "Galaxy S8", "3310", "2CV", "500", "104",
    "747-400", "A-10", "P-51D", "Su-27", "Tu-144", "No. 10", "#1", "R2-D2", "C3PO",
]  # fmt: skip
NOUNS = [
    "plane", "jet", "airliner", "car", "aircraft", "truck", "train", "bus", "camera",
    "phone", "woman", "man", "crowd", "dog", "cat", "building", "street", "beach", "festival",
    "awards", "premiere", "stage", "runway", "gate", "tarmac", "landing", "background",
    "illustration", "vector", "concept", "people", "children", "loafers", "bag",
]  # fmt: skip
PHRASES = [
    "landing at", "taking off from", "parked at the gate in", "on the runway at", "drives",
    "on display at", "arrives at", "performs at", "poses with", "in front of", "next to",
    "during the", "at the premiere of", "walks down", "isolated on white background",
    "on a white background", "vector illustration", "concept", "photo by", "stock photo",
    "is", "and", "or", "with", "of", "the", "a", "an", "its", "her", "his", "their",
]  # fmt: skip
PLACES = [
    "Frankfurt", "Atlanta", "Heathrow", "JFK", "Los Angeles", "Kericho, Kenya", "São Paulo",
    "Zürich", "New York City", "Luang Prabang", "Rio de Janeiro, Brazil", "St. Peter's Square",
    "Côte d'Ivoire", "LAX", "Washington, D.C.", "Bari Italy", "the O2 Arena", "Old Trafford",
    "LONDON, ENGLAND -", "NEW YORK, NY - MAY 02:", "Glastonbury Festival", "Bath", "Reading",
]  # fmt: skip
DATES = [
    "on July 4, 2015", "in 1976", "March 10 2012", "JANUARY 10:", "2016", "10/12/2019",
    "on Saturday", "1990s", "'90s", "Q3 2018", "the 21st century", "May 22, 2013.",
    "at 10:30 a.m.", "1st december", "2012-05-29", "two", "a dozen", "2 litre", "15 m",
    "100%", "$5", "3.5", "1,000", "10th", "6'2\"", "5km", "½", "XIV", "IV",
]  # fmt: skip
QUOTED = [
    '"Sully"', "'The Long Road'", "“Hamilton”", "‘Up’", '"The Lord of the Rings: The Two Towers"',
    '""', "''", '"', "'", "`", "``", "“", "”", "'s", "’s", "« Le Monde »", "„Faust“",
]  # fmt: skip
MARKS = [
    "(L)", "(L-R)", "[file photo]", "(", ")", "[", "]", "{", "}", "()", "[]", "...", "--",
    "—", "–", "-", "!", "?", ";", ":", ",", ".", "/", "\\", "&", "#", "@", "*", "|", "~",
    "%", "€", "£", "°", "·", "•", "…", "<", ">", "=", "+", "_", "^", "\t", "\n", " ",
]  # fmt: skip
OTHER_SCRIPTS = [
    "北京", "长城", "一个女孩在草地上奔跑", "Москва", "Красная площадь", "القاهرة",
    "مرحبا بالعالم", "東京タワー", "서울", "नमस्ते", "Ελλάδα", "שלום", "ไทย", "Ñandú", "ǅ",
    "ﬁsh", "İstanbul", "ß", "\u200b", "\u00a0", "\ufeff", "e\u0301",
]  # fmt: skip
EMOJI = ["😀", "✈️", "🚗", "🇩🇪", "👩‍👩‍👧", "❤️", "🔥", "🏳️‍🌈", "👍🏽", "☕", "🎉"]
POOLS = [PEOPLE, ROLES, MAKERS, MODELS, NOUNS, PHRASES, PLACES, DATES, QUOTED, MARKS]
POOLS += [OTHER_SCRIPTS, EMOJI]

WORD = st.one_of(
    *(st.sampled_from(pool) for pool in POOLS),
    st.text(max_size=4),  # anything at all, now and then
    st.characters(categories=["Cs"]),  # lone surrogates, which JSON can escape
)
MODEL_PHRASE = st.tuples(
    st.sampled_from(["A", "a", "An", "the", "The", ""]),
    st.sampled_from(MAKERS),
    st.sampled_from(MODELS),
    st.sampled_from(PHRASES + NOUNS),
    st.sampled_from(PLACES + DATES + NOUNS),
).map(" ".join)
SEPARATOR = st.sampled_from([" ", " ", " ", "", ", ", "-", "  ", ". "])
CASING = st.sampled_from([str, str, str.lower, str.upper, str.title, str.capitalize])


@st.composite
def alt_texts(draw) -> str:
    """An alt-text: words of the pools joined by separators, often around a carrier's or
    maker's model, in one of the casings the web writes."""
    words = draw(st.lists(WORD, max_size=14))
    if draw(st.booleans()):
        words.insert(draw(st.integers(0, len(words))), draw(MODEL_PHRASE))
    text = ""
    for word in words:
        text += draw(SEPARATOR) + word if text else word
    return draw(CASING)(text)


FUZZ = settings(
    max_examples=300,
    deadline=None,  # a parse takes milliseconds, but the machine running the tests is shared
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@FUZZ
@given(texts=st.lists(alt_texts(), min_size=1, max_size=4))
def test_alt_texts_of_real_vocabulary_never_raise(curator, texts):
    never_raises(curator, texts)


# --- the real texts of ../shared/data -------------------------------------------------------


def shared_texts(root: Path) -> dict[str, list[str]]:
    """The English texts of the shared data, by source, as the files give them: the
    released Conceptual Captions, both columns of the slug pairs, COCO's and Flickr8k's
    captions and Flickr8K-CN's English originals."""
    sources: dict[str, list[str]] = {}
    with open(root / "cc_val_captions.tsv", newline="") as f:
        rows = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        sources["cc_val_captions"] = [row["caption"] for row in rows]
    with open(root / "cc_val_slug_pairs_dev.tsv", newline="") as f:
        pairs = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    sources["slug_pairs.description_slug"] = [p["description_slug"] for p in pairs]
    sources["slug_pairs.conceptual_caption"] = [p["conceptual_caption"] for p in pairs]
    sources["coco_mini"] = [
        a["caption"]
        for path in sorted((root / "coco_mini").glob("captions_*.json"))
        for a in json.loads(path.read_text())["annotations"]
    ]
    with open(root / "flickr8k_mini" / "captions.csv", newline="") as f:
        sources["flickr8k_mini"] = [row["caption"] for row in csv.DictReader(f)]
    english = root / "flickr8k_cn" / "flickr8kenc.caption.txt"
    if english.is_file():
        with open(english, encoding="utf-8") as f:
            sources["flickr8k_cn.enc"] = [
                line.split(" ", 1)[1].strip() for line in f if " " in line
            ]
    return sources


def cased_and_lowercased(sources: dict[str, list[str]]) -> list[str]:
    """Every text as it is and lowercased, each distinct string once, in a fixed order."""
    texts = (v for texts in sources.values() for t in texts for v in (t, t.lower()))
    return list(dict.fromkeys(texts))


SAMPLE = 3000


@pytest.mark.realdata
def test_a_sample_of_the_shared_texts_never_raises(curator, real_data):
    texts = cased_and_lowercased(shared_texts(real_data))
    never_raises(curator, random.Random(30).sample(texts, SAMPLE))


@pytest.mark.slow
@pytest.mark.realdata
def test_all_the_shared_texts_never_raise(curator, real_data):
    texts = cased_and_lowercased(shared_texts(real_data))
    assert len(texts) > 90_000
    never_raises(curator, texts)
