"""The rating page in a real browser: Debian's headless Chromium, driven through its
chromium-driver by Selenium (no browser is downloaded), against the page on uvicorn and
its answers in SQLite. A rater clicks and types through a task set, closes the browser, the
server restarts, the rater comes back to where they stopped; the stored answers are read
back from the database. Invited raters by their links, an open room by typed names; what
the page refuses to strangers (no invitation, no or another's form token, another site's
form, another Host, a huge body). The page's screenshot is kept in tests/artifacts/
(printed)."""

from __future__ import annotations

import io
import random
import socket
import threading
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import uvicorn
from PIL import Image
from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from waiting import wait_until  # tests/waiting.py

from conceptual.rating.page import form_token, rating_app
from conceptual.rating.store import RatingStore
from conceptual.rating.tasks import TaskSet, new_task_set

pytestmark = pytest.mark.integration

CHROMIUM, DRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"


def photo(colour: tuple[int, int, int]) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (320, 240), colour).save(buffer, "JPEG")
    return buffer.getvalue()


def item(n: int, **fields) -> dict:
    return {"item_id": f"item-{n}", "approach": "model", "text": f"a red square number {n}",
            "image": photo((200, 30 * n, 30)), "image_id": None, "source_id": f"r{n}",
            "results": None, **fields}  # fmt: skip


def task_set(kind: str, items: list[dict], raters: int = 2) -> TaskSet:
    return new_task_set(kind, items, raters, 0, {"data": "test"}, random.Random(0))


@contextmanager
def serving(tasks: TaskSet, db: str, port: int, open_raters: bool = False) -> Iterator[str]:
    """The rating page on 127.0.0.1:port until the block ends (a server process's life)."""
    app = rating_app(RatingStore(tasks, db), open_raters=open_raters)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_until(lambda: server.started or not thread.is_alive(), "the page to start", 20, 0.05)
    assert server.started, "the page's server stopped before it started"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


@contextmanager
def browser() -> Iterator[webdriver.Chrome]:
    assert CHROMIUM.exists() and DRIVER.exists(), "chromium and chromium-driver: run make setup"
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1200,900"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(str(DRIVER)))
    driver.implicitly_wait(5)
    try:
        yield driver
    finally:
        driver.quit()


def shown_item(driver) -> str | None:
    found = driver.find_elements(By.CSS_SELECTOR, "input[name=item_id]")
    return found[0].get_attribute("value") if found else None


def submit(driver, act: Callable[[], object], what: str) -> None:
    """`act` (a click or keys that send a form), then wait until the next page has replaced
    this one and loaded. Every action that leads to a new page goes through here: a click or
    a key returns before the page it asked for arrives, so a read right after it can find
    the old page's element as it goes stale. The old page is told apart by a mark on its
    window (a new document gets a new one), not by an element, which a vanishing page
    reports in more ways than one."""
    mark = uuid.uuid4().hex
    driver.execute_script("window.pageMark = arguments[0]", mark)
    act()

    def arrived() -> bool:
        try:
            return driver.execute_script(
                "return document.readyState === 'complete' && window.pageMark !== arguments[0]",
                mark,
            )
        except WebDriverException:  # the old page unloading under the script
            return False

    wait_until(arrived, f"{what} to bring the next page", 10, step_s=0.05)


def press(driver, *keys: str) -> None:
    """Keys typed on the page (not into a field), the last one sending its form."""
    body = driver.find_element(By.TAG_NAME, "body")
    submit(driver, lambda: [body.send_keys(key) for key in keys], f"the keys {keys}")


def click(driver, element_id: str) -> None:
    """A click on the element with `element_id`, which sends its form."""
    submit(driver, driver.find_element(By.ID, element_id).click, f"a click on #{element_id}")


def sign_in(driver, base: str, name: str) -> None:
    driver.get(base + "/")
    field = driver.find_element(By.ID, "rater")
    field.clear()
    field.send_keys(name)
    click(driver, "start")
    driver.find_element(By.ID, "progress")


