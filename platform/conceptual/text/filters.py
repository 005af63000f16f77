"""Text-based filters of alt-text (docs/spec/curation.md section 2), tuned for precision over
recall like the paper: a good caption lost is cheap, a bad one kept is not.

    filters = TextFilters(TextFilterConfig())
    cleaned, rejection = filters.check(alt_text)      # cheap: regexes and word lists
    if rejection is None:
        rejection = filters.check_doc(nlp(cleaned))   # needs POS tags from spaCy

`clean_alt_text` (text/cleaning.py) normalizes first (HTML entities, NFC, whitespace) and
crops stock-photo boilerplate ("Stock Photo - A man riding a horse" -> "A man riding a
horse"). `empty` (None, blank, or nothing left after cropping) and `too_long` (more than
`max_chars` characters; input over 4x that is rejected before cleaning) always come first:
they bound what the others see. The word lists the filters read are text/lexicons.py's.

Every other filter is one method of TextFilters, registered by `@_cheap_filter` (`check`:
regexes and word lists) or `@_doc_filter` (`check_doc`: the paper's syntactic rules, on the
`pos_` and `tag_` of spaCy's tagger and attribute ruler; parser and NER are not used) under
the one reason it rejects with; its docstring says what it rejects. A filter returns None to
keep the text, or the detail of its Rejection. Each check runs its filters in the order they
are defined and stops at the first that rejects, so adding a filter is adding one method,
where it should run; CHEAP_FILTERS, DOC_FILTERS and FILTER_NAMES list them. Reasons are
metric names, so never reword one.

"Image may contain: ..." is rejected rather than cropped: what follows is Facebook's
automatic tag list, not a description. Emoji get their own reason rather than counting as
out-of-vocabulary, so the funnel shows how much social-media text a crawl holds.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from typing import NamedTuple

from pydantic import field_validator
from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer
from wordfreq import get_frequency_dict

from conceptual.config import Config
from conceptual.records import Rejection
from conceptual.text.bounds import BOUND_REASONS
from conceptual.text.cleaning import clean_alt_text
from conceptual.text.lexicons import WORD, profanity, read_words

# The filters by reason, in the order they run; the decorators below fill them from the
# methods of TextFilters (the lists of names are at the end of the module).
_CHEAP: dict[str, Callable[..., str | None]] = {}
_DOC: dict[str, Callable[..., str | None]] = {}


def _registering(filters: dict[str, Callable[..., str | None]], reason: str) -> Callable:
    def register(method: Callable[..., str | None]) -> Callable[..., str | None]:
        filters[reason] = method
        return method

    return register


def _cheap_filter(reason: str) -> Callable:
    """Registers a method (cleaned text, its words, lowercase words) -> detail or None."""
    return _registering(_CHEAP, reason)


def _pattern_filter(
    reason: str, pattern: re.Pattern, needs: str, detail: Callable[[str, re.Match], str]
) -> Callable[..., str | None]:
    """Registers a cheap filter that rejects a text holding a match of `pattern`, tried only
    when one of the characters `needs` is in it; `detail(text, match)` says what matched."""

    def check(self, text: str, words: list[str], lowered: list[str]) -> str | None:
        # map over a str method: no Python frame per character, on every text's hot path
        if needs and not any(map(text.__contains__, needs)):
            return None
        match = pattern.search(text)
        return detail(text, match) if match else None

    return _registering(_CHEAP, reason)(check)


def _doc_filter(reason: str) -> Callable:
    """Registers a method (the Doc's tokens but punctuation and spaces) -> detail or None."""
    return _registering(_DOC, reason)


# Input this many times max_chars is rejected before cleaning or any regex touches it.
RAW_LENGTH_FACTOR = 4


class TextFilterConfig(Config):
    """Thresholds of the text filters. Defaults favour precision over recall."""

    crop_boilerplate: bool = True  # crop "Stock Photo -", "| Getty Images"... before filtering
    max_chars: int = 500
    min_tokens: int = 2
    max_tokens: int = 50
    max_non_latin_share: float = 0.3  # letters outside Latin script / letters
    min_foreign_words: int = 1  # foreign function words needed to call a text non-English,
    foreign_per_english: float = 2.0  # and more than this many per English function word
    max_word_repeats: int = 2  # a content word may occur this often...
    max_repeated_share: float = 0.25  # ...or more when it stays below this share of the words
    min_unique_ratio: float = 0.5  # distinct words / words
    keyword_min_fragments: int = 4  # comma/pipe-separated fragments that make a list...
    keyword_max_function_share: float = 0.2  # ...when this few of the words are function words
    keyword_min_bare_tokens: int = 6  # this many words without one function word is a list
    max_capitalized_ratio: float = 0.75
    min_word_zipf: float = 1.5  # log10 of occurrences per billion words (1.5: about 30)
    max_abs_sentiment: float = 0.8  # VADER compound; no Flickr8k or COCO caption exceeds 0.8
    max_noun_ratio: float = 0.75
    disabled: list[str] = []  # filter names to skip, e.g. [sentiment, no_preposition]

    @field_validator("disabled")
    @classmethod
    def _known_filters(cls, names: list[str]) -> list[str]:
        optional = (*_CHEAP, *_DOC)
        wrong = [name for name in names if name not in optional]
        if wrong:
            raise ValueError(f"cannot disable {wrong}: the filters that can be are {optional}")
        return names


# --- patterns and word sets of the cheap filters ---------------------------------------

_EMOJI = re.compile("[\u2600-\u27bf\u2b00-\u2bff\u20e3\ufe0f\U0001f000-\U0001faff]")
# Tab, CR and LF are spaces after cleaning; what is left here is invisible or invalid.
_CONTROL = re.compile(
    "[\x00-\x1f\x7f-\x9f\xad\u200b-\u200f\u2028-\u202e\u2060-\u206f"
    "\u0300-\u036f"  # combining marks that NFC could not compose (zalgo text)
    "\ud800-\uf8ff"  # lone surrogates, private use (icon fonts)
    "\ufeff\ufff0-\uffff]"  # byte-order mark, specials, replacement character
)
_HTML = re.compile(
    r"</?[A-Za-z][\w:-]*(?:\s[^<>]*)?/?>|<!--|&(?:[A-Za-z]{2,8}|#\d{1,7}|#x[0-9A-Fa-f]{1,6});"
)
_URL = re.compile(
    r"(?:https?|ftp)://|\bwww\.|[a-z0-9-]\.(?:com|net|org|edu|gov|mil|int|io|info|biz|uk|de"
    r"|fr|nl|ru|jp|cn|au|ca|tv|ly|xyz|online|site|shop|blog|store|app)\b",
    re.IGNORECASE,
)
_FILE_EXTENSION = re.compile(
    r"\w\.(?:jpe?g|jfif|png|gif|bmp|tiff?|webp|heic|heif|avif|svg|psd|raw|cr2|nef|arw|dng|pdf"
    r"|docx?|pptx?|xlsx?|mp4|mov|avi|wmv|html?|php|aspx?|jsp)\b",
    re.IGNORECASE,
)
_SNAKE_CASE = re.compile(r"[^\W_]_+[^\W_]")  # my_photo, 20190312_143501
_DIGIT = re.compile(r"\d")
_CAMERA_OR_IDENTIFIER = re.compile(
    r"\b(?:img|image|photo|pic|dsc[nf]?|dcim|pxl|mvimg|vid|gopr|dji|sam|wp|pano|_mg)[_-]?\d{3,}"
    r"|\b(?=[a-z]*\d)(?=\d*[a-z])[a-z0-9]{8,}\b",  # letters and digits mixed: a8f7e6d5c4
    re.IGNORECASE,
)
_HASHTAG = re.compile(r"(?<![\w&#])#[^\W\d_]\w*")
_HANDLE = re.compile(r"(?<![\w.@])@\w{2,}")

_BOILERPLATE_PREFIXES = (
    "embedded image permalink",
    *(f"profile {kind}" for kind in ("photo", "picture", "pic", "image")),
    "image may contain",
    "click here",
    "click to",
    "click on",
    *(f"{verb} {what}" for verb in ("see", "read", "view", "show") for what in ("more", "all")),
    *(f"view {what}" for what in ("larger", "full", "image", "photo", "picture", "gallery")),
    "image result for",
    *(f"no {kind}" for kind in ("image", "photo", "picture")),
    *(f"{kind} {state}" for kind in ("image", "photo") for state in ("not found", "unavailable")),
    *(f"{kind} photo" for kind in ("cover", "featured", "header")),
    *(f"{kind} image" for kind in ("cover", "featured", "header")),
    *("placeholder", "thumbnail", "screenshot", "screen shot", "untitled", "advertisement"),
    *("sponsored", "logo", "icon", "avatar", "banner", "download", "free download"),
)
_BOILERPLATE_SUFFIXES = (
    "embedded image permalink",
    *(f"profile {kind}" for kind in ("photo", "picture", "pic", "image")),
    *("click here", "read more", "see more", "view more", "logo", "icon", "avatar", "banner"),
    *("thumbnail", "screenshot", "screen shot", "placeholder", "clip art", "clipart"),
    *(
        f"{kind} wallpaper{plural}"
        for kind in ("hd", "4k", "desktop", "free", "iphone", "mobile", "phone")
        for plural in ("", "s")
    ),
)


def _alternation(phrases: tuple[str, ...]) -> str:
    """A regex matching any of the phrases literally, longest first."""
    return "|".join(re.escape(phrase) for phrase in sorted(phrases, key=len, reverse=True))


_BOILERPLATE_START = re.compile(rf"^(?:{_alternation(_BOILERPLATE_PREFIXES)})\b", re.IGNORECASE)
_BOILERPLATE_END = re.compile(rf"\b(?:{_alternation(_BOILERPLATE_SUFFIXES)})\W*$", re.IGNORECASE)
# The last words of those suffixes: only a text ending in one needs the regex.
_BOILERPLATE_LAST_WORDS = frozenset(phrase.split()[-1] for phrase in _BOILERPLATE_SUFFIXES)
_NOTICE = re.compile(r"©|\bcopyright\b|\ball rights reserved\b|\(c\) \d{4}", re.IGNORECASE)
_NOTICE_WORDS = frozenset({"copyright", "reserved", "c"})
_GALLERY_LABEL = re.compile(
    r"(?:image|photo|picture|pic|img|slide|figure|fig)\.?\s*#?\d+(?:\s*(?:of|/)\s*\d+)?",
    re.IGNORECASE,
)
_DANGLING_WORDS = frozenset({"a", "an", "the", "and", "or", "of"})
_ELLIPSES = ("...", "\u2026")

_FRAGMENT_SEPARATORS = re.compile(r"[,;|/\u2022\u00b7]")


def _chunk_around(text: str, match: re.Match) -> str:
    """The whitespace-delimited stretch of text that holds a match, for details."""
    start = text.rfind(" ", 0, match.start()) + 1
    end = text.find(" ", match.end())
    return text[start : end if end >= 0 else len(text)][:60]


def _is_latin(char: str) -> bool:
    code = ord(char)
    # Basic Latin to Latin Extended-B, and Latin Extended Additional (Vietnamese).
    return code < 0x250 or 0x1E00 <= code <= 0x1EFF


def _nouns(tokens: list) -> int:
    return sum(token.pos_ in ("NOUN", "PROPN") for token in tokens)


class TextCheck(NamedTuple):
    """What `check` says of an alt-text: the text cleaned ("" when rejected before cleaning),
    and the Rejection, or None to keep it."""

    text: str
    rejection: Rejection | None


class TextFilters:
    """The text filters with their lexicons, loaded once (a Ray actor builds one).
    `names` lists the filters that run, in order: the funnel's rows."""

    def __init__(self, config: TextFilterConfig | None = None):
        self.config = config or TextFilterConfig()
        disabled = set(self.config.disabled)
        self.names = [name for name in FILTER_NAMES if name not in disabled]
        # Each registered function bound to this instance, as its method.
        self._rules = [
            (name, rule.__get__(self)) for name, rule in _CHEAP.items() if name not in disabled
        ]
        self._doc_rules = [
            (name, rule.__get__(self)) for name, rule in _DOC.items() if name not in disabled
        ]

        self._english_function_words = frozenset(read_words("english_function_words.txt"))
        self._foreign_function_words = frozenset(read_words("foreign_function_words.txt"))
        self._adult_words = frozenset(read_words("adult_terms.txt"))
        self._profane_words, self._profane_phrases = profanity()
        # wordfreq's English list maps a word to its frequency; zipf = log10(frequency) + 9.
        self._english_frequency = get_frequency_dict("en")
        self._min_frequency = 10 ** (self.config.min_word_zipf - 9)
        self._sentiment_analyzer = SentimentIntensityAnalyzer()

    # --- public API --------------------------------------------------------------------

    def check(self, alt_text: str | None, *, names_later: bool = False) -> TextCheck:
        """The cleaned text and the first failing filter's Rejection, or None; the text is ""
        when rejected before cleaning. No spaCy. With `names_later`, out_of_vocabulary leaves
        capitalized words to the caller, to judge what hypernymization keeps of them
        (`rare_names`): "near Kericho, Kenya" is no vocabulary problem once the place goes."""
        if alt_text is None or not alt_text.strip():
            return TextCheck("", Rejection("empty", "no alt-text"))
        max_chars = self.config.max_chars
        if len(alt_text) > RAW_LENGTH_FACTOR * max_chars:
            return TextCheck(
                "", Rejection("too_long", f"{len(alt_text)} characters before cleaning")
            )
        text = clean_alt_text(alt_text, self.config.crop_boilerplate)
        if not text:
            return TextCheck(text, Rejection("empty", "nothing left after cropping boilerplate"))
        if len(text) > max_chars:
            return TextCheck(text, Rejection("too_long", f"{len(text)} characters > {max_chars}"))

        words = WORD.findall(text)
        lowered = [word.lower() for word in words]
        for name, rule in self._rules:
            if names_later and name == "out_of_vocabulary":
                # the first word is capitalized anyway: a typo there is no name
                common = words[:1] + [word for word in words[1:] if not word[0].isupper()]
                detail = rule(text, common, [word.lower() for word in common])
            else:
                detail = rule(text, words, lowered)
            if detail:
                return TextCheck(text, Rejection(name, detail))
        return TextCheck(text, None)

    def rare_names(self, text: str) -> set[str]:
        """The capitalized words after the first of a cleaned text that out_of_vocabulary
        rejects, lowercased: what `check(..., names_later=True)` left to its caller."""
        words = (word.lower() for word in WORD.findall(text)[1:] if word[0].isupper())
        return {word for word in words if self._is_rare(word)}

    def check_doc(self, doc) -> Rejection | None:
        """The paper's syntactic rules on a spaCy Doc of the cleaned text."""
        tokens = [token for token in doc if not (token.is_punct or token.is_space)]
        for name, rule in self._doc_rules:
            if detail := rule(tokens):
                return Rejection(name, detail)
        return None

    # --- cheap filters: (cleaned text, its words, lowercase words) -> detail or None ----

    # Those that reject on a pattern's first match: the reason, the pattern, the characters
    # it cannot match without (a plain `in` test skips the regex for most texts; "": none),
    # the detail of a match. What each rejects is its comment.
    _emoji = _pattern_filter(  # emoji and pictographs, ★ included: social-media text
        "emoji", _EMOJI, "", lambda text, match: f"emoji U+{ord(match.group()):04X}"
    )
    # C0/C1 controls other than tab, CR and LF (cleaning turns those into spaces), zero-width
    # and bidi marks, combining marks NFC left loose (zalgo), private-use or invalid points.
    _control_characters = _pattern_filter(
        "control_characters",
        _CONTROL,
        "",
        lambda text, match: f"character U+{ord(match.group()):04X}",
    )
    # Tags (`<b>`, `<img src=...>`) or entities left after one decoding (`&amp;lt;`).
    _html_markup = _pattern_filter(
        "html_markup", _HTML, "<&", lambda text, match: f"markup {match.group()[:40]!r}"
    )
    _hashtag = _pattern_filter(  # `#word`
        "hashtag", _HASHTAG, "#", lambda text, match: f"hashtag {match.group()!r}"
    )
    _handle = _pattern_filter(  # `@user`
        "handle", _HANDLE, "@", lambda text, match: f"handle {match.group()!r}"
    )
    _url = _pattern_filter(  # `http://`, `www.`, bare domains such as `example.com`
        "url", _URL, ".", lambda text, match: f"url {_chunk_around(text, match)!r}"
    )

    @_cheap_filter("file_name")
    def _file_name(self, text: str, words: list[str], lowered: list[str]) -> str | None:
        """`IMG_3422.JPG`, `DSC01234`, `photo.jpeg`, `my_photo`, identifiers like `a8f7e6d5c4`."""
        match = (
            ("." in text and _FILE_EXTENSION.search(text))
            or ("_" in text and _SNAKE_CASE.search(text))
            or (_DIGIT.search(text) and _CAMERA_OR_IDENTIFIER.search(text))
        )
        if match:
            return f"file name or identifier {_chunk_around(text, match)!r}"
        return None

    @_cheap_filter("boilerplate_pattern")
    def _boilerplate_pattern(self, text: str, words: list[str], lowered: list[str]) -> str | None:
        """Starts or ends with web boilerplate ("embedded image permalink", "profile photo",
        "image may contain", "click here", "... logo"), has a copyright notice, or is a gallery
        label ("Image 3 of 12")."""
        match = (
            _BOILERPLATE_START.search(text)
            or (
                lowered and lowered[-1] in _BOILERPLATE_LAST_WORDS and _BOILERPLATE_END.search(text)
            )
            or (("©" in text or not _NOTICE_WORDS.isdisjoint(lowered)) and _NOTICE.search(text))
        )
        if match:
            return f"boilerplate {match.group().strip()!r}"
        if _GALLERY_LABEL.fullmatch(text):
            return "gallery label"
        return None

    @_cheap_filter("truncated")
    def _truncated(self, text: str, words: list[str], lowered: list[str]) -> str | None:
        """Ends in "..." or with a dangling a, an, the, and, or, of ("A man standing in the")."""
        if text.rstrip("\"')] ").endswith(_ELLIPSES):
            return "ends with an ellipsis"
        if words and words[-1] in _DANGLING_WORDS:
            return f"ends with {words[-1]!r}"
        return None

    @_cheap_filter("non_english")
    def _non_english(self, text: str, words: list[str], lowered: list[str]) -> str | None:
        """Over `max_non_latin_share` of the letters outside Latin script, or at least
        `min_foreign_words` function words of other languages and over `foreign_per_english`
        times as many as English ones."""
        if not text.isascii():
            letters = [char for char in text if char.isalpha()]
            non_latin = sum(not _is_latin(char) for char in letters)
            if non_latin > self.config.max_non_latin_share * len(letters):
                return f"{non_latin} of {len(letters)} letters are not Latin script"
        foreign = sum(word in self._foreign_function_words for word in lowered)
        if foreign >= self.config.min_foreign_words:
            english = sum(word in self._english_function_words for word in lowered)
            if foreign > self.config.foreign_per_english * english:
                return f"{foreign} foreign function words, {english} English"
        return None

    @_cheap_filter("too_few_tokens")
    def _too_few_tokens(self, text: str, words: list[str], lowered: list[str]) -> str | None:
        """Fewer than `min_tokens` words."""
        if len(words) < self.config.min_tokens:
            return f"{len(words)} words < {self.config.min_tokens}"
        return None

    @_cheap_filter("too_many_tokens")
    def _too_many_tokens(self, text: str, words: list[str], lowered: list[str]) -> str | None:
        """More than `max_tokens` words."""
        if len(words) > self.config.max_tokens:
            return f"{len(words)} words > {self.config.max_tokens}"
        return None

    @_cheap_filter("adult")
    def _adult(self, text: str, words: list[str], lowered: list[str]) -> str | None:
        """A pornographic or sexual term (data/adult_terms.txt)."""
        for word in lowered:
            if word in self._adult_words:
                return f"adult term {word!r}"
        return None

    @_cheap_filter("profanity")
    def _profanity(self, text: str, words: list[str], lowered: list[str]) -> str | None:
        """A word or phrase of better_profanity's list, less data/profanity_allowlist.txt."""
        for i, word in enumerate(lowered):
            if word in self._profane_words:
                return f"profane word {word!r}"
            for phrase in self._profane_phrases.get(word, ()):
                if tuple(lowered[i : i + len(phrase)]) == phrase:
                    return f"profane phrase {' '.join(phrase)!r}"
        return None

    @_cheap_filter("keyword_list")
    def _keyword_list(self, text: str, words: list[str], lowered: list[str]) -> str | None:
        """An SEO list: many separated fragments and few function words, or
        `keyword_min_bare_tokens` words without one function word."""
        function_words = sum(word in self._english_function_words for word in lowered)
        if function_words == 0 and len(words) >= self.config.keyword_min_bare_tokens:
            return f"{len(words)} words and no function word"
        if function_words < self.config.keyword_max_function_share * len(words):
            pieces = _FRAGMENT_SEPARATORS.split(text)
            fragments = sum(1 for piece in pieces if WORD.search(piece))
            if fragments >= self.config.keyword_min_fragments:
                return f"{fragments} fragments, {function_words} function words"
        return None

    @_cheap_filter("repetition")
    def _repetition(self, text: str, words: list[str], lowered: list[str]) -> str | None:
        """A word more than `max_word_repeats` times in a row, or a content word more than
        that often and over `max_repeated_share` of the words."""
        limit = self.config.max_word_repeats
        if len(lowered) - len(set(lowered)) < limit:
            return None  # too few duplicates for any word to exceed the limit
        run = 1
        for previous, word in zip(lowered, lowered[1:]):
            run = run + 1 if word == previous else 1
            if run > limit:
                return f"{word!r} {run} times in a row"
        counts = Counter(word for word in lowered if word not in self._english_function_words)
        if counts:
            word, count = counts.most_common(1)[0]
            if count > limit and count > self.config.max_repeated_share * len(lowered):
                return f"{word!r} is {count} of {len(lowered)} words"
        return None

    @_cheap_filter("low_unique_ratio")
    def _low_unique_ratio(self, text: str, words: list[str], lowered: list[str]) -> str | None:
        """Distinct words / words below `min_unique_ratio`."""
        unique = len(set(lowered))
        if unique < self.config.min_unique_ratio * len(lowered):
            return f"{unique} distinct of {len(lowered)} words"
        return None

    @_cheap_filter("not_capitalized")
    def _not_capitalized(self, text: str, words: list[str], lowered: list[str]) -> str | None:
        """The first word starts with a lowercase letter (a digit passes)."""
        if words and words[0][0].islower():
            return f"starts with {words[0]!r}"
        return None

    @_cheap_filter("too_many_capitals")
    def _too_many_capitals(self, text: str, words: list[str], lowered: list[str]) -> str | None:
        """The share of capitalized words above `max_capitalized_ratio` (Title Case,
        ALL CAPS)."""
        alphabetic = [word for word in words if word[0].isalpha()]
        capitalized = sum(word[0].isupper() for word in alphabetic)
        if capitalized > self.config.max_capitalized_ratio * len(alphabetic):
            return f"{capitalized} of {len(alphabetic)} words capitalized"
        return None

    @_cheap_filter("out_of_vocabulary")
    def _out_of_vocabulary(self, text: str, words: list[str], lowered: list[str]) -> str | None:
        """A word rarer than `min_word_zipf` in wordfreq's English list (or absent from
        it); in the pipeline, a capitalized one after the first word only if it is still in the
        caption after hypernymization (`check(names_later=True)`, text/curate.py)."""
        rare = [word for word in lowered if self._is_rare(word)]
        if rare:
            return f"not in the English vocabulary: {', '.join(rare[:5])}"
        return None

    def _is_rare(self, word: str) -> bool:
        """A lowercase word rarer than min_word_zipf, in every spelling we try."""
        frequent = self._english_frequency.get(word, 0.0) >= self._min_frequency
        return not frequent and not self._in_vocabulary_otherwise(word)

    def _in_vocabulary_otherwise(self, word: str) -> bool:
        """For a word not found as it stands: numbers and codes are no vocabulary question;
        else try it with a straight apostrophe and without a possessive 's."""
        if any(char.isdigit() for char in word):
            return True
        word = word.replace("\u2019", "'")
        if word.endswith("'s"):
            word = word[:-2]
        return self._english_frequency.get(word, 0.0) >= self._min_frequency

    @_cheap_filter("sentiment")
    def _sentiment(self, text: str, words: list[str], lowered: list[str]) -> str | None:
        """VADER compound polarity beyond +-`max_abs_sentiment`."""
        # Without a word of VADER's lexicon the score is 0: skip the analyzer (most texts).
        if self._sentiment_analyzer.lexicon.keys().isdisjoint(lowered):
            return None
        compound = self._sentiment_analyzer.polarity_scores(text)["compound"]
        if abs(compound) > self.config.max_abs_sentiment:
            return f"polarity {compound:+.2f}"
        return None

    # --- syntactic filters: (the Doc's tokens but punctuation and spaces) -> detail or None

    @_doc_filter("no_determiner")
    def _no_determiner(self, tokens: list) -> str | None:
        """No DET and no possessive pronoun ("his", "their": determiners by function)."""
        if any(token.pos_ == "DET" or token.tag_ in ("PRP$", "WP$") for token in tokens):
            return None
        return "no determiner or possessive pronoun"

    @_doc_filter("no_noun")
    def _no_noun(self, tokens: list) -> str | None:
        """No NOUN or PROPN (a proper noun counts: hypernymization turns it into a noun)."""
        return None if _nouns(tokens) else "no noun or proper noun"

    @_doc_filter("no_preposition")
    def _no_preposition(self, tokens: list) -> str | None:
        """No ADP."""
        return None if any(token.pos_ == "ADP" for token in tokens) else "no preposition"

    @_doc_filter("high_noun_ratio")
    def _high_noun_ratio(self, tokens: list) -> str | None:
        """(NOUN + PROPN) / words above `max_noun_ratio`."""
        nouns = _nouns(tokens)
        if nouns > self.config.max_noun_ratio * len(tokens):
            return f"{nouns} of {len(tokens)} words are nouns"
        return None


CHEAP_FILTERS = tuple(_CHEAP)
DOC_FILTERS = tuple(_DOC)
# empty and too_long always run: they bound what the other filters see.
FILTER_NAMES = (*BOUND_REASONS, *CHEAP_FILTERS, *DOC_FILTERS)
