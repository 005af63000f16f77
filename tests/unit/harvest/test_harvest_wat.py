"""harvest/wat.py's two ways of reading a WAT record, the typed decoder for Common Crawl's
own shape and the general way (json.loads) for anything else, give the same answer: the
same page, the same reason, or the same unreadable record."""

from __future__ import annotations

import json

import pytest

from conceptual.harvest.wat import UnreadableRecord, _page_from_json, page_from_wat


def record(**changes) -> dict:
    """A WAT record of an HTML page as Common Crawl writes it, with `changes` (dotted paths
    from Envelope, a value of DELETE removing the field)."""
    document = {
        "Container": {"Filename": "crawl.warc.gz", "Compressed": True, "Offset": "0"},
        "Envelope": {
            "Format": "WARC",
            "WARC-Header-Metadata": {
                "WARC-Type": "response",
                "WARC-Target-URI": "http://a.example/p",
            },  # fmt: skip
            "Payload-Metadata": {
                "Actual-Content-Type": "application/http; msgtype=response",
                "HTTP-Response-Metadata": {
                    "Response-Message": {"Version": "HTTP/1.1", "Status": "200", "Reason": "OK"},
                    "Headers": {
                        "Content-Type": "text/html",
                        "X-Robots-Tag": ["noai", "nofollow"],
                    },  # fmt: skip
                    "HTML-Metadata": {
                        "Head": {
                            "Title": "a page",
                            "Base": "http://b.example/",
                            "Metas": [{"name": "robots", "content": "noindex"}, {"property": "og"}],
                        },
                        "Links": [
                            {"path": "A@/href", "url": "/next", "text": "next"},
                            {"path": "IMG@/src", "url": "a.jpg", "alt": "a dog"},
                            {"path": "IMG@/src", "url": "b.jpg"},
                        ],
                    },
                },
            },
        },
    }
    for path, value in changes.items():
        *parents, last = path.split(".")
        node = document["Envelope"]
        for key in parents:
            node = node[key]
        if value is DELETE:
            del node[last]
        else:
            node[last] = value
    return document


DELETE = object()
RESPONSE = "Payload-Metadata.HTTP-Response-Metadata"
HTML = f"{RESPONSE}.HTML-Metadata"
VARIANTS = {
    "common crawl's shape": {},
    "a status as a number": {f"{RESPONSE}.Response-Message.Status": 200},
    "a 404": {f"{RESPONSE}.Response-Message.Status": "404"},
    "no status": {f"{RESPONSE}.Response-Message": DELETE},
    "headers as a list": {f"{RESPONSE}.Headers": ["Content-Type"]},
    "no headers": {f"{RESPONSE}.Headers": DELETE},
    "no content type, HTML metadata": {f"{RESPONSE}.Headers": {}},
    "not html": {f"{RESPONSE}.Headers": {"Content-Type": "image/png"}},
    "a head that is a string": {f"{HTML}.Head": "x"},
    "a base that is a number": {f"{HTML}.Head.Base": 5},
    "metas that are a dict": {f"{HTML}.Head.Metas": {"name": "robots"}},
    "a link that is a string": {
        f"{HTML}.Links": ["IMG@/src", {"path": "IMG@/src", "url": "c.jpg", "alt": "c"}]
    },  # fmt: skip
    "an alt that is a number": {f"{HTML}.Links": [{"path": "IMG@/src", "url": "c.jpg", "alt": 5}]},
    "a path that is a number": {f"{HTML}.Links": [{"path": 5, "url": "c.jpg", "alt": "c"}]},
    "links as an empty string": {f"{HTML}.Links": ""},
    "html metadata null": {f"{HTML}": None},
    "html metadata a list": {f"{HTML}": []},
    "no payload metadata": {"Payload-Metadata": DELETE},
    "payload metadata null": {"Payload-Metadata": None},
    "response metadata a string": {RESPONSE: "x"},
    "a request": {"WARC-Header-Metadata.WARC-Type": "request"},
    "a type that is a number": {"WARC-Header-Metadata.WARC-Type": 3},
    "no target uri": {"WARC-Header-Metadata.WARC-Target-URI": DELETE},
    "a target uri that is a list": {"WARC-Header-Metadata.WARC-Target-URI": ["x"]},
    "a lone surrogate in an alt": {
        f"{HTML}.Links": [{"path": "IMG@/src", "url": "c.jpg", "alt": "x\ud800"}]
    },  # fmt: skip
    "a lone surrogate in the title": {f"{HTML}.Head.Title": "x\ud800"},
    "no warc headers": {"WARC-Header-Metadata": DELETE},
}


def answer(read, payload: bytes):
    try:
        return read(payload)
    except UnreadableRecord:
        return "unreadable"
    except Exception as exc:  # what the harvest counts as internal_error
        return type(exc).__name__


@pytest.mark.parametrize("name", list(VARIANTS))
def test_the_typed_way_answers_as_the_general_way(name):
    payload = json.dumps(record(**VARIANTS[name])).encode()
    assert answer(page_from_wat, payload) == answer(_page_from_json, payload)


@pytest.mark.parametrize(
    "payload",
    [
        b"not json",
        b"[1, 2]",
        json.dumps(record()).encode().replace(b'"a page"', b'"\xff"'),  # no UTF-8, unread field
        json.dumps(record()).encode().replace(b'"a page"', b'"\xed\xa0\x80"'),  # a surrogate
        json.dumps(record()).encode().replace(b'"a page"', b"NaN"),
        json.dumps(record()).encode()[:-1],
        b"\xef\xbb\xbf" + json.dumps(record()).encode(),  # a UTF-8 byte-order mark
        json.dumps(record()).encode("utf-16"),
    ],
    ids=["no json", "a list", "no utf-8", "a surrogate", "nan", "cut", "a bom", "utf-16"],
)
def test_records_in_no_common_crawl_shape_answer_as_the_general_way(payload):
    assert answer(page_from_wat, payload) == answer(_page_from_json, payload)


def test_common_crawls_shape_is_read_by_the_typed_way(monkeypatch):
    import conceptual.harvest.wat as wat

    monkeypatch.setattr(wat, "_page_from_json", lambda payload: pytest.fail("the general way"))
    reason, page = page_from_wat(json.dumps(record()).encode())
    assert reason is None and page.url == "http://a.example/p" and page.base == "http://b.example/"
    assert [tuple(i) for i in page.images] == [("a dog", "a.jpg"), (None, "b.jpg")]
    assert page.robots == ["noindex", "noai, nofollow"]
