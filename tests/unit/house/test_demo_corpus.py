"""The demo's web alt-text candidate generator: deterministic, every kind present, good
captions well formed, junk that looks like junk, and files that read back as written."""

from __future__ import annotations

import csv
import json
import re
import unicodedata
from collections import Counter
from urllib.parse import urlsplit

import pyarrow.parquet as pq
import pytest

from conceptual_demo.corpus import (
    GENERATORS,
    HUGE_MAX_CHARS,
    HUGE_MIN_CHARS,
    KIND_SHARES,
    generate_candidates,
    inflect,
    kind_counts,
    plural,
    tsv_field,
    with_article,
    write_candidates,
)

# Simple word lists, enough to check the shape of a caption without spaCy.
DETERMINERS = {"a", "an", "the", "this", "that", "these", "those"}
PREPOSITIONS = {
    "in", "on", "at", "by", "of", "with", "along", "near", "over", "from", "for", "after",
    "during", "under", "above", "against", "into", "off", "through", "before", "about", "to",
}  # fmt: skip
RESERVED_HOST = re.compile(r"(\.example|\.test|(^|\.)example\.(com|net|org))$")


def words(text: str) -> list[str]:
    return re.findall(r"[a-z']+", text.lower())


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return generate_candidates(3000, seed=0)


def of_kind(rows: list[dict], kind: str) -> list[str | None]:
    return [row["alt_text"] for row in rows if row["kind"] == kind]


def test_same_n_and_seed_give_the_same_rows(rows):
    assert generate_candidates(3000, seed=0) == rows
    assert generate_candidates(3000, seed=1) != rows


@pytest.mark.parametrize("n", [0, 1, 7, 137, 1000])
def test_n_rows(n):
    assert len(generate_candidates(n, seed=5)) == n


def test_negative_n_is_an_error():
    with pytest.raises(ValueError):
        generate_candidates(-1)


def test_every_kind_has_a_generator_and_the_counts_add_up():
    assert set(GENERATORS) == set(KIND_SHARES)
    assert sum(kind_counts(12345).values()) == 12345


def test_every_kind_present_in_its_share(rows):
    counts = Counter(row["kind"] for row in rows)
    assert set(counts) == set(KIND_SHARES)
    good = (counts["descriptive"] + counts["named_entities"]) / len(rows)
    assert 0.5 <= good <= 0.6
    for kind, share in KIND_SHARES.items():
        assert counts[kind] == pytest.approx(len(rows) * share / 100, abs=1)


def test_row_shape_and_urls(rows):
    for row in rows:
        assert set(row) == {"image_url", "page_url", "alt_text", "kind"}
        assert row["alt_text"] is None or isinstance(row["alt_text"], str)
        for url in (row["image_url"], row["page_url"]):
            parts = urlsplit(url)
            assert parts.scheme == "https" and RESERVED_HOST.search(parts.hostname), url
    image_urls = [row["image_url"] for row in rows]
    duplicates = len(image_urls) - len(set(image_urls))
    assert 0 < duplicates <= 0.03 * len(rows)  # a few images reused with other alt-text


def test_descriptive_captions_are_well_formed(rows):
    captions = of_kind(rows, "descriptive")
    for text in captions:
        tokens = set(words(text))
        assert text[0].isupper(), text
        assert tokens & DETERMINERS, text
        assert tokens & PREPOSITIONS, text
    assert len(set(captions)) > 0.9 * len(captions)  # varied, not a handful of templates


def test_named_entity_captions_are_mostly_well_formed(rows):
    captions = of_kind(rows, "named_entities")
    assert all(text[0].isupper() for text in captions)
    shaped = [t for t in captions if set(words(t)) & DETERMINERS and set(words(t)) & PREPOSITIONS]
    assert len(shaped) > 0.85 * len(captions)
    text = " ".join(captions)
    for name in ("Albert Einstein", "Paris", "NASA", "the Eiffel Tower"):
        assert name in text


def test_common_concepts_recur(rows):
    """The entity-type frequency rule keeps a caption only when its concepts are common."""
    counts = Counter(word for text in of_kind(rows, "descriptive") for word in words(text))
    for concept in ("dog", "beach", "park", "city", "woman", "man"):
        assert counts[concept] >= 12, (concept, counts[concept])


