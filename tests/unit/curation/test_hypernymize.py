"""Hypernymization rules (spec §4), one test per rule, on the real spaCy pipeline and WordNet."""

from __future__ import annotations

import pytest

from conceptual.metrics import token_f1
from conceptual.text.hypernymize import RULE_NAMES, RULES, HypernymConfig, Hypernymizer, hooks
from conceptual.text.hypernymize.registry import RuleStep


@pytest.fixture(scope="module")
def hypernymizer(nlp):
    return Hypernymizer(HypernymConfig(), nlp=nlp)


@pytest.fixture(scope="module")
def lenient(nlp):
    """Keeps one-word results, for the spec's short examples."""
    return Hypernymizer(HypernymConfig(min_tokens=1), nlp=nlp)


def caption(hypernymizer, text: str) -> str | None:
    [result] = hypernymizer.transform([text])
    return result.caption


def test_location_phrase_goes_and_other_phrases_stay(hypernymizer):
    [result] = hypernymizer.transform(["Crowd at a concert in Los Angeles"])
    assert result.caption == "crowd at a concert"
    assert result.entities == [
        {
            "text": "in Los Angeles",
            "label": "LOCATION_PP",
            "action": "removed",
            "replacement": None,
            "source": "rule",
        }
    ]
    assert result.types == ["concert", "crowd"]


def test_nationality_modifier_goes(lenient):
    [result] = lenient.transform(["Italian cuisine"])
    assert result.caption == "cuisine"
    assert [(e["text"], e["label"], e["action"]) for e in result.entities] == [
        ("Italian", "NORP", "removed")
    ]


def test_proper_noun_modifier_goes(hypernymizer):
    assert caption(hypernymizer, "The Paraguay flag on a wall") == "the flag on a wall"


def test_same_heads_merge_into_a_plural(lenient):
    assert caption(lenient, "artist and artist") == "artists"
    assert caption(lenient, "an actor and an actor on stage") == "actors on stage"


def test_counts_and_measures_go(hypernymizer):
    assert caption(hypernymizer, "Two sculptures in a park") == "sculptures in a park"
    assert caption(hypernymizer, "A dozen roses on a table") == "roses on a table"
    assert caption(hypernymizer, "A 2 litre bottle of water") == "a bottle of water"


def test_dates_go(hypernymizer):
    [result] = hypernymizer.transform(["Fireworks over the city on July 4, 2015"])
    assert result.caption == "fireworks over the city"
    assert [(e["text"], e["label"]) for e in result.entities] == [("July 4, 2015", "DATE")]


def test_wordnet_instance_hypernym_replaces_a_name(hypernymizer):
    [result] = hypernymizer.transform(["Albert Einstein giving a lecture"])
    assert result.caption == "physicist giving a lecture"
    assert result.entities == [
        {
            "text": "Albert Einstein",
            "label": "PERSON",
            "action": "replaced",
            "replacement": "physicist",
            "source": "wordnet",
        }
    ]
    assert result.types == ["lecture", "physicist"]


def test_wordnet_heads_are_short_common_words(hypernymizer):
    # national capital -> city, European country -> country
    assert hypernymizer.lexicon.instance("paris") == ("GPE", "city")
    assert hypernymizer.lexicon.instance("spain") == ("GPE", "country")
    # a lone word naming a person is mostly someone else's first name or surname
    assert hypernymizer.lexicon.instance("jones") is None


def test_entity_type_is_the_fallback_and_equal_replacements_merge(hypernymizer):
    [result] = hypernymizer.transform(["Calista Flockhart and Harrison Ford at the premiere"])
    assert result.caption == "people at the premiere"
    assert [(e["replacement"], e["source"]) for e in result.entities] == [
        ("person", "entity_type"),
        ("person", "entity_type"),
    ]
    assert result.types == ["person", "premiere"]


def test_unknown_celebrity_becomes_person(hypernymizer):
    # WordNet cannot know Priyanka Chopra; Google's Knowledge Graph said "actor".
    text = "Former Miss World Priyanka Chopra on the red carpet"
    assert caption(hypernymizer, text) == "former person on the red carpet"


def test_a_title_noun_replaces_the_name(hypernymizer):
    assert caption(hypernymizer, "Actor Colin Farrell attends a screening") == (
        "actor attends a screening"
    )
    assert caption(hypernymizer, "The singer, Adele, on stage") == "the singer on stage"
    assert caption(hypernymizer, "Actors Tommy Lee Jones and Faye Dunaway on the set") == (
        "actors on the set"
    )


