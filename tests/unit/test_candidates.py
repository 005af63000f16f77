import json

import pytest

from conceptual.candidates import CandidateFormatError, detect_format, parse
from conceptual.records import candidate_id


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
