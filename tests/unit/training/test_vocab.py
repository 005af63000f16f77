import pytest

from conceptual.models.vocab import BOS, EOS, PAD, SPECIALS, UNK, Vocabulary

CAPTIONS = ["a dog on the beach", "a dog in the park", "a cat on a sofa", "the beach at sunset"]


def test_specials_take_the_first_ids():
    vocab = Vocabulary.build(CAPTIONS, min_count=1)
    assert vocab.tokens[:4] == list(SPECIALS)
    assert (PAD, BOS, EOS, UNK) == (0, 1, 2, 3)


def test_keeps_words_seen_min_count_times_most_frequent_first():
    vocab = Vocabulary.build(CAPTIONS, min_count=2)
    # a: 4, the: 3, beach: 2, dog: 2, on: 2 (ties by the word)
    assert vocab.tokens[4:] == ["a", "the", "beach", "dog", "on"]
    assert len(vocab) == 9


def test_order_does_not_depend_on_caption_order():
    forward = Vocabulary.build(CAPTIONS, min_count=1)
    backward = Vocabulary.build(reversed(CAPTIONS), min_count=1)
    assert forward.tokens == backward.tokens


def test_max_size_counts_the_specials():
    vocab = Vocabulary.build(CAPTIONS, min_count=1, max_size=6)
    assert vocab.tokens == [*SPECIALS, "a", "the"]
    with pytest.raises(ValueError, match="special tokens"):
        Vocabulary.build(CAPTIONS, max_size=3)


def test_encode_wraps_words_in_bos_eos_and_maps_rare_words_to_unk():
    vocab = Vocabulary.build(CAPTIONS, min_count=2)
    ids = vocab.encode("A dog on the moon")
    assert ids[0] == BOS and ids[-1] == EOS
    assert ids[1:-1] == [vocab.tokens.index(w) for w in ("a", "dog", "on", "the")] + [UNK]


def test_encode_truncates_to_15_words_and_a_cut_caption_does_not_end():
    """A served caption ended on "at": captions cut at the limit were taught to end there."""
    vocab = Vocabulary.build(CAPTIONS, min_count=1)
    ids = vocab.encode(" ".join(["dog"] * 40))
    assert len(ids) == 15 + 1 and EOS not in ids
    assert vocab.encode("a dog on the beach", max_tokens=3)[1:] == [
        vocab.tokens.index(w) for w in ("a", "dog", "on")
    ]
    assert vocab.encode("a dog on the", max_tokens=4)[-1] == EOS  # all of it: it ends
    [row] = vocab.encode_array(["a dog on the beach"], max_tokens=5)
    assert EOS not in row and row[-1] == PAD


def test_decode_stops_at_eos_and_drops_specials():
    vocab = Vocabulary.build(CAPTIONS, min_count=1)
    ids = vocab.encode("a dog on the beach")
    assert vocab.decode(ids) == "a dog on the beach"
    assert vocab.decode([BOS, ids[1], UNK, ids[2], EOS, ids[3], PAD]) == "a dog"


def test_json_round_trip():
    vocab = Vocabulary.build([*CAPTIONS, "café au lait"], min_count=1)
    again = Vocabulary.from_json(vocab.to_json())
    assert again.tokens == vocab.tokens
    assert again.encode("café on the beach") == vocab.encode("café on the beach")


def test_rejects_a_token_list_without_the_specials():
    with pytest.raises(ValueError, match="begin with"):
        Vocabulary(["a", "dog"])