def test_a_name_right_after_an_animal_is_a_pets_not_a_person(hypernymizer):
    # The small model parses "cat Chelsea" as two subjects, so no title rule saw the cat.
    for text in (
        "Our cat Chelsea resting near the window",
        "our cat chelsea resting near the window",
    ):
        assert caption(hypernymizer, text) == "our cat resting near the window"
    # "named" is no title: the released captions say "a picture of a cat named person"
    # (cc_val_captions.tsv), and so does this.
    assert (
        caption(hypernymizer, "a puppy named Max on the sofa") == "a puppy named person on the sofa"
    )


def test_common_words_tagged_as_names_stay(hypernymizer):
    assert caption(hypernymizer, "Fireworks light up the night sky") == (
        "fireworks light up the night sky"
    )


def test_caseless_text_gets_its_names_capitalized(hypernymizer):
    text = "crowd at a concert in los angeles"
    assert hypernymizer.restore_case(text) == "crowd at a concert in Los Angeles"
    assert hypernymizer.restore_case("Crowd in los angeles") == "Crowd in los angeles"
    assert caption(hypernymizer, text) == "crowd at a concert"


def test_census_names_find_people_in_caseless_text(hypernymizer):
    """A given name and a surname are a person, though the words are common or spaCy
    misses them; two common words are not ("will power")."""
    assert hypernymizer.restore_case("actress hope lange on the set") == (
        "actress Hope Lange on the set"
    )
    assert hypernymizer.restore_case("sheer will power on the track") == (
        "sheer will power on the track"
    )
    assert caption(hypernymizer, "actress hope lange smiles on the set") == (
        "actor smiles on the set"
    )
    assert caption(hypernymizer, "singer carrie underwood during a concert") == (
        "singer during a concert"
    )


def test_census_names_correct_the_small_models_labels(hypernymizer):
    """spaCy's ORG for a person's name would make its last word a class noun ("green");
    a run of places ending in a country is a place, whatever the tagger says."""
    assert caption(hypernymizer, "Eva Green attending a premiere") == (
        "person attending a premiere"
    )
    assert (
        caption(hypernymizer, "Tasha attends the gala dinner") == "person attends the gala dinner"
    )
    assert caption(hypernymizer, "top of a white church in bari italy against blue sky") == (
        "top of a white church against blue sky"
    )
    assert hypernymizer.knowledge.is_full_name("eva", "green")
    assert not hypernymizer.knowledge.is_full_name("victoria", "station")  # a place noun
    assert not hypernymizer.knowledge.is_full_name("bari", "italy")  # a place name


def test_named_place_nouns_go_with_their_phrase(hypernymizer):
    """ "in Bondi beach" is a location phrase as "in Bondi" is; "in a London park" is a park."""
    assert caption(hypernymizer, "Surfers wait for waves in Bondi beach") == (
        "surfers wait for waves"
    )
    assert caption(hypernymizer, "Passengers queue for taxis at Luton airport") == (
        "passengers queue for taxis"
    )
    assert caption(hypernymizer, "A squirrel on a bench in a London park") == (
        "a squirrel on a bench in a park"
    )
    assert caption(hypernymizer, "A woman in a Venetian mask at a ball") == (
        "a woman in a mask at a ball"
    )


def test_a_name_before_its_title_takes_its_article_along(hypernymizer):
    assert caption(hypernymizer, "the Jardin Majorelle, the gardens of the painter") == (
        "the gardens of the painter"
    )


def test_plurals(hypernymizer):
    plural = hypernymizer.lexicon.plural
    assert [plural(w) for w in ("person", "child", "woman", "city", "box", "brother")] == [
        "people",
        "children",
        "women",
        "cities",
        "boxes",
        "brothers",  # not WordNet's archaic "brethren"
    ]
    assert plural("football player") == "football players"


def test_too_short_is_rejected(hypernymizer):
    [result] = hypernymizer.transform(["Paris"])
    assert result.caption is None
    assert result.rejection.reason == "too_short"
    [empty] = hypernymizer.transform([""])
    assert empty.rejection.reason == "too_short"


def test_no_noun_left_is_rejected(hypernymizer):
    [result] = hypernymizer.transform(["I walked out looking like this."])
    assert result.rejection.reason == "no_noun_left"


