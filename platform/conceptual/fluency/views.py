"""The four views of a (Chinese sentence, English source) pair that the fluency classifier
reads (docs/spec/fluency.md):

    views = sentence_views(["一只狗在草地上跑。"], ["A dog runs on the grass ."])

Views: `zh_words` (conceptual.text.chinese.segment, punctuation kept: a misplaced comma is
part of how a sentence reads), `zh_pos` (chinese.pos_tags: jieba's ICTCLAS tags),
`en_words` and `en_pos` (the English source's tokens and Penn Treebank tags, from the spaCy
pipeline with only its tagger running). Each view is its tokens joined by spaces, as a
vocabulary (conceptual.models.vocab) reads them; None where the view is missing.
"""

from __future__ import annotations

from collections.abc import Sequence

from conceptual.assets import load_spacy
from conceptual.fluency.model import VIEWS
from conceptual.text.chinese import pos_tags, segment

# The English tagger needs only its token vectors: the rest of the pipeline is skipped.
ENGLISH_UNUSED = ("parser", "attribute_ruler", "lemmatizer", "ner")


def sentence_views(
    chinese: Sequence[str | None], english: Sequence[str | None] | None = None
) -> dict[str, list[str | None]]:
    """The four views of each (Chinese sentence, English source) pair, VIEWS order; a view
    of a missing (None or blank) sentence is None. Each distinct sentence is analysed once."""
    english = english if english is not None else [None] * len(chinese)
    if len(english) != len(chinese):
        raise ValueError(f"{len(chinese)} Chinese sentences but {len(english)} English sources")
    zh = _distinct(chinese, _chinese_views)
    en = _distinct(english, _english_views)
    views: dict[str, list[str | None]] = {view: [] for view in VIEWS}
    for zh_text, en_text in zip(chinese, english):
        zh_views, en_views = zh.get(_present(zh_text)), en.get(_present(en_text))
        for view, value in zip(VIEWS, (*(zh_views or (None, None)), *(en_views or (None, None)))):
            views[view].append(value)
    return views


def _present(text: str | None) -> str | None:
    return text if text is not None and text.strip() else None


def _distinct(texts: Sequence[str | None], analyse) -> dict[str, tuple[str, str]]:
    distinct = list(dict.fromkeys(t for t in map(_present, texts) if t is not None))
    return dict(zip(distinct, analyse(distinct)))


def _chinese_views(texts: list[str]) -> list[tuple[str, str]]:
    return [(" ".join(segment(text)), " ".join(tag for _, tag in pos_tags(text))) for text in texts]


def _english_views(texts: list[str]) -> list[tuple[str, str]]:
    nlp = load_spacy(disable=ENGLISH_UNUSED)
    views = []
    for doc in nlp.pipe(texts, batch_size=256):
        tokens = [token for token in doc if not token.is_space]
        views.append((" ".join(t.text for t in tokens), " ".join(t.tag_ for t in tokens)))
    return views
