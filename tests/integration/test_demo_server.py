"""The demo's image server over real HTTP on 127.0.0.1: files, special paths, shutdown, the
command line, and the fetch stage's reason for every URL the demo uses."""

from __future__ import annotations

import http.client
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from email.message import Message

import pytest

from conceptual.vision.fetch import FetchConfig, Fetcher
from conceptual_demo import server
from conceptual_demo.images import EXPECTED_REASONS, build_images, failure_urls
from conceptual_demo.server import serve_directory

pytestmark = pytest.mark.integration

SLOW_S = 2.0  # the test server's /slow: longer than the clients' timeouts below


@pytest.fixture(scope="module")
def catalogue(tmp_path_factory):
    return build_images(tmp_path_factory.mktemp("images"))


@pytest.fixture(scope="module")
def demo_server(catalogue):
    with serve_directory(catalogue.directory, slow_s=SLOW_S) as running:
        yield running


def get(url: str, timeout: float = 5.0) -> tuple[int, Message, bytes]:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.status, response.headers, response.read()


def head_of(base_url: str, path: str) -> http.client.HTTPResponse:
    """The response to GET path, redirects not followed."""
    connection = http.client.HTTPConnection(base_url.removeprefix("http://"), timeout=5)
    connection.request("GET", path)
    return connection.getresponse()


def test_binds_loopback_on_a_free_port(demo_server):
    assert demo_server.url.startswith("http://127.0.0.1:")
    assert not demo_server.url.endswith(":0")


def test_serves_the_catalogue_files(demo_server, catalogue):
    for file in catalogue.of_kind("good"):
        status, headers, body = get(f"{demo_server.url}/{file.name}")
        assert status == 200 and headers.get_content_type() == "image/jpeg"
        assert body == catalogue.path(file).read_bytes()
    _, _, listing = get(f"{demo_server.url}/")
    assert all(file.name.encode() in listing for file in catalogue.files)


@pytest.mark.parametrize("code", [404, 500, 503])
def test_status_paths_answer_their_status(demo_server, code):
    with pytest.raises(urllib.error.HTTPError) as error:
        get(f"{demo_server.url}{server.STATUS_PREFIX}{code}")
    assert error.value.code == code


def test_missing_files_and_statuses_are_404(demo_server):
    for path in ("/no-such-photo.jpg", f"{server.STATUS_PREFIX}abc", f"{server.STATUS_PREFIX}200"):
        with pytest.raises(urllib.error.HTTPError) as error:
            get(demo_server.url + path)
        assert error.value.code == 404, path


def test_redirects(demo_server):
    loop = head_of(demo_server.url, server.REDIRECT_LOOP)
    assert loop.status == 302 and loop.getheader("Location") == server.REDIRECT_LOOP
    private = head_of(demo_server.url, server.REDIRECT_PRIVATE)
    assert private.status == 302 and private.getheader("Location") == server.PRIVATE_TARGET


def test_slow_path_outlasts_a_client_timeout(demo_server):
    with pytest.raises((TimeoutError, urllib.error.URLError)):
        get(f"{demo_server.url}{server.SLOW}", timeout=0.3)
    status, _, body = get(f"{demo_server.url}{server.SLOW}", timeout=SLOW_S + 5)
    assert (status, body) == (204, b"")


def test_stop_closes_the_port_at_once_even_with_a_slow_request_pending(catalogue):
    running = serve_directory(catalogue.directory, slow_s=60)
    with pytest.raises((TimeoutError, urllib.error.URLError)):
        get(f"{running.url}{server.SLOW}", timeout=0.2)
    started = time.monotonic()
    running.stop()
    assert time.monotonic() - started < 30  # not the 60 s the sleeper has left
    with pytest.raises(urllib.error.URLError):
        get(f"{running.url}/", timeout=1)


def test_a_missing_directory_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        serve_directory(tmp_path / "nope")


def test_the_command_line_serves_a_directory(catalogue, free_port):
    port = free_port()
    command = [sys.executable, "-m", "conceptual_demo.server", str(catalogue.directory)]
    process = subprocess.Popen([*command, "--port", str(port)], stdout=subprocess.PIPE, text=True)
    try:
        assert f"http://127.0.0.1:{port}/" in process.stdout.readline()
        name = catalogue.of_kind("good")[0].name
        assert get(f"http://127.0.0.1:{port}/{name}")[0] == 200
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
def no_dns(monkeypatch):
    """Tests reach nothing beyond 127.0.0.1: a ".invalid" name fails here as a resolver
    would fail it (RFC 6761), without asking one."""
    real_getaddrinfo = socket.getaddrinfo

    def getaddrinfo(host, *args, **kwargs):
        if str(host).endswith(".invalid"):
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def test_each_failure_url_gets_its_fetch_reason(demo_server, no_dns):
    fetcher = Fetcher(
        FetchConfig(allow_hosts=["127.0.0.1"], timeout_s=0.5, retries=0, backoff_s=0.01)
    )
    urls = failure_urls(demo_server.url)
    results = fetcher.fetch_many(list(urls.values()))
    reasons = {
        kind: result.rejection and result.rejection.reason for kind, result in zip(urls, results)
    }
    assert reasons == {kind: EXPECTED_REASONS[kind] for kind in urls}


def test_each_file_gets_its_fetch_reason_or_arrives_whole(demo_server, catalogue):
    fetcher = Fetcher(
        FetchConfig(
            allow_hosts=["127.0.0.1"], timeout_s=2, retries=0, max_bytes=catalogue.max_bytes
        )
    )
    fetch_reasons = {"too_large", "empty", "not_an_image"}  # the rest are the image filters'
    results = fetcher.fetch_many([f"{demo_server.url}/{file.name}" for file in catalogue.files])
    for file, result in zip(catalogue.files, results, strict=True):
        if file.reason in fetch_reasons:
            assert result.rejection.reason == file.reason, file.name
        else:
            assert result.data == catalogue.path(file).read_bytes(), file.name