def test_unresolved_names_are_rejected_on_request(nlp):
    strict = Hypernymizer(HypernymConfig(reject_unresolved=True), nlp=nlp)
    [result] = strict.transform(["Former Miss World Priyanka Chopra on the red carpet"])
    assert result.caption is None
    assert result.rejection.reason == "unresolved_entity"


def test_token_f1():
    assert token_f1("actors attend the premiere", "Actors attend the premiere") == 1.0
    assert token_f1("a b", "a c") == 0.5
    assert token_f1("", "") == 1.0
    assert token_f1("a", "") == 0.0


def test_location_phrase_goes_with_the_whole_name(hypernymizer):
    # The entity is "the University of Oxford": its "of Oxford" must not be left behind.
    assert (
        caption(hypernymizer, "Students celebrate their graduation at the University of Oxford")
        == "students celebrate their graduation"
    )


def test_complex_preposition_keeps_its_object_as_a_concept(hypernymizer):
    # Removing "of Tower Bridge" would leave "in front"; the name becomes what it is.
    result = caption(hypernymizer, "Tourists wait in front of Tower Bridge in London")
    assert result.startswith("tourists wait in front of ") and "london" not in result
    assert (
        caption(hypernymizer, "A couple kisses next to the Eiffel Tower")
        == "a couple kisses next to the tower"
    )


def test_title_mistagged_as_verb_still_keeps_the_name_out(hypernymizer):
    # The small tagger reads "actress" here as a verb (compound); it is still the title.
    result = caption(hypernymizer, "Angelina Jolie and actress Meryl Streep pose for photographers")
    assert "actress actress" not in result and result.endswith("pose for photographers")


# --- round two (issue 20): one test per class of defect, on alt-texts of our own ---------


def test_names_the_transformation_resolves_are_no_vocabulary_problem():
    # "Kericho" is rarer than the vocabulary rule allows, but the place phrase goes.
    from conceptual.text.curate import TextCurator

    curator = TextCurator()
    [kept] = curator.process(["A Kenyan farmer harvests tea near Kericho, Kenya, on March 3."])
    assert (kept.caption, kept.rejection) == ("a farmer harvests tea .", None)
    # the rule still judges lowercase words at once, and a rare name the caption kept
    assert curator.filters.check("A dog runs aross the street")[1].reason == "out_of_vocabulary"
    assert curator.filters.rare_names("Tea near Kericho, Kenya") == {"kericho"}


def test_removals_leave_no_dangling_punctuation(hypernymizer):
    cases = {
        "Tourists walk along the beach in Cancun, Mexico.": "tourists walk along the beach .",
        "A view of the skyline of Chicago, Illinois, from a boat.": (
            "a view of the skyline from a boat ."
        ),
        "President Emmanuel Macron meets German Chancellor Angela Merkel at the Elysee "
        "Palace in Paris, France, on May 15, 2017.": "president meets chancellor .",
        'Actor Tom Hanks attends the premiere of "Sully" at the Lincoln Center in New York.': (
            "actor attends the premiere ."
        ),
    }
    for text, expected in cases.items():
        result = caption(hypernymizer, text)
        assert result == expected
        assert hypernymizer.artifacts(result) == []


def test_artifacts_are_found(hypernymizer):
    assert hypernymizer.artifacts("a farmer harvests tea in , country .") == ["'in' before ','"]
    assert hypernymizer.artifacts("a farmer , . harvests tea") == [
        "mark '.' at the start or after a mark"
    ]
    assert hypernymizer.artifacts("the poster ' person ' on a wall") == [
        "quotes around a lone 'person'"
    ]
    assert hypernymizer.artifacts("a woman wearing person loafers") == [
        "'person' modifying 'loafers'"
    ]
    assert hypernymizer.artifacts("the the gardens of the palace") == ["'the' before 'the'"]
    assert hypernymizer.artifacts("author : a life in photography") == []


def test_named_events_and_works_become_their_class(hypernymizer):
    assert (
        caption(
            hypernymizer,
            "Singer Adele performs during the 2016 Glastonbury Festival at Worthy Farm in "
            "Pilton, England.",
        )
        == "singer performs during the festival ."
    )
    assert (
        caption(hypernymizer, "Fans cheer as runners pass during the London Marathon.")
        == "fans cheer as runners pass during the marathon ."
    )
    # a title in quotes after the noun that says what it is goes with its quotes
    assert (
        caption(hypernymizer, "Author Jane Smith signs copies of her new book 'The Long Road'.")
        == "author signs copies of her new book ."
    )


