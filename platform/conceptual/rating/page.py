"""The rating page: one item at a time to each rater, every answer stored as it is given.

    app = rating_app(RatingStore(read_task_set(uri), db_url))  # Starlette; jobs.rating_page runs it

| path | what |
|---|---|
| GET / | where to start: an invited rater's link, or (`open_raters`) a name to type |
| GET /rate/KEY | the rater's current item: photo(s), text(s), question, answer controls, progress |
| POST /rate/KEY/answer | `item_id` and the answer (`answer`; `relevance.N` and `fluency.N` for the N-th caption shown; `match`) |
| POST /rate/KEY/undo | take back the rater's latest answer and show that item again |
| GET /rate/KEY/image/ITEM/N | the item's photo (N=0) or its N-th image shown (retrieval by a query) |
| GET /progress | items complete, answers and raters so far (no answers themselves) |

Who rates (the trust model). KEY is the token of an invitation (RatingStore.invite, which
`jobs.rating_page --invite NAME` makes and prints as a link): the page answers only invited
raters, and shows the name the invitation was made for. With `open_raters` (a trusted room,
`--open`) KEY is a name typed at /, normalized (NFKC, case, spaces) so that "Alice",
"alice" and "alice " are one rater; a name that only looks like another is refused, as
browsers refuse such host names (`looks_like_another`). Images are served under KEY too.
Every POST carries the form's CSRF token (an HMAC of the rater under the database's key)
and is refused with an Origin or Referer of another origin (scheme, host and port: another
port of 127.0.0.1 is another site's); every request is refused whose Host is not one the
page serves (`hosts`: DNS rebinding). A request body over MAX_BODY_BYTES is refused before
it is read.

Keyboard: G / B (caption quality); F / N / D (fluency label); 1-5 the relevance, then the
fluency, of each caption in turn, Enter (zh_caption: every approach's caption of the photo
side by side, each graded on its own); 1-9 toggle an image (or, for a photo's retrieved
captions, a caption), Enter (retrieval); U undo. A rater sees their own item only, never another's answers. A request the store
refuses (an unknown item, a second answer, an item that is not the one shown, a tampered
answer) gets its 4xx status and a page saying why.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import re
import unicodedata
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, urlsplit

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from conceptual.rating.store import RatingStore, Refused
from conceptual.rating.tasks import (
    BAD,
    DIFFICULT,
    FLUENT,
    GOOD,
    MATCH,
    NO_MATCH,
    NOT_FLUENT,
    SCALE,
    SCALES,
    TaskSet,
    sentences,
)

RATER_NAME = re.compile(r"[\w .@-]{1,64}")
NAME_RULE = "a rater's name is 1-64 letters, digits, spaces or . _ @ -"
MAX_BODY_BYTES = 16 << 10  # an answer is a few fields: item id, a word or a few digits
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
DEFAULT_PORTS = {"http": 80, "https": 443}
# The scripts that may share a name (Unicode TS 39's "highly restrictive" level: Japanese,
# Chinese and Korean names mix these), keyed as `script` names them.
SCRIPT_MIXES = (
    {"LATIN", "CJK", "HIRAGANA", "KATAKANA", "KATAKANA-HIRAGANA"},
    {"LATIN", "CJK", "BOPOMOFO"},
    {"LATIN", "CJK", "HANGUL"},
)
# Cyrillic and Greek letters (case folded) that look like Latin ones: a name of these alone
# reads as a Latin name (Chromium's rule for host names, with the Greek look-alikes added).
LATIN_LOOKALIKES = set("асԁеһіјӏорԛѕԝхуьҽпгѵѡ" + "οαικνρυχ")

STYLE = """
body { font-family: sans-serif; max-width: 1100px; margin: 1em auto; padding: 0 1em; }
.photo { max-width: 100%; max-height: 60vh; display: block; margin: 0.5em 0; }
.results { display: flex; flex-wrap: wrap; gap: 0.5em; }
.results label { border: 3px solid #ccc; padding: 0.3em; cursor: pointer; }
.results label:has(input:checked) { border-color: #2a2; }
.results img { height: 180px; display: block; }
.captions label { display: block; font-size: 1.2em; margin: 0.3em 0; cursor: pointer; }
.captions label:has(input:checked) { background: #dfd; }
.text { font-size: 1.4em; margin: 0.5em 0; }
.sentences li { margin: 0.8em 0; }
.progress { color: #555; } .keys { color: #777; font-size: 0.9em; }
.error { color: #b00; font-size: 1.2em; }
button { font-size: 1.1em; margin: 0.2em; padding: 0.3em 1em; }
"""

KEYS = """
<script>
document.addEventListener("keydown", (e) => {
  if (e.target.tagName === "INPUT" && e.target.type === "text") return;
  const form = document.getElementById("answer"), key = e.key.toLowerCase();
  if (key === "u") { document.getElementById("undo").submit(); return; }
  if (!form) return;
  const kind = form.dataset.kind;
  const buttons = {caption_quality: {g: "good", b: "bad"},
                   fluency_label: {f: "fluent", n: "not-fluent", d: "difficult"}}[kind];
  if (buttons && buttons[key]) {
    document.getElementById(buttons[key]).click();
  } else if (kind === "zh_caption" && key >= "1" && key <= "5") {
    // the first grade not given yet: a caption's relevance, then its fluency, then the next
    const open = [...form.querySelectorAll(".grade")].find((g) => !g.querySelector(":checked"));
    if (open) open.querySelector(`input[value="${key}"]`).checked = true;
  } else if (kind === "retrieval" && key >= "1" && key <= "9") {
    const box = form.querySelector(`input[name=match][value="${Number(key) - 1}"]`);
    if (box) box.checked = !box.checked;
  } else if (key === "enter" && !buttons) {
    form.requestSubmit();
  }
});
</script>
"""


def page(title: str, body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{STYLE}</style></head><body>{body}{KEYS}</body></html>",
        status_code=status,
    )


def normalized_name(typed: str) -> str:
    """A typed rater name as one spelling: NFKC, case folded (and NFKC again, as folding can
    undo it), spaces collapsed; Refused when what is left is not a name, or is one that
    would show as another's."""
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", typed).casefold())
    name = " ".join(folded.split())
    if not RATER_NAME.fullmatch(name):
        raise Refused(400, NAME_RULE)
    if looks_like_another(name):
        raise Refused(400, "a rater's name is written in one script, as it looks")
    return name


def script(letter: str) -> str:
    """The script of a letter as the first word of its Unicode name ("CYRILLIC SMALL
    LETTER A" -> "CYRILLIC"): the standard library has no Script property."""
    return unicodedata.name(letter, "UNNAMED").split()[0]


def looks_like_another(name: str) -> bool:
    """Whether `name` could show as a different name: its letters mix scripts (a Cyrillic
    "а" among Latin ones) beyond SCRIPT_MIXES, or are all Cyrillic or Greek look-alikes of
    Latin letters (a whole "аӏісе")."""
    letters = [c for c in name if unicodedata.category(c)[0] in "LM"]
    scripts = {script(c) for c in letters}
    if len(scripts) > 1 and not any(scripts <= mix for mix in SCRIPT_MIXES):
        return True
    return scripts <= {"CYRILLIC", "GREEK"} and bool(letters) and set(letters) <= LATIN_LOOKALIKES


def form_token(key: bytes, task_set: str, rater: str) -> str:
    """The CSRF token of a rater's forms: the rater's HMAC under the database's key."""
    return hmac.new(key, f"{task_set}\0{rater}".encode(), hashlib.sha256).hexdigest()[:32]


def host_of(value: str) -> str:
    """The host of a Host header or an origin, without its port ("[::1]:8300" -> "::1")."""
    netloc = urlsplit(value).netloc if "://" in value else value
    return (urlsplit(f"//{netloc}").hostname or "").lower()


def origin_of(url: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of a URL, its scheme's port when none is written; None when it
    has none of these (a "null" Origin) or a port that is not one."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port or DEFAULT_PORTS.get(scheme)
    except ValueError:
        return None
    return (scheme, parts.hostname, port) if parts.hostname and port else None


# The answer buttons of the kinds answered with one (element id, answer, label).
BUTTONS = {
    "caption_quality": (("good", GOOD, "GOOD (G)"), ("bad", BAD, "BAD (B)")),
    "fluency_label": (
        ("fluent", FLUENT, "Fluent (F)"),
        ("not-fluent", NOT_FLUENT, "Not fluent (N)"),
        ("difficult", DIFFICULT, "Difficult to tell (D)"),
    ),
}


def answer_controls(tasks: TaskSet, item: dict[str, Any]) -> str:
    """The answer's inputs for the kind (what `submitted_answer` reads back)."""
    kind = tasks.kind.name
    if kind in BUTTONS:
        return "".join(
            f"<button id='{element}' name='answer' value='{answer}'>{label}</button>"
            for element, answer, label in BUTTONS[kind]
        )
    if kind == "zh_caption":
        return f"{graded_captions(item)}<button id='submit'>Submit (Enter)</button>"
    return "<button id='submit'>Submit (Enter): the marked images match</button>"


def graded_captions(item: dict[str, Any]) -> str:
    """Each caption the item shows, in the order shown, with its own grades
    (`relevance.N`, `fluency.N`): the approaches side by side, their names never shown."""
    shown = []
    for n, sentence in enumerate(sentences(item)):
        grades = "".join(
            f"<p class='grade'><b>{scale}</b>: "
            + "".join(
                f"<label><input type='radio' name='{scale}.{n}' value='{v}' required> {v}</label> "
                for v in SCALE
            )
            + "</p>"
            for scale in SCALES
        )
        text = html.escape(sentence["text"] or "")
        shown.append(f"<li><div class='text' lang='zh'>{text}</div>{grades}</li>")
    return f"<ol class='sentences'>{''.join(shown)}</ol>"


def shows_captions(item: dict[str, Any]) -> bool:
    """A retrieval item of a photo and the captions found for it (image_to_query)."""
    return bool(item["results"]) and item["results"][0].get("text") is not None


def item_body(tasks: TaskSet, item: dict[str, Any], key: str, csrf: str) -> str:
    item_id = html.escape(item["item_id"])
    images = f"/rate/{quote(key)}/image/{quote(item['item_id'], safe='')}"  # the rater's own link
    photo = f"<img class='photo' src='{images}/0' alt='photo'>"
    if shows_captions(item):
        shown = "".join(
            f"<label class='caption'><input type='checkbox' name='match' value='{n}'> {n + 1}. "
            f"{html.escape(result['text'])}</label>"
            for n, result in enumerate(item["results"])
        )
        media = f"{photo}<div class='captions'>{shown}</div>"
    elif item["results"]:
        shown = "".join(
            f"<label><input type='checkbox' name='match' value='{n}'> {n + 1}"
            f"<img src='{images}/{n + 1}' alt='image {n + 1}'></label>"
            for n in range(len(item["results"]))
        )
        media = f"<div class='results'>{shown}</div>"
    else:
        media = photo
    kind = tasks.kind.name
    # zh_caption's captions are shown with their grades (answer_controls)
    text = "" if kind == "zh_caption" else html.escape(item["text"] or "")
    language = "zh" if kind == "fluency_label" else "en"
    return (
        f"<p>{html.escape(tasks.question)}</p><div class='text' lang='{language}'>{text}</div>"
        f"<form id='answer' method='post' action='/rate/{quote(key)}/answer' "
        f"data-kind='{kind}'><input type='hidden' name='item_id' value='{item_id}'>"
        f"<input type='hidden' name='csrf' value='{csrf}'>{media}"
        f"{answer_controls(tasks, item)}</form>"
    )


async def submitted_answer(tasks: TaskSet, form: Any) -> tuple[str, str]:
    """(item id, answer as the kind writes it) from the posted form."""
    item_id = str(form.get("item_id") or "")
    if tasks.kind.name in BUTTONS:
        return item_id, str(form.get("answer") or "")
    item = tasks.by_id().get(item_id)
    if tasks.kind.name == "zh_caption":  # an unknown item's empty answer: the store says why
        places = range(len(sentences(item))) if item else range(0)
        return item_id, " ".join(
            f"{form.get(f'relevance.{n}') or ''}/{form.get(f'fluency.{n}') or ''}" for n in places
        )
    marked = {str(v) for v in form.getlist("match")}
    shown = range(len(item["results"])) if item else range(0)
    if not marked <= {str(n) for n in shown}:
        raise Refused(400, f"the form marks images the item does not show: {sorted(marked)}")
    return item_id, "".join(MATCH if str(n) in marked else NO_MATCH for n in shown)


def rating_app(
    store: RatingStore, open_raters: bool = False, hosts: Iterable[str] = LOCAL_HOSTS
) -> Starlette:
    """The page of the store's task set: for invited raters, or with `open_raters` for names
    typed at /; answering requests whose Host is one of `hosts`."""
    tasks, items = store.tasks, store.items
    csrf_key = store.csrf_key()
    served = {host_of(host) for host in hosts}

    def rater_of(request: Request) -> tuple[str, str]:
        """(the KEY in the path, the rater's name)."""
        key = request.path_params["rater"]
        if open_raters:
            return key, normalized_name(key)
        name = store.invited(key)
        if name is None:
            raise Refused(403, "this link is no invitation to this task set: ask for yours")
        return key, name

    async def posted(request: Request) -> tuple[str, str, Any]:
        """(KEY, rater, form) of a POST whose form this page made for that rater."""
        key, rater = rater_of(request)
        form = await request.form()
        given = str(form.get("csrf") or "")
        if not hmac.compare_digest(given, form_token(csrf_key, tasks.name, rater)):
            raise Refused(403, "this form was not made by this page for you: reload your item")
        return key, rater, form

    async def welcome(request: Request) -> Response:
        title = f"<h1>Rating: {html.escape(tasks.name)}</h1><p>{len(items)} items, {tasks.raters} raters each."
        if not open_raters:
            return page("Rating", f"{title} Open the link you were given to start.</p>")
        if typed := request.query_params.get("rater", "").strip():
            return RedirectResponse(f"/rate/{quote(normalized_name(typed))}", status_code=303)
        return page(
            "Rating",
            f"{title} Your name (you come back to where you stopped):</p>"
            f"<form method='get' action='/'><input type='text' id='rater' name='rater' "
            f"required autofocus> <button id='start'>Start</button></form>",
        )

    async def rate(request: Request) -> Response:
        key, rater = rater_of(request)
        item_id = store.current(rater)
        progress = store.progress(rater)
        csrf = form_token(csrf_key, tasks.name, rater)
        undo = (
            f"<form id='undo' method='post' action='/rate/{quote(key)}/undo'>"
            f"<input type='hidden' name='csrf' value='{csrf}'>"
            f"<button id='undo-button'>Undo last (U)</button></form>"
        )
        status = (
            f"<p class='progress' id='progress'>{html.escape(rater)}: {progress.answered} "
            f"answered, {progress.left} left for you · {progress.complete} of {progress.items} "
            f"items complete</p>"
        )
        if item_id is None:
            return page("Done", f"{status}<h1 id='done'>All done: thank you!</h1>{undo}")
        keys = {
            "caption_quality": "G: good · B: bad",
            "fluency_label": "F: fluent · N: not fluent · D: difficult to tell",
            "zh_caption": "1-5: relevance, then fluency, of each caption in turn · Enter: submit",
            "retrieval": f"1-9: mark {'a caption' if shows_captions(items[item_id]) else 'an image'}"
            " · Enter: submit",
        }[tasks.kind.name]
        return page(
            "Rating",
            status
            + item_body(tasks, items[item_id], key, csrf)
            + f"<p class='keys'>Keys: {keys} · U: undo last</p>{undo}",
        )

    async def answer(request: Request) -> Response:
        key, rater, form = await posted(request)
        item_id, given = await submitted_answer(tasks, form)
        store.answer(rater, item_id, given)
        return RedirectResponse(f"/rate/{quote(key)}", status_code=303)

    async def undo(request: Request) -> Response:
        key, rater, _ = await posted(request)
        store.undo(rater)
        return RedirectResponse(f"/rate/{quote(key)}", status_code=303)

    async def image(request: Request) -> Response:
        rater_of(request)  # an invited rater's (or, open, a name's): photos are not public
        item = items.get(request.path_params["item_id"])
        n = request.path_params["n"]
        photos = [item["image"], *(r["image"] for r in item["results"] or [])] if item else []
        if not 0 <= n < len(photos) or not photos[n]:
            raise Refused(404, "no such image")
        return Response(
            photos[n], media_type="image/jpeg", headers={"Cache-Control": "private, max-age=3600"}
        )

    async def progress(request: Request) -> Response:
        return JSONResponse({"task_set": tasks.name, **store.overview()})

    async def refused(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, Refused)
        back = "<p><a href='/'>back to the start</a></p>"
        if exc.status != 403 and (key := request.path_params.get("rater")):
            back = f"<p><a id='back' href='/rate/{quote(key)}'>back to your item</a></p>"
        message = f"<h1>Not stored</h1><p class='error' id='error'>{html.escape(str(exc))}</p>"
        return page("Not stored", message + back, exc.status)

    routes = [
        Route("/", welcome),
        Route("/rate/{rater}", rate),
        Route("/rate/{rater}/answer", answer, methods=["POST"]),
        Route("/rate/{rater}/undo", undo, methods=["POST"]),
        Route("/rate/{rater}/image/{item_id}/{n:int}", image),
        Route("/progress", progress),
    ]
    app = Starlette(routes=routes, exception_handlers={Refused: refused})
    return SameSiteOnly(app, served)


class SameSiteOnly:
    """ASGI guard in front of the page: a Host the page does not serve gets 421, a POST with
    an Origin (or, without one, a Referer) of another origin 403, and a body over
    MAX_BODY_BYTES 413, declared or as it arrives, before the page reads it."""

    def __init__(self, app: Any, hosts: set[str]) -> None:
        self.app, self.hosts = app, hosts

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = host_of(headers.get("host", ""))
        if host not in self.hosts:
            return await refuse(send, 421, "this page is not served under that host name")
        source = headers.get("origin") or headers.get("referer")
        own = origin_of(f"{scope['scheme']}://{headers.get('host', '')}")
        if scope["method"] == "POST" and source and (own is None or origin_of(source) != own):
            return await refuse(send, 403, "a form from another site is not taken")
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
            return await refuse(send, 413, f"a request body may hold {MAX_BODY_BYTES} bytes")
        received = 0

        async def bounded() -> dict:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > MAX_BODY_BYTES:
                raise Refused(413, f"a request body may hold {MAX_BODY_BYTES} bytes")
            return message

        try:
            await self.app(scope, bounded, send)
        except Refused as exc:  # raised by `bounded`, under the app's own handlers
            await refuse(send, exc.status, str(exc))


async def refuse(send: Any, status: int, message: str) -> None:
    await page("Refused", f"<p class='error' id='error'>{html.escape(message)}</p>", status)(
        {"type": "http"}, None, send
    )