def test_junk_looks_like_its_kind(rows):
    assert all("#" in t for t in of_kind(rows, "hashtags"))
    assert all("@" in t for t in of_kind(rows, "handle"))
    assert all(
        re.search(r"https?://|www\.|\.(com|net|example|test)/", t) for t in of_kind(rows, "url")
    )
    assert all(re.search(r"\.(jpe?g|png)$", t, re.I) for t in of_kind(rows, "file_name"))
    assert all(t is None or not t.strip() for t in of_kind(rows, "empty"))
    assert None in of_kind(rows, "empty")
    assert all(t == t.upper() for t in of_kind(rows, "all_caps"))
    assert all(t[0].islower() for t in of_kind(rows, "lowercase_start"))
    assert all("<" in t or "&" in t for t in of_kind(rows, "html"))
    assert all(
        any(unicodedata.category(ch) in ("Cc", "Cf", "Zl") for ch in t)
        for t in of_kind(rows, "control_chars")
    )
    assert all(max(Counter(words(t)).values()) >= 3 for t in of_kind(rows, "repetition"))
    for text in of_kind(rows, "fragment"):
        assert not set(words(text)) & (DETERMINERS | PREPOSITIONS), text
    assert any(not t.isascii() for t in of_kind(rows, "non_english"))
    assert any(not t.isascii() for t in of_kind(rows, "emoji"))
    for text in of_kind(rows, "title_case"):  # headline style may keep small words low
        major = [w for w in text.split() if w.lower() not in DETERMINERS | PREPOSITIONS | {"and"}]
        assert not any(w[0].islower() for w in major), text


def test_huge_rows_are_really_large(rows):
    sizes = [len(t) for t in of_kind(rows, "huge")]
    assert all(HUGE_MIN_CHARS <= size <= HUGE_MAX_CHARS for size in sizes)
    assert max(sizes) >= 10 * HUGE_MIN_CHARS


def test_grammar_helpers():
    assert with_article("old man") == "an old man"
    assert with_article("university") == "a university"
    assert plural("woman") == "women" and plural("cup of coffee") == "cups of coffee"
    assert plural("police officer") == "police officers" and plural("puppy") == "puppies"
    assert inflect("run", "participle") == "running" and inflect("ride", "participle") == "riding"
    assert inflect("lie", "participle") == "lying" and inflect("watch", "third") == "watches"


# -- Files ------------------------------------------------------------------------------

TRICKY = [
    {"image_url": "https://a.example/1.jpg", "page_url": "https://a.example/", "alt_text": None,
     "kind": "empty"},
    {"image_url": "https://a.example/2.jpg", "page_url": "https://a.example/",
     "alt_text": 'Tab\there, line\nbreak, CR LF\r\n, \u2028 "quoted", NUL\x00 and \x07 bell',
     "kind": "control_chars"},
]  # fmt: skip


@pytest.fixture(scope="module")
def file_rows() -> list[dict]:
    return TRICKY + generate_candidates(600, seed=4)


def read_delimited(path) -> list[list[str]]:
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def assert_one_line_per_row(path, expected_lines: int):
    text = path.read_text(encoding="utf-8")
    assert text.count("\n") == expected_lines
    assert len(text.splitlines()) == expected_lines  # no \r, \u2028 or the like inside a row


def test_tsv_round_trip(tmp_path, file_rows):
    path = tmp_path / "candidates.tsv"
    write_candidates(file_rows, str(path), fmt="tsv")
    assert_one_line_per_row(path, len(file_rows) + 1)
    header, *records = read_delimited(path)
    assert header == ["alt_text", "image_url", "page_url"]
    assert records == [[tsv_field(r["alt_text"]), r["image_url"], r["page_url"]] for r in file_rows]
    assert records[0][0] == ""
    assert records[1][0] == 'Tab here, line break, CR LF  ,   "quoted", NUL  and \x07 bell'
    # Only control characters and blank alt-texts change on the way to a TSV.
    plain = [r for r in file_rows if r["kind"] not in ("control_chars", "empty")]
    assert all(tsv_field(r["alt_text"]) == r["alt_text"] for r in plain)


def test_cc_tsv_round_trip(tmp_path, file_rows):
    path = tmp_path / "deep" / "dir" / "candidates.tsv"
    write_candidates(file_rows, str(path), fmt="cc_tsv")
    assert_one_line_per_row(path, len(file_rows))
    assert read_delimited(path) == [[tsv_field(r["alt_text"]), r["image_url"]] for r in file_rows]
    with open(path, encoding="utf-8", newline="") as f:
        assert all(line.rstrip("\n").count("\t") == 1 for line in f)


def test_jsonl_round_trip(tmp_path, file_rows):
    path = tmp_path / "candidates.jsonl"
    write_candidates(file_rows, str(path), fmt="jsonl")
    assert_one_line_per_row(path, len(file_rows))
    with open(path, encoding="utf-8") as f:
        assert [json.loads(line) for line in f] == file_rows


def test_parquet_round_trip(tmp_path, file_rows):
    path = tmp_path / "candidates.parquet"
    write_candidates(file_rows, str(path), fmt="parquet")
    assert pq.read_table(path).to_pylist() == file_rows


def test_unknown_format_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="unknown format"):
        write_candidates([], str(tmp_path / "x.csv"), fmt="csv")