def test_caseless_ceremonies_and_festivals_lose_their_names(hypernymizer):
    # no capitals tell the name from a description: what modifies the event goes
    assert caption(hypernymizer, "singer arrives at the 2012 mtv video music awards at") == (
        "singer arrives at the awards at"
    )
    assert caption(hypernymizer, "a band performs at the riverside rock festival") == (
        "a band performs at the festival"
    )
    # a name inside the event's name no longer counts as a concept of the caption
    [result] = hypernymizer.transform(["musician and wife arrive at the 46th annual grammy awards"])
    assert result.caption == "musician and wife arrive at the awards"
    assert "person" not in result.types
    # a festival that modifies a noun is no event, and cased text keeps a lowercase kind
    assert caption(hypernymizer, "a music festival poster on a brick wall") == (
        "a music festival poster on a brick wall"
    )
    assert caption(hypernymizer, "Crowds dance at a music festival.") == (
        "crowds dance at a music festival ."
    )


def test_asides_in_brackets_go(hypernymizer):
    assert caption(
        hypernymizer, "Actor John Doe (L) and his wife Jane Roe attend the premiere."
    ) == ("actor and his wife attend the premiere .")
    assert caption(
        hypernymizer, "A bowl of pho (Vietnamese noodle soup [with beef]) on a wooden table."
    ) == ("a bowl of pho on a wooden table .")
    # a bracket nothing closes goes alone; an emoticon is no bracket
    assert caption(hypernymizer, "A red barn (built in 1890 in a snowy field.") == (
        "a red barn built in a snowy field ."
    )
    assert caption(hypernymizer, "my dog sleeping on the new sofa :)") == (
        "my dog sleeping on the new sofa :)"
    )
    assert hypernymizer.artifacts("a man ( ) on a bench") == ["brackets around nothing"]
    without = Hypernymizer(HypernymConfig(disabled_rules=["asides"]), nlp=hypernymizer.nlp)
    assert caption(without, "A bowl of pho (noodle soup) on a table.") == (
        "a bowl of pho ( noodle soup ) on a table ."
    )


def test_a_names_class_is_its_head_noun(hypernymizer):
    assert caption(hypernymizer, "The Museum of Modern Art reopened its doors to visitors.") == (
        "the museum reopened its doors to visitors ."
    )
    assert caption(hypernymizer, "Crowds gather for the Festival of Lights.") == (
        "crowds gather for the festival ."
    )


def test_brand_and_organization_modifiers_go(hypernymizer):
    assert caption(hypernymizer, "A woman in a Gucci-style dress on a street.") == (
        "a woman in a style dress on a street ."
    )
    assert (
        caption(
            hypernymizer, "A woman wearing Gucci loafers and a Prada bag walks down the street."
        )
        == "a woman wearing loafers and a bag walks down the street ."
    )
    assert (
        caption(hypernymizer, "A Starbucks coffee cup on a table in a cafe.")
        == "a coffee cup on a table in a cafe ."
    )


def test_the_text_names_the_role(hypernymizer, lenient):
    assert (
        caption(hypernymizer, "Jamie Foxx, the singer, poses for photographers in Los Angeles.")
        == "the singer poses for photographers ."
    )
    assert caption(lenient, "Musician Bruce Springsteen performs at MetLife Stadium.") == (
        "musician performs ."
    )
    # spaCy tags this one ORG: a title word heading a name says it is a person; and the
    # released captions name the role, not its female form
    assert caption(hypernymizer, "Actress Priyanka Chopra on the red carpet") == (
        "actor on the red carpet"
    )
    assert caption(hypernymizer, "Actresses Meryl Streep and Glenn Close attend the premiere.") == (
        "actors attend the premiere ."
    )
    assert caption(hypernymizer, "A Kenyan farmer harvests tea in a field.") == (
        "a farmer harvests tea in a field ."
    )


