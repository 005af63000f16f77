"""Classifier labels to WordNet terms, and the image&text overlap filter."""

from __future__ import annotations

import pytest

from conceptual.vision.cnn import imagenet_classes
from conceptual.vision.labels import LabelMatcher, OverlapConfig, caption_nouns, caption_words

ESPRESSO, TABBY, HOT_DOG, SEA_LION, JUNCO, COFFEE_MUG = (
    "n07920052",
    "n02123045",
    "n07697537",
    "n02077923",
    "n01534433",
    "n03063599",
)
TRIPOD, FLY, TUB = "n04485082", "n02190166", "n04493381"
BARREL, CAROUSEL, SKI, CAN_OPENER = "n02795169", "n02966193", "n04228054", "n02951585"
GENERIC = {"entity", "object", "whole", "organism", "artifact", "thing", "covering", "structure"}


@pytest.fixture(scope="module")
def matcher() -> LabelMatcher:
    return LabelMatcher()


def label(wnid: str, score: float = 0.9) -> dict:
    return {"wnid": wnid, "name": dict(imagenet_classes())[wnid], "score": score}


def test_espresso_stands_for_coffee(matcher):
    assert {"espresso", "coffee", "beverage"} <= matcher.terms(ESPRESSO)


def test_tabby_stands_for_cat(matcher):
    assert {"tabby cat", "cat"} <= matcher.terms(TABBY)


def test_no_label_expands_to_generic_synsets(matcher):
    for wnid, _ in imagenet_classes():
        assert not matcher.terms(wnid) & GENERIC, wnid


def test_a_caption_mentioning_the_label_is_kept(matcher):
    assert matcher.match("A cup of coffee on a wooden table", [label(ESPRESSO)]) == (
        ["coffee"],
        None,
    )


def test_morphology_matches(matcher):
    matched, rejection = matcher.match("Two cats sleeping", [label(TABBY)])
    assert rejection is None and matched == ["cats"]


def test_an_unrelated_caption_is_rejected_with_the_labels(matcher):
    matched, rejection = matcher.match("A red sports car", [label(ESPRESSO), label(TABBY, 0.08)])
    assert matched == []
    assert rejection.reason == "no_label_overlap"
    assert rejection.detail == "labels: espresso, tabby cat"


def test_no_labels_is_its_own_reason(matcher):
    _, rejection = matcher.match("A cup of coffee", [])
    assert rejection.reason == "no_labels"


def test_multi_word_names_match_as_phrases(matcher):
    assert matcher.match("A hot-dog with mustard", [label(HOT_DOG)]) == (["hot dog"], None)
    assert matcher.match("A coffee mug on a desk", [label(COFFEE_MUG)]) == (["coffee mug"], None)


def test_head_words_match_only_what_the_label_is(matcher):
    assert matcher.match("A small bird on a branch", [label(JUNCO)]) == (["bird"], None)
    for caption, wnid in [("A dog in the park", HOT_DOG), ("A lion in the grass", SEA_LION)]:
        assert matcher.match(caption, [label(wnid)])[1].reason == "no_label_overlap"


def test_head_words_can_be_turned_off():
    strict = LabelMatcher(OverlapConfig(head_words=False))
    assert strict.match("A small bird on a branch", [label(JUNCO)])[1] is not None


def test_only_the_best_confident_labels_count(matcher):
    weak = [label(ESPRESSO, 0.6), label(TABBY, 0.01)]
    assert matcher.match("A cat on a sofa", weak)[1].reason == "no_label_overlap"
    beyond_top_k = [label(ESPRESSO, 0.6)] * 5 + [label(TABBY, 0.3)]
    assert matcher.match("A cat on a sofa", beyond_top_k)[1].reason == "no_label_overlap"


def test_an_unsure_best_label_still_counts(matcher):
    assert matcher.match("A cat on a sofa", [label(TABBY, 0.01)]) == (["cat"], None)


def test_caption_words_drop_punctuation():
    assert caption_words("A hot-dog's bun!") == ["a", "hot", "dog", "s", "bun"]


def test_a_verb_does_not_match_a_noun_label(matcher):
    """ "stands" is no tripod's `stand`, "fly" the verb no insect, once the parse's nouns
    are given; the same words used as nouns still match."""
    verb = matcher.match("A camera stands on the table", [label(TRIPOD)], ["camera", "table"])
    assert verb.words == [] and verb.rejection.reason == "no_label_overlap"
    assert matcher.match("A camera stands on the table", [label(TRIPOD)]).words == ["stands"]
    noun = matcher.match("A camera on a stand", [label(TRIPOD)], ["camera", "stand"])
    assert noun.words == ["stand"] and noun.rejection is None

    assert not matcher.match("Gulls fly over the harbour", [label(FLY)], ["gull", "harbour"]).words
    assert matcher.match("A fly on a leaf", [label(FLY)], ["fly", "leaf"]).words == ["fly"]


