"""The offline translator: exact lookup of Flickr8k-CN's provided translations (normalized
English), the most frequent translation of a repeated sentence, and the nearest sentence's
translation by TF-IDF cosine; and the service translator (translate translator=service)
against a LibreTranslate stand-in on 127.0.0.1."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from conceptual.fluency.translation import ProvidedTranslations, Translator, english_key

ENGLISH = """\
a.jpg#enc#0 A dog runs on the grass .
a.jpg#enc#1 A black dog is swimming in a lake .
b.jpg#enc#0 A dog runs on the grass .
b.jpg#enc#1 Two children play soccer in a park .
c.jpg#enc#0 A dog runs on the grass .
c.jpg#enc#1 A girl 's red kite flies over the beach .
"""
BAIDU = """\
a.jpg#zhb#0 一只狗在草地上跑。
a.jpg#zhb#1 一只黑狗在湖里游泳。
b.jpg#zhb#0 一条狗在草地上奔跑。
b.jpg#zhb#1 两个孩子在公园里踢足球。
c.jpg#zhb#0 一条狗在草地上奔跑。
c.jpg#zhb#1 一个女孩的红色风筝飞过海滩。
this line has no key
"""
GOOGLE = "a.jpg#zhg#1 一只黑色的狗在湖中游泳。\n"


@pytest.fixture
def cn_dir(tmp_path) -> Path:
    for name, text in [
        ("flickr8kenc.caption.txt", ENGLISH),
        ("flickr8kzhb.caption.txt", BAIDU),
        ("flickr8kzhg.caption.txt", GOOGLE),
    ]:
        (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path


def test_english_key_normalizes_case_spacing_and_the_final_full_stop():
    assert english_key("  A dog runs on the   grass .") == "a dog runs on the grass"
    assert english_key("A girl's red kite.") == english_key("a girl 's red kite")
    assert english_key('A "big" dog') == "a big dog"


def test_exact_lookup(cn_dir):
    translator = ProvidedTranslations(cn_dir)
    assert isinstance(translator, Translator)
    assert translator.translate(
        [
            "a dog runs on the grass",  # translated twice one way, once another: the majority
            "A BLACK dog is swimming in a lake.",
            "a girl's red kite flies over the beach",
            "two children play soccer",  # no exact match
        ]
    ) == ["一条狗在草地上奔跑。", "一只黑狗在湖里游泳。", "一个女孩的红色风筝飞过海滩。", None]
    assert translator.translate([]) == []


def test_google_source(cn_dir):
    translator = ProvidedTranslations(cn_dir, source="google")
    assert translator.translate(
        ["a black dog is swimming in a lake", "a dog runs on the grass"]
    ) == [
        "一只黑色的狗在湖中游泳。",
        None,
    ]
    with pytest.raises(ValueError, match="baidu or google"):
        ProvidedTranslations(cn_dir, source="native")


def test_nearest_returns_the_most_similar_sentences_translation(cn_dir):
    translator = ProvidedTranslations(cn_dir, nearest=True)
    assert translator.translate(
        [
            "two kids play soccer in the park",
            "a black dog swimming",
            "a dog runs on the grass",  # exact matches still win
            "zebras",  # shares no word with any sentence
        ]
    ) == ["两个孩子在公园里踢足球。", "一只黑狗在湖里游泳。", "一条狗在草地上奔跑。", None]
    key, similarity = translator.most_similar("two kids play soccer in the park")
    assert key == "two children play soccer in a park" and 0 < similarity < 1
    assert translator.most_similar("a dog runs on the grass") == pytest.approx(
        ("a dog runs on the grass", 1.0)
    )


def test_nearest_below_min_similarity_is_none(cn_dir):
    translator = ProvidedTranslations(cn_dir, nearest=True, min_similarity=0.9)
    assert translator.translate(["two kids play soccer in the park"]) == [None]


class Service(http.server.BaseHTTPRequestHandler):
    """A LibreTranslate stand-in: records each request; answers `answer(q)`."""

    requests: list[dict] = []
    answer = staticmethod(lambda q: [f"译文{n}" if s.strip() else "" for n, s in enumerate(q)])

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(
            {"path": self.path, "type": self.headers["Content-Type"], "body": body}
        )
        payload = json.dumps({"translatedText": type(self).answer(body["q"])}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args) -> None:  # quiet
        pass


@pytest.fixture
def service() -> Iterator[str]:
    """The stand-in on 127.0.0.1 (a free port) until the test ends: no network beyond it."""
    Service.requests = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Service)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        thread.join(10)


def test_the_service_translator_sends_the_libretranslate_request(service, monkeypatch):
    from conceptual.pipelines.features.translate import (
        ServiceConfig,
        TranslateConfig,
        make_translator,
    )

    monkeypatch.setenv("MY_TRANSLATE_KEY", "k-123")
    for proxy in ("http_proxy", "HTTP_PROXY"):  # straight to the stand-in on loopback
        monkeypatch.delenv(proxy, raising=False)
    config = TranslateConfig(
        translator="service", service=ServiceConfig(url=service, key_env="MY_TRANSLATE_KEY")
    )
    translator = make_translator(config, None, "zh")  # the translate job's service path
    assert isinstance(translator, Translator)
    assert translator.translate(["a dog runs", " ", "two kids play"]) == ["译文0", None, "译文2"]
    check, request = Service.requests  # one word translated as it is built, then the batch
    assert check["body"]["q"] == ["a dog"]
    assert request["path"] == "/translate" and request["type"] == "application/json"
    assert request["body"] == {
        "q": ["a dog runs", " ", "two kids play"],
        "source": "en",
        "target": "zh",
        "format": "text",
        "api_key": "k-123",  # from the environment variable the config names
    }
    # An answer that does not pair with the sentences is refused, never guessed at.
    monkeypatch.setattr(Service, "answer", staticmethod(lambda q: ["只有一句"]))
    with pytest.raises(ValueError, match="1 translations of 2 sentences"):
        translator.translate(["a dog", "a cat"])