def test_places_resolve_offline_and_location_phrases_go_whole(hypernymizer):
    place_kind = hypernymizer.place_kind
    assert [place_kind(p) for p in ("Kericho", "Kenya", "Illinois", "Bath")] == [
        "city",
        "country",
        "state",
        None,  # a common word first
    ]
    [result] = hypernymizer.transform(["Workers pick tea in Kericho, Kenya, in the morning."])
    assert result.caption == "workers pick tea in the morning ."
    assert [e["text"] for e in result.entities] == ["in Kericho, Kenya"]
    # a dateline heading the text goes
    assert caption(hypernymizer, "Rabat, Morocco - people at a market in the old town.") == (
        "people at a market in the old town ."
    )
    # a town WordNet lacks, outside any location phrase, becomes its kind
    [result] = hypernymizer.transform(["Kericho is a town surrounded by tea plantations."])
    assert result.caption.startswith("city is a town")
    assert result.entities[0]["source"] == "gazetteer"


def test_the_caption_is_the_first_sentence(hypernymizer):
    # a second sentence says what no image shows; the released captions hold one sentence
    assert caption(
        hypernymizer,
        "A red fox crossing a snowy meadow at dawn. The fox population has grown since 2010.",
    ) == ("a red fox crossing a snowy meadow at dawn .")
    # a short first sentence is no caption: the cut waits for a description
    assert caption(hypernymizer, "Wow. A heron stands in shallow water.") == (
        "wow . a heron stands in shallow water ."
    )


def test_stock_tags_start_the_second_sentence_even_unmarked(hypernymizer):
    # a slug lost the tag sentence's mark; the caption ends where the description did
    assert caption(
        hypernymizer, "wooden rowing boat tied to a jetty on a calm lake vector illustration"
    ) == ("wooden rowing boat tied to a jetty on a calm lake .")
    assert caption(hypernymizer, "a stack of pancakes on a plate concept of breakfast") == (
        "a stack of pancakes on a plate ."
    )
    assert caption(hypernymizer, "old fishing boats on a pebble beach photo by john smith") == (
        "old fishing boats on a pebble beach ."
    )
    # the tag that names the image is its description, and stays
    assert caption(hypernymizer, "vector illustration of a lighthouse on a rocky island") == (
        "vector illustration of a lighthouse on a rocky island"
    )
    off = Hypernymizer(HypernymConfig(disabled_rules=["first_sentence"]), nlp=hypernymizer.nlp)
    assert caption(off, "a stack of pancakes on a plate concept of breakfast") == (
        "a stack of pancakes on a plate concept of breakfast"
    )


def test_titles_after_a_showing_go_in_caseless_text(hypernymizer):
    # a title is a name whatever its words ("night falls on manhattan")
    assert caption(
        hypernymizer, "the actor attends the premiere of night falls on manhattan at the theatre"
    ) == ("the actor attends the premiere at the theatre")
    assert caption(hypernymizer, "Actor attends the premiere of The Quiet Harbour.") == (
        "actor attends the premiere ."
    )
    # an article and common words describe the work instead
    assert caption(hypernymizer, "a director at the premiere of the film") == (
        "a director at the premiere of the film"
    )


def test_indefinite_articles_agree_with_the_next_word(hypernymizer):
    assert caption(hypernymizer, "a apple and a orange on a old table") == (
        "an apple and an orange on an old table"
    )
    assert caption(hypernymizer, "a university student under a umbrella") == (
        "a university student under an umbrella"
    )


def test_stock_descriptions_end_on_their_background(hypernymizer):
    assert caption(hypernymizer, "a black cat on a black background winks at the camera") == (
        "a black cat on a black background ."
    )
    # a preposition or conjunction goes on with the same sentence
    assert caption(hypernymizer, "a vase on a white background with a shadow") == (
        "a vase on a white background with a shadow"
    )


def test_caseless_places_tagged_as_people(hypernymizer):
    # nothing happens in a person: a name after "in" the census lists do not know is a place
    assert caption(hypernymizer, "tourists visiting the white marble palace in agra uttar") == (
        "tourists visiting the white marble palace"
    )
    # a place noun before the name says what it is, and its preposition keeps its object
    assert caption(hypernymizer, "a kayak on the river itchen in a hot summer evening") == (
        "a kayak on the river in a hot summer evening"
    )
    # with capitals, spaCy's person stands, and WordNet's
    assert caption(hypernymizer, "A fisherman sits near John Smith on the pier") == (
        "a fisherman sits near explorer on the pier"
    )


