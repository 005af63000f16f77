"""The caption vocabulary: token types seen at least `min_count` times (docs/spec/captioning.md).

    vocab = Vocabulary.build(train_captions, min_count=4)
    ids = vocab.encode("a cup of espresso on a saucer")   # [BOS, a, cup, ..., saucer, EOS]
    vocab.decode(ids)                                     # "a cup of espresso on a saucer"

Encoded captions carry both ends: the model reads `ids[:-1]` (from <bos>) and learns to
predict `ids[1:]` (up to <eos>). A caption cut at the word limit has no <eos>: it did not
end there, and a model taught that it did ends captions on a dangling word ("a man
standing at"). Ids 0-3 are the special tokens, in every vocabulary.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

PAD, BOS, EOS, UNK = 0, 1, 2, 3
SPECIALS = ("<pad>", "<bos>", "<eos>", "<unk>")
# Training captions are cut to this many words (the paper's limit).
MAX_CAPTION_TOKENS = 15


def tokenize(caption: str) -> list[str]:
    """Curated captions are already lowercase and tokenized: words are what spaces separate."""
    return caption.lower().split()


class Vocabulary:
    def __init__(self, tokens: Sequence[str]):
        """`tokens` in id order, beginning with the special tokens."""
        if tuple(tokens[: len(SPECIALS)]) != SPECIALS:
            raise ValueError(f"a vocabulary must begin with {SPECIALS}")
        if len(set(tokens)) != len(tokens):
            raise ValueError("a vocabulary must not repeat a token")
        self.tokens = list(tokens)
        self._ids = {token: i for i, token in enumerate(self.tokens)}

    @classmethod
    def build(
        cls, captions: Iterable[str], min_count: int = 4, max_size: int | None = None
    ) -> Vocabulary:
        """Words seen at least `min_count` times, most frequent first (ties by the word itself,
        so the same captions always give the same ids); `max_size` counts the specials too."""
        if max_size is not None and max_size < len(SPECIALS):
            raise ValueError(f"max_size must leave room for the {len(SPECIALS)} special tokens")
        counts = Counter(word for caption in captions for word in tokenize(caption))
        words = sorted(
            (word for word, n in counts.items() if n >= min_count and word not in SPECIALS),
            key=lambda word: (-counts[word], word),
        )
        if max_size is not None:
            words = words[: max_size - len(SPECIALS)]
        return cls([*SPECIALS, *words])

    def __len__(self) -> int:
        return len(self.tokens)

    def encode(self, caption: str, max_tokens: int = MAX_CAPTION_TOKENS) -> list[int]:
        """<bos>, the first `max_tokens` words (unknown ones as <unk>), and <eos> if that was
        all of them."""
        words = tokenize(caption)
        ended = [EOS] if len(words) <= max_tokens else []
        return [BOS, *(self._ids.get(word, UNK) for word in words[:max_tokens]), *ended]

    def encode_array(self, captions: Sequence[str], max_tokens: int) -> np.ndarray:
        """(rows, max_tokens) int64 ids, each caption cut to max_tokens - 2 words (without
        <eos> then) and padded."""
        tokens = np.full((len(captions), max_tokens), PAD, dtype=np.int64)
        for row, caption in zip(tokens, captions):
            ids = self.encode(caption, max_tokens - 2)
            row[: len(ids)] = ids
        return tokens

    def decode(self, ids: Iterable[int]) -> str:
        """The words up to the first <eos>; the other special tokens are left out."""
        words = []
        for i in map(int, ids):
            if i == EOS:
                break
            if i >= len(SPECIALS):
                words.append(self.tokens[i])
        return " ".join(words)

    def to_json(self) -> str:
        return json.dumps({"tokens": self.tokens}, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> Vocabulary:
        return cls(json.loads(text)["tokens"])
