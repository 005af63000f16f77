"""Chinese text for captioning: normalization, word segmentation and POS tags (jieba).

    normalize("一个男人骑着ＳＵＶ,在路上 。")   # "一个男人骑着SUV，在路上。"
    segment("一个小女孩在玩。")                 # ["一个", "小女孩", "在", "玩", "。"]
    pos_tags("一个小女孩在玩。")                # [("一个", "m"), ("小女孩", "n"), ...]
    tokens_for_captioning("一个小女孩在玩。")   # "一个 小女孩 在 玩"
    characters("一个 小女孩 穿着 T恤")              # "一 个 小 女 孩 穿 着 T 恤"

Chinese is written without spaces between words, but the captioner's vocabulary
(conceptual.models.vocab.tokenize) takes words to be what spaces separate, so a Chinese
caption is stored segmented, words joined by single spaces, and everything downstream works
unchanged. The fluency spec's classifiers read words and POS tags of each sentence.

jieba works offline from its bundled dictionary. It loads that dictionary once per process,
lazily (about a second; a cache under the platform's state directory makes later loads
faster), and its loading messages stay out of the terminal. After loading, cutting is
thread-safe. `pos_tags` runs jieba's POS tagger, which segments on its own: its words may
differ from `segment`'s in a few places (about one sentence in six of the Baidu
translations), which the fluency views, each a classifier of its own, do not need to agree on.
"""

from __future__ import annotations

import logging
import re
import threading
import unicodedata

# Han ideographs (the unified block and extension A, what jieba's own regex covers) and the
# CJK punctuation written between them.
HAN = "\u3400-\u4dbf\u4e00-\u9fff"
CJK_PUNCTUATION = (
    "\u3001\u3002\u300a-\u300f"  # 、。《》「」『』
    "\uff01\uff08\uff09\uff0c\uff1a\uff1b\uff1f"  # ！（），：；？
    "\u201c\u201d\u2018\u2019"  # “”‘’
)
# Chinese text writes these marks full-width; an ASCII one next to a Chinese character is the
# same mark typed on an English keyboard ("衣服,那么" -> "衣服，那么").
FULL_WIDTH = {",": "，", "!": "！", "?": "？", ";": "；", ":": "："}
ASCII_MARK_BY_HAN = re.compile(rf"(?<=[{HAN}])([,!?;:])|([,!?;:])(?=[{HAN}])")
FULL_STOP_AFTER_HAN = re.compile(rf"(?<=[{HAN}])\.(?=[{HAN}]|\s*$)")
# Full-width letters and digits fold to ASCII (ＳＵＶ -> SUV, ２ -> 2); the ideographic space
# to a space. Full-width punctuation is left as it is: it is how Chinese is written.
FOLDED = {
    code: unicodedata.normalize("NFKC", chr(code))
    for code in range(0xFF01, 0xFF5F)
    if chr(code).isalnum()
} | {0x3000: " "}
ZERO_WIDTH = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff"))  # 209 in the Google MT
SPACE_BY_CJK = re.compile(rf"\s+(?=[{HAN}{CJK_PUNCTUATION}])|(?<=[{HAN}{CJK_PUNCTUATION}])\s+")


def normalize(text: str) -> str:
    """NFC; full-width letters, digits and spaces as ASCII; zero-width characters removed;
    ASCII , ! ? ; : and a full stop next to Chinese characters as the full-width marks;
    whitespace collapsed, stripped, and removed where it touches Chinese (it separates no
    words there). Latin words keep their spaces ("Hello Kitty")."""
    text = unicodedata.normalize("NFC", text).translate(FOLDED).translate(ZERO_WIDTH)
    text = SPACE_BY_CJK.sub("", " ".join(text.split()))
    text = ASCII_MARK_BY_HAN.sub(lambda m: FULL_WIDTH[m.group(1) or m.group(2)], text)
    text = FULL_STOP_AFTER_HAN.sub("。", text)
    return SPACE_BY_CJK.sub("", text)  # again: "潜水员, 2" has a full-width comma now


_lock = threading.Lock()
_pos_tokenizer = None  # one per process; its .tokenizer is the plain segmenter


def _tokenizers():
    """jieba's POS tokenizer around its segmenter, built on first use: the two share one
    dictionary. A process that forks after loading hands it to the child for free."""
    global _pos_tokenizer
    if _pos_tokenizer is None:
        with _lock:
            if _pos_tokenizer is None:
                _pos_tokenizer = _load()
    return _pos_tokenizer


def _load():
    import jieba
    import jieba.posseg

    from conceptual.paths import state_dir

    # jieba logs its loading at DEBUG to stderr; warnings (a cache it cannot write) still show.
    logging.getLogger("jieba").setLevel(logging.WARNING)
    tokenizer = jieba.Tokenizer()
    cache = state_dir() / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    # jieba trusts a cache of its default dictionary without checking its age: the version
    # in the name keeps an upgrade from reading an older release's cache.
    tokenizer.tmp_dir = str(cache)
    tokenizer.cache_file = f"jieba-{jieba.__version__}.cache"
    tokenizer.initialize()
    return jieba.posseg.POSTokenizer(tokenizer)


def segment(text: str) -> list[str]:
    """The words of a normalized sentence, punctuation included, spaces left out."""
    words = _tokenizers().tokenizer.lcut(normalize(text), HMM=True)
    return [word for word in words if not word.isspace()]


def pos_tags(text: str) -> list[tuple[str, str]]:
    """(word, tag) of a normalized sentence, in jieba's tag set (ICTCLAS: n noun, v verb,
    m numeral, x punctuation and other non-words, ...); spaces left out."""
    pairs = _tokenizers().lcut(normalize(text), HMM=True)
    return [(pair.word, pair.flag) for pair in pairs if not pair.word.isspace()]


def is_punctuation(word: str) -> bool:
    """Whether a word is only punctuation and symbols ("。", "，", "“", "#", "...")."""
    return all(unicodedata.category(ch)[0] in "PS" for ch in word)


HAN_OR_WORD = re.compile(rf"[{HAN}]|[^\s{HAN}]+")


def characters(caption: str) -> str:
    """A segmented caption as single Han characters (other runs, Latin words and digits,
    stay whole), joined by spaces: scores on these do not depend on where a segmenter put
    word boundaries, which differ between jieba and the references' writers."""
    return " ".join(HAN_OR_WORD.findall(caption))


def tokens_for_captioning(text: str) -> str:
    """A caption as the captioner reads it: the sentence's words, lowercase (Latin ones),
    joined by single spaces, punctuation dropped: "一个小女孩在玩。" -> "一个 小女孩 在 玩"."""
    return " ".join(word.lower() for word in segment(text) if not is_punctuation(word))