def test_datelines_go(hypernymizer):
    news = (
        "LOS ANGELES, CA - JANUARY 10: Actress Jane Doe arrives at the premiere at the"
        " Chinese Theatre on January 10, 2017 in Hollywood, California."
    )
    assert caption(hypernymizer, news) == "actor arrives at the premiere at the theatre ."
    # a slug's places around a date, and a date that ends a sentence
    assert caption(
        hypernymizer, "june 4 2015 denver colorado usa a cyclist rides past a mural"
    ) == ("a cyclist rides past a mural")
    assert caption(
        hypernymizer, "a boat is stranded on a beach in galveston texas sept 14 2008 a storm surge"
    ) == ("a boat is stranded on a beach .")
    # "may" alone is no month, and a date inside a phrase is rule 2's
    assert caption(hypernymizer, "may the force be with you on a poster in a shop window") == (
        "may the force be with you on a poster in a shop window"
    )
    assert caption(hypernymizer, "a car covered in snow during the february 2012 snowstorm") == (
        "a car covered in snow during the snowstorm"
    )


def test_a_doc_keep_refuses_is_not_read_for_names(hypernymizer):
    """parse's second pass (lemmas, entities) runs on the docs `keep` passes, and on those
    whose bounds read entities (a dateline's places), which are then cut alike."""
    texts = [
        "Albert Einstein giving a lecture in Berlin",
        "Lecture by Albert Einstein in Berlin",
        "june 4 2015 denver colorado usa a cyclist rides past a mural",
        "A red fox crossing a snowy meadow at dawn. The fox population has grown since 2010.",
    ]

    def annotations(doc):
        return [(t.text, t.pos_, t.dep_, t.lemma_, t.ent_type_) for t in doc]

    full = hypernymizer.parse(texts)
    kept = hypernymizer.parse(texts, keep=lambda doc: doc[0].text != "Lecture")
    assert [d.text for d in kept] == [d.text for d in full]
    assert [d.text for d in kept][2:] == ["a cyclist rides past a mural", full[3].text]
    assert not kept[1].has_annotation("ENT_IOB") and not kept[1].has_annotation("LEMMA")
    assert [t.dep_ for t in kept[1]] == [t.dep_ for t in full[1]]
    assert [annotations(d) for i, d in enumerate(kept) if i != 1] == [
        annotations(d) for i, d in enumerate(full) if i != 1
    ]


def test_a_carriers_or_makers_model_is_what_they_make(hypernymizer, lenient):
    # real alt-texts that raised IndexError in _without_titles: "747" labelled PRODUCT
    # left no word of a name once its number was trimmed (issue 30)
    [result] = hypernymizer.transform(["A Lufthansa 747 landing at Frankfurt"])
    assert result.caption == "an airliner landing"
    assert [(e["text"], e["label"], e["replacement"]) for e in result.entities] == [
        ("Lufthansa 747", "PRODUCT", "airliner"),
        ("at Frankfurt", "LOCATION_PP", None),
    ]
    assert result.types == ["airliner", "landing"]
    assert caption(hypernymizer, "a delta 767 parked at the gate in atlanta") == (
        "an airliner parked at the gate"
    )
    assert caption(hypernymizer, "A Delta 767 parked at the gate in Atlanta.") == (
        "an airliner parked at the gate ."
    )
    # codes with letters and series, makers of several words, carriers before makers
    assert caption(hypernymizer, "An Airbus A380 taking off") == "an airliner taking off"
    assert caption(hypernymizer, "a Boeing 737-800 on the runway") == "an aircraft on the runway"
    assert caption(hypernymizer, "A red Ferrari F40 parked on the street") == (
        "a red car parked on the street"
    )
    assert caption(
        hypernymizer, "A Lufthansa Boeing 747-400 landing at Frankfurt airport, Germany."
    ) == ("an airliner landing .")
    # a model modifying a noun goes, as names do; plural codes are plural
    assert caption(lenient, "A Boeing 747 cockpit") == "a cockpit"
    assert caption(hypernymizer, "two Delta 747s at the gate") == "airliners at the gate"
    # a number nothing in the list makes is a number, even labelled a product
    assert caption(hypernymizer, "A 747 landing at sunset") == "a landing at sunset"
    assert caption(hypernymizer, "Silver and blue car marked 104 raises dust on road") == (
        "silver and blue car marked 104 raises dust on road"
    )
    off = Hypernymizer(HypernymConfig(disabled_rules=["models"]), nlp=hypernymizer.nlp)
    assert "airliner" not in caption(off, "A Delta 767 parked at the gate")


