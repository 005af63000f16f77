import json

import pyarrow as pa
import pytest

from conceptual.candidates import MAX_STORED_CHARS, CandidateFormatError, detect_format, parse
from conceptual.records import IN_FLIGHT, candidate_id


def rows(data: bytes, name: str = "in.tsv", fmt: str = "auto"):
    return list(parse(data, name, fmt))


def test_cc_tsv_rows_and_stable_ids():
    out = rows(b"A dog on a beach\thttp://x.test/1.jpg\nA cat\thttp://x.test/2.jpg\n")
    assert [r["alt_text"] for r in out] == ["A dog on a beach", "A cat"]
    assert out[0]["id"] == candidate_id("http://x.test/1.jpg", "A dog on a beach")
    assert all(r["reason"] is None for r in out)


def test_cc_tsv_bad_rows_are_rejections_not_crashes():
    data = b"only one field\nA\tb\tc\n\xff\xfe broken\thttp://x.test/3.jpg\nfine\thttp://x.test/4.jpg\n\n"
    out = rows(data, "part-0.tsv")
    assert [r["reason"] for r in out] == ["malformed_row", "malformed_row", "invalid_utf8", None]
    assert out[0]["detail"].startswith("part-0.tsv:1:")
    assert out[2]["stage"] == "read" and "broken" in out[2]["alt_text"]
    assert len({r["id"] for r in out}) == 4


def test_missing_image_url_is_rejected_at_read():
    (row,) = rows(b"A dog on a beach\t  \n")
    assert (row["stage"], row["reason"]) == ("read", "missing_image_url")


def test_tsv_with_header_detects_and_maps_aliases():
    data = b"caption\turl\tpage_url\nA dog\thttp://x.test/1.jpg\thttp://p.test/\n"
    assert detect_format("c.tsv", data) == "tsv"
    (row,) = rows(data)
    assert (row["alt_text"], row["image_url"], row["page_url"]) == (
        "A dog",
        "http://x.test/1.jpg",
        "http://p.test/",
    )


def test_csv_quoting_multiline_and_field_count():
    data = b'alt_text,image_url\n"A dog, running","http://x.test/1.jpg"\n"two\nlines",http://x.test/2.jpg\nextra,a,b\n'
    out = rows(data, "c.csv")
    assert out[0]["alt_text"] == "A dog, running"
    assert out[1]["alt_text"] == "two\nlines"
    assert out[2]["reason"] == "malformed_row"


def test_header_without_required_columns_is_a_file_error():
    with pytest.raises(CandidateFormatError, match="image URL column"):
        rows(b"alt_text,width\nA,1\n", "c.csv")


def test_jsonl_errors_and_aliases():
    lines = [
        json.dumps({"text": "A dog", "url": "http://x.test/1.jpg"}),
        "{not json",
        "[1, 2]",
        json.dumps({"alt_text": None, "image_url": "http://x.test/2.jpg"}),
    ]
    out = rows("\n".join(lines).encode(), "c.jsonl")
    assert out[0]["alt_text"] == "A dog"
    assert [r["reason"] for r in out] == [None, "invalid_json", "malformed_row", None]
    assert out[3]["alt_text"] is None  # the text filters reject it as empty, with the input kept


def test_parquet_is_detected_by_name():
    assert detect_format("part-0001.parquet", b"") == "parquet"


def test_jsonl_rows_that_arrow_or_json_refuse_are_rejections():
    # Each of these once ended the whole job: a lone surrogate that Arrow cannot encode, an
    # integer over Python's 4,300-digit limit, nesting deeper than the recursion limit.
    lines = [
        b'{"alt_text": "A dog \\ud83d", "image_url": "http://x.test/1.jpg"}',
        b'{"alt_text": ' + b"1" * 5_000 + b', "image_url": "http://x.test/2.jpg"}',
        b"[" * 100_000,
        b'{"alt_text": "A cat \\ud83d\\ude00", "image_url": "http://x.test/3.jpg"}',
    ]
    out = rows(b"\n".join(lines), "c.jsonl")
    assert [r["reason"] for r in out] == ["invalid_utf8", "invalid_json", "invalid_json", None]
    assert out[0]["alt_text"] == "A dog \ufffd" and out[0]["detail"].startswith("alt_text: ")
    assert out[3]["alt_text"] == "A cat \U0001f600"  # a pair of escapes is one character
    table = pa.Table.from_pylist(out, schema=IN_FLIGHT)
    assert table.num_rows == 4


def test_huge_alt_text_is_rejected_and_stored_capped():
    huge = "A dog " * 20_000
    (row,) = rows(f"{huge}\thttp://x.test/1.jpg\n".encode())
    assert (row["stage"], row["reason"]) == ("read", "too_long")
    assert len(row["alt_text"]) == MAX_STORED_CHARS and huge.startswith(row["alt_text"])
    assert row["id"] == candidate_id("http://x.test/1.jpg", huge)  # the id of what was given
    (unreadable_row,) = rows(("x" * 100_000).encode())
    assert len(unreadable_row["alt_text"]) == MAX_STORED_CHARS  # the same cap


@pytest.mark.parametrize(
    "cow",
    [
        "A cow",  # the quote is never closed: the reader meets the end of the file
        'A "cow" in a field',  # a later quote closes it, in the middle of a field
    ],
)
def test_a_stray_csv_quote_loses_only_its_own_line(cow):
    data = (
        "alt_text,image_url\n"
        '"A dog on a beach,http://x.test/1.jpg\n'
        "A cat,http://x.test/2.jpg\n"
        f"{cow},http://x.test/3.jpg\n"
    ).encode()
    out = rows(data, "c.csv")
    assert [r["reason"] for r in out] == ["malformed_row", None, None]
    assert out[0]["detail"].startswith("c.csv:2: ") and "runs over 3 lines" in out[0]["detail"]
    assert out[0]["alt_text"] == '"A dog on a beach,http://x.test/1.jpg'
    assert [r["alt_text"] for r in out[1:]] == ["A cat", cow]


def test_compressed_names_are_detected_by_the_inner_suffix():
    assert detect_format("part-0.jsonl.gz", b"") == "jsonl"
    assert detect_format("part-0.csv.zst", b"") == "csv"


def test_a_stated_split_is_kept_in_every_format_with_columns():
    """A file's own split (Karpathy's, a hand-picked test set) is read as the split's name;
    an empty field leaves it to the hash; a word that names no split rejects its row."""
    tsv = (
        b"alt_text\timage_url\tsplit\nA dog\thttp://x.test/1.jpg\tValidation\n"
        b"A cat\thttp://x.test/2.jpg\t\nA cow\thttp://x.test/3.jpg\tholdout\n"
    )
    csv = b"caption,url,split\nA dog,http://x.test/1.jpg, dev \nA cat,http://x.test/2.jpg,test\n"
    jsonl = b'{"caption": "A dog", "url": "http://x.test/1.jpg", "split": "train"}\n'
    assert [r.get("split") for r in rows(tsv)] == ["val", None, None]
    assert rows(tsv)[2]["reason"] == "malformed_row"
    assert "'holdout' is none of train, val" in rows(tsv)[2]["detail"]
    assert [r["split"] for r in rows(csv, "c.csv")] == ["val", "test"]
    assert [r["split"] for r in rows(jsonl, "c.jsonl")] == ["train"]
    assert "split" not in rows(b"A dog\thttp://x.test/1.jpg\n")[0]  # cc_tsv has no column