def post(url: str, fields: dict[str, str], **headers: str) -> tuple[int, str]:
    data = urllib.parse.urlencode(fields).encode()
    request = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def status_of_raw_post(url: str, headers: list[str], body: bytes = b"") -> str:
    """The status line the page answers a POST of these headers and body with, over a plain
    socket: a request refused before its body is read is not sent its body (a client that
    goes on sending to a closed connection gets a reset, not the answer)."""
    parts = urllib.parse.urlsplit(url)
    lines = [f"POST {parts.path} HTTP/1.1", f"Host: {parts.netloc}", *headers, "", ""]
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as connection:
        connection.sendall("\r\n".join(lines).encode() + body)
        return connection.makefile("rb").readline().decode().strip()


def test_an_invited_rater_clicks_through_closes_and_resumes(tmp_path, free_port, capsys):
    tasks = task_set("caption_quality", [item(n) for n in range(3)])
    order = [i["item_id"] for i in tasks.items]
    db = f"sqlite:///{tmp_path / 'ratings.db'}"
    store = RatingStore(tasks, db)
    ann, bob = store.invite("ann"), store.invite("bob")  # what rating_page --invite prints

    with serving(tasks, db, free_port()) as base, browser() as driver:
        driver.get(f"{base}/rate/{ann}")
        assert shown_item(driver) == order[0]
        assert "ann: 0 answered, 3 left for you" in driver.find_element(By.ID, "progress").text
        press(driver, "g")  # GOOD by keyboard
        assert shown_item(driver) == order[1]
        click(driver, "bad")  # BAD by mouse
        assert shown_item(driver) == order[2]
        press(driver, "u")  # undo: the second item again
        assert shown_item(driver) == order[1]
        press(driver, "g")
        assert shown_item(driver) == order[2]
        # What the page refuses over HTTP, changing nothing: the form of an unknown item,
        # a tampered answer, an item that is not the one shown, a second answer.
        csrf = driver.find_element(By.NAME, "csrf").get_attribute("value")
        answer_url = f"{base}/rate/{ann}/answer"
        assert post(answer_url, {"item_id": "item-99", "answer": "GOOD", "csrf": csrf})[0] == 404
        status, page = post(answer_url, {"item_id": order[2], "answer": "PERFECT", "csrf": csrf})
        assert status == 400 and "GOOD or BAD" in page
        assert post(answer_url, {"item_id": order[0], "answer": "BAD", "csrf": csrf})[0] == 409
        bobs = form_token(store.csrf_key(), tasks.name, "bob")
        bob_answers = {"item_id": order[2], "answer": "GOOD", "csrf": bobs}
        assert post(f"{base}/rate/{bob}/answer", bob_answers)[0] == 409  # not shown to bob
        # ...and what it refuses to strangers: no invitation, ann's form token for bob, no
        # token, another site's form, a name typed into the URL, another Host, a huge body.
        undo = f"{base}/rate/{ann}/undo"
        assert post(f"{base}/rate/ann/answer", {"item_id": order[2], "csrf": csrf})[0] == 403
        assert post(f"{base}/rate/{bob}/undo", {"csrf": csrf})[0] == 403
        assert post(undo, {})[0] == 403
        assert post(undo, {"csrf": csrf}, Origin="http://evil.test")[0] == 403
        assert post(undo, {"csrf": csrf}, Referer="http://evil.test/rate")[0] == 403
        assert post(undo, {"csrf": csrf}, Host="evil.test")[0] == 421
        form_type = "Content-Type: application/x-www-form-urlencoded"
        declared = [form_type, f"Content-Length: {300 << 20}"]  # 300 MB, never sent
        assert status_of_raw_post(undo, declared).startswith("HTTP/1.1 413")
        form = f"csrf={csrf}&pad=".encode() + b"x" * (20 << 10)  # no length declared:
        chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(form), form)  # counted as it comes
        status = status_of_raw_post(undo, [form_type, "Transfer-Encoding: chunked"], chunked)
        assert status.startswith("HTTP/1.1 413")
        assert "All done" not in urllib.request.urlopen(f"{base}/rate/{ann}").read().decode()
    # The browser is closed and the server stopped; a new server on the same database.
    with serving(tasks, db, free_port()) as base, browser() as driver:
        driver.get(base + "/")
        assert "Open the link you were given" in driver.page_source  # no name to type
        driver.get(f"{base}/rate/{ann}")
        assert shown_item(driver) == order[2]  # where ann stopped
        assert "2 answered, 1 left for you" in driver.find_element(By.ID, "progress").text
        ARTIFACTS.mkdir(exist_ok=True)
        screenshot = ARTIFACTS / "rating_page.png"
        assert driver.save_screenshot(str(screenshot))
        with capsys.disabled():
            print(f"\nrating page screenshot: {screenshot}")
        press(driver, "b")
        assert driver.find_element(By.ID, "done").text.startswith("All done")
        driver.get(f"{base}/rate/{bob}")  # a second rater gets every item; no one sees answers
        assert shown_item(driver) == order[0]
        assert "GOOD" not in driver.find_element(By.ID, "progress").text
        driver.get(f"{base}/rate/{ann}x")
        assert "no invitation" in driver.find_element(By.ID, "error").text

    stored = RatingStore(tasks, db).ratings()
    assert [(r["rater"], r["item_id"], r["answer"]) for r in stored] == [
        ("ann", order[0], "GOOD"),
        ("ann", order[1], "GOOD"),
        ("ann", order[2], "BAD"),
    ]
    assert Image.open(screenshot).size[0] > 0