def test_each_rule_can_be_switched_off(nlp):
    text = "Singer Adele performs during the 2016 Glastonbury Festival."
    without = Hypernymizer(HypernymConfig(disabled_rules=["class_heads"]), nlp=nlp)
    assert caption(without, text) == "singer performs during the event ."
    with pytest.raises(ValueError, match="cannot disable .'gazeteer'.*'gazetteer'"):
        HypernymConfig(disabled_rules=["gazeteer"])


@pytest.mark.parametrize("rule", RULES, ids=RULE_NAMES)
def test_each_rule_does_what_its_example_shows(hypernymizer, rule):
    """Every registered rule: its example's caption with all rules on, another without it."""
    text, expected = rule.example
    assert caption(hypernymizer, text) == expected
    without = Hypernymizer(HypernymConfig(disabled_rules=[rule.name]), nlp=hypernymizer.nlp)
    assert caption(without, text) != expected


def test_the_registry_lists_each_rule_once_with_real_settings():
    assert len(set(RULE_NAMES)) == len(RULES) == len(RULE_NAMES)
    steps = [step for hook in hooks.HOOKS for step in hook]
    assert all(isinstance(step, RuleStep) and step.rules for step in steps)
    assert all(set(rule.config) <= set(HypernymConfig.model_fields) for rule in RULES)


# Alt-texts of our own in the style of news and stock-photo captions (no test list of the
# dev set): whatever each becomes, no removal may leave an artifact behind.
NEWS_AND_STOCK_ALT_TEXTS = [
    "A Kenyan farmer harvests tea near Kericho, Kenya, on March 3, 2019.",
    "Singer Adele performs during the 2016 Glastonbury Festival at Worthy Farm in Pilton, England.",
    "A woman wearing Gucci loafers and a Prada bag walks down the street.",
    "Musician Tom Odell performs on stage at the O2 Arena in London.",
    'Actor Tom Hanks attends the premiere of "Sully" at the Lincoln Center in New York.',
    "Fans cheer as runners pass during the London Marathon on April 23, 2017.",
    "Jamie Foxx, the singer, poses for photographers at the 2015 Grammy Awards in Los Angeles.",
    "Tourists walk along the beach in Cancun, Mexico.",
    "The Eiffel Tower lit up at night in Paris, France.",
    "A view of the skyline of Chicago, Illinois, from Lake Michigan.",
    "Barack Obama speaks at a rally in Ohio.",
    "Cyclists ride past fans during the Tour de France in the Alps.",
    "Author Jane Smith signs copies of her new book 'The Long Road' at a bookstore.",
    "Rabat, Morocco - people at a market in the old town.",
    "Workers assemble cars at the Toyota factory in Georgetown, Kentucky.",
    "Chef Marco Pierre White cooks in his restaurant in Bath.",
    "Players of Manchester United celebrate a goal against Chelsea at Old Trafford.",
    "A Nike shoe on display at a store in Berlin, Germany.",
    "Oscar winner Julia Roberts arrives at the Cannes Film Festival.",
    "The band Coldplay performs during the Super Bowl halftime show at Levi's Stadium.",
    "Supporters of the Green Party march through central London on Saturday.",
    "President Emmanuel Macron meets German Chancellor Angela Merkel at the Elysee Palace in Paris, France, on May 15, 2017.",
    "A surfer rides a wave at Pipeline on the North Shore of Oahu, Hawaii.",
    "Students from Harvard University celebrate during commencement in Cambridge, Massachusetts.",
    "Actress Emma Stone arrives at the 89th Academy Awards in Hollywood, California.",
    "The Golden Gate Bridge shrouded in fog, San Francisco.",
    "Firefighters battle a blaze in Malibu, California, on November 9, 2018.",
    "A vendor sells vegetables at a market in Hanoi, Vietnam.",
    "Rafael Nadal of Spain plays a forehand during the French Open at Roland Garros.",
    "Hikers on a trail in Yosemite National Park.",
    "Musician Bruce Springsteen performs at MetLife Stadium in East Rutherford, New Jersey.",
    "A bowl of ramen at a restaurant in Tokyo's Shibuya district.",
    "Tourists photograph the Colosseum in Rome, Italy.",
    "A model presents a creation by designer Stella McCartney during Paris Fashion Week.",
    "Portrait of a smiling senior man, isolated on white background.",
    "Business people shaking hands in a modern office.",
    "Christmas tree decorated with red baubles in the living room.",
    "Runners compete in the Boston Marathon in Boston, Massachusetts, April 17, 2017.",
    'The cast of "Hamilton" performs at the Tony Awards at Radio City Music Hall in New York City.',
    "A farmer drives a tractor through a wheat field near Wichita, Kansas.",
    "Chef Gordon Ramsay cooks at a charity event in London.",
    "A Starbucks coffee cup on a table in a cafe.",
    "Crowds gather at the Brandenburg Gate in Berlin to celebrate New Year's Eve.",
    "Singer Taylor Swift, wearing a Versace dress, arrives at the MTV Video Music Awards.",
    "Boats in the harbour of Valletta, Malta, at sunset.",
    'A woman reads the novel "Pride and Prejudice" in a park.',
    "Soldiers of the British Army parade in front of Buckingham Palace.",
    "Pope Francis waves to the crowd in St. Peter's Square at the Vatican.",
    "A young boy plays soccer on a beach in Rio de Janeiro, Brazil.",
    "Detail of a Louis Vuitton handbag in a shop window in Milan.",
    "Kenyan runner Eliud Kipchoge crosses the finish line in Vienna, Austria.",
    "A Tesla car charges at a station in Oslo, Norway.",
    "Snow covers the peaks of the Alps near Chamonix, France.",
    "Fans of Liverpool FC celebrate outside Anfield stadium.",
    "Jazz musicians perform during the New Orleans Jazz & Heritage Festival.",
    "The author, Stephen King, signs books at a store in Bangor.",
    "An aerial view of the Great Barrier Reef off the coast of Queensland, Australia.",
    "A couple walks their dog in Central Park, New York, in autumn.",
    "Workers at the Ford plant in Dearborn, Michigan, assemble trucks.",
    "A Buddhist monk walks past a temple in Luang Prabang, Laos.",
    "NEW YORK, NY - MAY 02: Model Jane Roe attends the Met Gala at the Metropolitan Museum"
    " of Art on May 2, 2016 in New York City.",
    "LONDON, ENGLAND - JUNE 21: Fans watch the match on a big screen in Hyde Park.",
    "Young woman doing yoga on a mat at home. Healthy lifestyle concept.",
    "Coffee cup with latte art on a wooden table, top view. Copy space.",
    "Seamless pattern with lemons and leaves. Vector illustration for fabric",
    "Businessman climbing a ladder to success concept of growth",
    "Portrait of a golden retriever on a blue background studio shot",
    "Actor John Doe arrives at the premiere of Midnight Garden at the Odeon in Leicester Square.",
    "England head coach Tom Brown (R) talks with captain Sam Green during a nets session.",
    "(L-R) Actors Jane Roe and John Doe arrive at the premiere of Quiet Streets in London.",
    "A plate of jollof rice (a West African dish) at a street market in Lagos, Nigeria.",
    "Fans of Manchester United (in red) celebrate at Old Trafford [file photo].",
]