def test_a_word_that_is_only_a_noun_matches_whatever_its_tag(matcher):
    """The small tagger calls "tub" an interjection in a list of things; WordNet knows it
    as a noun only, so it matches."""
    match = matcher.match("A bathroom with a sink, tub, mirror", [label(TUB)], ["sink", "mirror"])
    assert match.words == ["tub"]


def test_caption_nouns_are_the_types_and_the_names_replaced():
    entities = [{"text": "Lake Como", "label": "LOC", "action": "removed"}]
    assert caption_nouns(["dog", "lake"], entities) == ["dog", "lake", "Lake Como"]
    assert caption_nouns(None, entities) is None  # not parsed: every word may match


@pytest.fixture(scope="module")
def hypernymize(nlp):
    """text -> what the NLP stage makes of it (caption, entities, types: the hypernymizer's
    parse)."""
    from conceptual.text.hypernymize import Hypernymizer

    hypernymizer = Hypernymizer(nlp=nlp)
    return lambda text: hypernymizer.transform([text])[0]


def parsed_nouns(result) -> list[str] | None:
    return caption_nouns(result.types, result.entities)


@pytest.mark.parametrize(
    ("wnid", "verb", "noun", "matched"),
    [
        # The Porter stemmer meets agent nouns and verbs: container and contains -> contain,
        # opener and opening -> open; 65 of the 1,000 classes expand to `container`.
        (
            BARREL,
            "A river that contains several boats.",
            "Plastic containers on a shelf.",
            "containers",
        ),
        (CAN_OPENER, "A man opening a bottle of wine.", "An opener on a counter.", "opener"),
        (
            CAROUSEL,
            "Children ride their bikes in the park.",
            "A girl on a ride at the fair.",
            "ride",
        ),
        (SKI, "A woman skiing down a slope.", "A pair of skis against a wall.", "skis"),
        (FLY, "Birds fly over the lake.", "A fly on a green leaf.", "fly"),
    ],
)
def test_with_the_parse_a_verb_no_longer_matches_and_the_noun_still_does(
    matcher, hypernymize, wnid, verb, noun, matched
):
    assert matcher.match(verb, [label(wnid)]).words  # every word: the verb matched
    rejected = matcher.match(verb, [label(wnid)], parsed_nouns(hypernymize(verb)))
    assert rejected.words == [] and rejected.rejection.reason == "no_label_overlap"
    assert matcher.match(noun, [label(wnid)], parsed_nouns(hypernymize(noun))) == ([matched], None)


def test_the_nouns_cover_the_alt_text_and_its_hypernymized_caption(matcher, hypernymize):
    """As the vision stage matches them, the alt-text and the caption together: the names'
    words and the concepts replacing them are nouns, the verb in either text is not."""
    alt_text = "Tom Cruise rides a carousel in London."
    result = hypernymize(alt_text)
    assert result.caption == "person rides a carousel ."
    words = f"{alt_text} {result.caption}"
    assert matcher.match(words, [label(CAROUSEL)], parsed_nouns(result)).words == ["carousel"]
    alt_text = "Tom Cruise rides a horse in London."
    result = hypernymize(alt_text)
    words = f"{alt_text} {result.caption}"
    assert matcher.match(words, [label(CAROUSEL)]).words == ["rides"]
    assert not matcher.match(words, [label(CAROUSEL)], parsed_nouns(result)).words


def test_the_vision_stage_matches_the_nouns_the_nlp_stage_found(monkeypatch, hypernymize):
    """The NLP stage's columns (caption, entities, types) reach the overlap rule: a verb is
    rejected, a noun kept."""
    from conceptual.pipelines.curation import image_operators
    from conceptual.pipelines.dataflow.rows import table
    from conceptual.records import IN_FLIGHT, image_id
    from conceptual.vision.cnn import CnnConfig
    from conceptual.vision.images import ImageFilterConfig

    monkeypatch.setattr(image_operators, "ImageNetClassifier", lambda config: None)
    vision = image_operators.VisionOperator(ImageFilterConfig(), CnnConfig(), OverlapConfig())
    image = b"never decoded: its verdict is known"
    vision.verdicts[image_id(image)] = image_operators.ImageVerdict(640, 480, None, (label(SKI),))

    def row(alt_text: str) -> dict:
        result = hypernymize(alt_text)
        return dict.fromkeys(IN_FLIGHT.names) | {
            "id": alt_text,
            "alt_text": alt_text,
            "image": image,
            "caption": result.caption,
            "entities": result.entities,
            "types": result.types,
        }

    verb, noun = "A woman skiing down a slope.", "A pair of skis against a wall."
    out = vision(table([row(verb), row(noun)])).to_pylist()
    assert [(r["reason"], r["matched"]) for r in out] == [
        ("no_label_overlap", []),
        (None, ["skis"]),
    ]
    assert out[0]["stage"] == image_operators.OVERLAP_STAGE
