"""The attribute ruler matched by lookups finds spaCy's Matcher's matches, in its order, and
load_spacy's pipeline (OpenBLAS, that matcher) parses as spaCy's own."""

from __future__ import annotations

import csv

import pytest
import spacy
from spacy.pipeline import AttributeRuler

from conceptual.text.attribute_matches import AttributeMatcher, use_attribute_matcher

# Alt-text that reaches the ruler's rarer patterns: contractions and colloquial spellings,
# pronouns by case, auxiliaries, "there is", spaces the tokenizer keeps, other scripts.
VARIANTS = [
    "I ain't gonna sit there, y'all, it's gotta be nothin' but a dog.",
    "Let's see: c'mon, you'll love 'em, ol' pal, that's somethin' 'nuff said.",
    "She gave it to me and I gave it to you; they did have what we had.",
    "There is a cat and there were two dogs, but he does not know it.",
    "A  boat\n\non the lake , near  the    pier\t(1998)",
    "Anyone can do something if nobody is doing anything for everybody.",
    "I'd have been being there if I'd known; he'd gone, which had been done.",
    "A MAN WHO WOULD NOT STOP, THAT IS ALL WE KNOW",
    "東京タワー at night, with Привет written on a sign",
    "the dog is running because it's cold while the cat sleeps until noon",
    "",
]


def texts_of(real_data) -> list[str]:
    with open(real_data / "cc_val_captions.tsv", newline="") as f:
        captions = [row["caption"] for row in csv.DictReader(f, delimiter="\t")][:600]
    with open(real_data / "cc_val_slug_pairs_dev.tsv", newline="") as f:
        slugs = [row["description_slug"] for row in csv.DictReader(f, delimiter="\t")][:300]
    cased = [text[:1].upper() + text[1:] for text in captions]
    return [*captions, *cased, *slugs, *VARIANTS]


def ruler_input(nlp, texts):
    """The docs as the attribute ruler meets them: tagged and parsed."""
    later = nlp.pipe_names[nlp.pipe_names.index("attribute_ruler") :]
    return list(nlp.pipe(texts, disable=later))


def test_the_english_ruler_matches_as_spacy_over_real_captions(nlp, real_data):
    ruler = nlp.get_pipe("attribute_ruler")
    assert isinstance(ruler.match, AttributeMatcher)  # load_spacy installed it
    hit = set()
    for doc in ruler_input(nlp, texts_of(real_data)):
        matches = ruler.match(doc)
        assert matches == AttributeRuler.match(ruler, doc), doc.text
        hit.update(number for number, *_ in matches)
    # the variants reach the two-token patterns ("ai n't", "gon na", "let 's", "there is")
    two_token = {n for n, p in enumerate(ruler.patterns) if len(p["patterns"][0]) == 2}
    assert len(two_token & hit) >= 4


def test_load_spacy_parses_as_spacys_own_pipeline(nlp, real_data):
    """load_spacy builds the models on numpy's OpenBLAS (thinc's default, BLIS, ran on
    reference kernels on our CPUs) and matches the attribute ruler by lookups; the parse of
    real captions is spaCy's own either way."""
    assert not nlp.get_pipe("ner").model.ops.use_blis
    texts = texts_of(real_data)[:300] + VARIANTS
    plain = spacy.load(nlp.meta["lang"] + "_" + nlp.meta["name"])
    assert plain.get_pipe("ner").model.ops.use_blis
    assert "match" not in vars(plain.get_pipe("attribute_ruler"))

    def annotations(pipeline):
        return [
            [
                (t.tag_, t.pos_, str(t.morph), t.dep_, t.head.i, t.lemma_, t.ent_iob_, t.ent_type_)
                for t in doc
            ]
            for doc in pipeline.pipe(texts)
        ]

    assert annotations(nlp) == annotations(plain)


def blank_ruler(patterns):
    nlp = spacy.blank("en")
    ruler = nlp.add_pipe("attribute_ruler")
    ruler.add_patterns(patterns)
    return nlp, ruler


def test_values_in_not_in_regex_alternatives_runs_and_negative_indices():
    patterns = [
        {
            "patterns": [[{"LOWER": "new"}, {"LOWER": {"IN": ["york", "delhi"]}}]],
            "attrs": {"POS": "PROPN"},
            "index": -1,
        },
        {"patterns": [[{"LOWER": {"REGEX": "^[0-9]+s$"}}]], "attrs": {"LEMMA": "decade"}},
        {
            "patterns": [[{"LOWER": {"NOT_IN": ["a", "the"]}, "IS_SPACE": False}]],
            "attrs": {"MORPH": "X=1"},
        },
        {"patterns": [[{"IS_SPACE": True}]], "attrs": {"POS": "SPACE"}},
        # alternatives, two of them matching the same word: one match, as spaCy's
        {
            "patterns": [[{"LOWER": "the"}], [{"LOWER": {"IN": ["a", "the"]}}]],
            "attrs": {"POS": "DET"},
        },
    ]
    nlp, ruler = blank_ruler(patterns)
    use_attribute_matcher(nlp)
    assert isinstance(ruler.match, AttributeMatcher)
    for text in ["A walk in New York in the 1980s", "new  delhi at night\n", "", "New"]:
        doc = nlp.make_doc(text)
        assert ruler.match(doc) == AttributeRuler.match(ruler, doc), text
    doc = nlp("Lights of New York in the 1980s")
    assert [t.pos_ for t in doc][2:6] == ["", "PROPN", "", "DET"] and doc[-1].lemma_ == "decade"


@pytest.mark.parametrize(
    "spec",
    [{"ORTH": "x"}, {"LOWER": "x", "OP": "+"}, {"LENGTH": {">=": 3}}, {"LOWER": {"FUZZY": "x"}}],
)
def test_a_ruler_with_other_patterns_keeps_spacys_matcher(spec):
    nlp, ruler = blank_ruler([{"patterns": [[spec]], "attrs": {"POS": "X"}}])
    use_attribute_matcher(nlp)
    assert "match" not in vars(ruler)