def test_in_an_open_room_a_typed_name_is_one_rater_however_spelled(tmp_path, free_port):
    tasks = task_set("caption_quality", [item(n) for n in range(3)], raters=3)
    db = f"sqlite:///{tmp_path / 'ratings.db'}"
    with serving(tasks, db, free_port(), open_raters=True) as base, browser() as driver:
        for typed in ("alice", "Alice", "  ALICE "):
            sign_in(driver, base, typed)
            assert driver.find_element(By.ID, "progress").text.startswith("alice: ")
            press(driver, "g")
        driver.get(f"{base}/rate/alice%20")
        assert driver.find_element(By.ID, "progress").text.startswith("alice: 3 answered")
    assert {r["rater"] for r in RatingStore(tasks, db).ratings()} == {"alice"}


def result(rank: int | None, colour: tuple[int, int, int]) -> dict:
    return {"image_id": f"i{rank}", "image": photo(colour), "rank": rank, "correct": rank == 2}


def test_keyboard_answers_of_the_scales_and_the_ranked_images(tmp_path, free_port):
    captions = [{"approach": "weighted loss", "text": "一只红色的方块"},
                {"approach": "late translation", "text": "红色方块"}]  # fmt: skip
    zh = task_set("zh_caption", [item(0, text=None, approach=None, sentences=captions)], raters=1)
    shown = [s["text"] for s in zh.items[0]["sentences"]]  # in the order the seed drew
    ranked = [result(rank, (40 * rank, 90, 200)) for rank in (3, 1, 5, 2, 4)]
    retrieval = task_set("retrieval", [item(0, image=None, results=ranked)], raters=1)
    db = f"sqlite:///{tmp_path / 'ratings.db'}"
    with browser() as driver:
        with serving(zh, db, free_port(), open_raters=True) as base:
            sign_in(driver, base, "ann")
            texts = driver.find_elements(By.CSS_SELECTOR, ".sentences .text")
            assert [t.text for t in texts] == shown  # side by side, in the item's order
            assert "weighted" not in driver.page_source  # approaches are never shown
            press(driver, "4", "5", "2", "3", Keys.ENTER)  # relevance, fluency of each
            driver.find_element(By.ID, "done")
        with serving(retrieval, db, free_port(), open_raters=True) as base:
            sign_in(driver, base, "ann")
            assert len(driver.find_elements(By.CSS_SELECTOR, ".results img")) == 5
            press(driver, "1", "3", "3", "4", Keys.ENTER)  # 3 marked and unmarked again
            driver.find_element(By.ID, "done")
    assert [r["answer"] for r in RatingStore(zh, db).ratings()] == ["4/5 2/3"]
    assert [r["answer"] for r in RatingStore(retrieval, db).ratings()] == ["YNNYN"]