def test_no_artifacts_on_news_and_stock_alt_texts(hypernymizer):
    results = hypernymizer.transform(NEWS_AND_STOCK_ALT_TEXTS)
    captions = [r.caption for r in results if r.caption]
    assert len(captions) >= 0.9 * len(NEWS_AND_STOCK_ALT_TEXTS)
    assert {c: hypernymizer.artifacts(c) for c in captions if hypernymizer.artifacts(c)} == {}


def test_the_alt_text_as_caption_keeps_the_names_and_the_same_records():
    """text.caption=alt_text (Figure 3's comparison): the cleaned alt-text in the captions'
    style, where the same rules keep and reject the same texts."""
    from conceptual.text.curate import TextCurationConfig, TextCurator

    texts = ["A Kenyan farmer harvests tea near Kericho, Kenya, on March 3.", "click here"]
    hypernymized = TextCurator().process(texts)
    raw = TextCurator(TextCurationConfig(caption="alt_text")).process(texts)
    assert hypernymized[0].caption == "a farmer harvests tea ."
    assert raw[0].caption == "a kenyan farmer harvests tea near kericho , kenya , on march 3 ."
    assert raw[0].types == hypernymized[0].types  # what the entity-frequency rule counts
    assert [o.rejection for o in raw] == [o.rejection for o in hypernymized]
    assert raw[1].caption is None and raw[1].rejection is not None
