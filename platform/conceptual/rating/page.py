"""The rating page: one item at a time to each rater, every answer stored as it is given.

    app = rating_app(read_task_set(uri), db_url)      # a Starlette app; jobs.rating_page runs it

| path | what |
|---|---|
| GET / | the rater gives a name (remembered in a cookie) |
| GET /rate/NAME | NAME's current item: photo(s), text, question, answer buttons, progress |
| POST /rate/NAME/answer | `item_id` and the answer (`answer`; `relevance`, `fluency`; `match`) |
| POST /rate/NAME/undo | take back NAME's latest answer and show that item again |
| GET /image/ITEM/N | the item's photo (N=0) or its N-th image shown (retrieval) |
| GET /progress | items complete, answers and raters so far (no answers themselves) |

Keyboard: G / B (caption quality); 1-5 relevance then 1-5 fluency, Enter (zh_caption);
1-9 toggle an image, Enter (retrieval); U undo. A rater sees their own item only, never
another's answers. A request the store refuses (an unknown item, a second answer, an item
that is not the one shown, a tampered answer) gets its 4xx status and a page saying why.
"""

from __future__ import annotations

import html
import re
from typing import Any
from urllib.parse import quote, unquote

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from conceptual.rating.store import RatingStore, Refused
from conceptual.rating.tasks import BAD, GOOD, MATCH, NO_MATCH, SCALE, TaskSet

RATER_NAME = re.compile(r"[\w .@-]{1,64}")
COOKIE = "rater"

STYLE = """
body { font-family: sans-serif; max-width: 1100px; margin: 1em auto; padding: 0 1em; }
.photo { max-width: 100%; max-height: 60vh; display: block; margin: 0.5em 0; }
.results { display: flex; flex-wrap: wrap; gap: 0.5em; }
.results label { border: 3px solid #ccc; padding: 0.3em; cursor: pointer; }
.results label:has(input:checked) { border-color: #2a2; }
.results img { height: 180px; display: block; }
.text { font-size: 1.4em; margin: 0.5em 0; }
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
  if (kind === "caption_quality" && (key === "g" || key === "b")) {
    document.getElementById(key === "g" ? "good" : "bad").click();
  } else if (kind === "zh_caption" && key >= "1" && key <= "5") {
    const scale = form.querySelector("input[name=relevance]:checked") ? "fluency" : "relevance";
    form.querySelector(`input[name=${scale}][value="${key}"]`).checked = true;
  } else if (kind === "retrieval" && key >= "1" && key <= "9") {
    const box = form.querySelector(`input[name=match][value="${Number(key) - 1}"]`);
    if (box) box.checked = !box.checked;
  } else if (key === "enter" && kind !== "caption_quality") {
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


def rater_of(request: Request) -> str:
    name = request.path_params["rater"]
    if not RATER_NAME.fullmatch(name):
        raise Refused(400, "a rater's name is 1-64 letters, digits, spaces or . _ @ -")
    return name


def answer_controls(tasks: TaskSet) -> str:
    """The answer's inputs for the kind (what `submitted_answer` reads back)."""
    kind = tasks.kind.name
    if kind == "caption_quality":
        return (
            f"<button id='good' name='answer' value='{GOOD}'>GOOD (G)</button>"
            f"<button id='bad' name='answer' value='{BAD}'>BAD (B)</button>"
        )
    if kind == "zh_caption":
        rows = []
        for scale in ("relevance", "fluency"):
            radios = "".join(
                f"<label><input type='radio' name='{scale}' value='{v}' required> {v}</label> "
                for v in SCALE
            )
            rows.append(f"<p><b>{scale}</b>: {radios}</p>")
        return "".join(rows) + "<button id='submit'>Submit (Enter)</button>"
    return "<button id='submit'>Submit (Enter): the marked images match</button>"


def item_body(tasks: TaskSet, item: dict[str, Any], rater: str) -> str:
    item_id = html.escape(item["item_id"])
    if item["results"]:
        shown = "".join(
            f"<label><input type='checkbox' name='match' value='{n}'> {n + 1}"
            f"<img src='/image/{item_id}/{n + 1}' alt='image {n + 1}'></label>"
            for n in range(len(item["results"]))
        )
        media = f"<div class='results'>{shown}</div>"
    else:
        media = f"<img class='photo' src='/image/{item_id}/0' alt='photo'>"
    text = f"<div class='text' lang='{'zh' if tasks.kind.name == 'zh_caption' else 'en'}'>"
    return (
        f"<p>{html.escape(tasks.kind.question)}</p>{text}{html.escape(item['text'] or '')}</div>"
        f"<form id='answer' method='post' action='/rate/{quote(rater)}/answer' "
        f"data-kind='{tasks.kind.name}'><input type='hidden' name='item_id' value='{item_id}'>"
        f"{media}{answer_controls(tasks)}</form>"
    )


async def submitted_answer(tasks: TaskSet, request: Request) -> tuple[str, str]:
    """(item id, answer as the kind writes it) from the posted form."""
    form = await request.form()
    item_id = str(form.get("item_id") or "")
    if tasks.kind.name == "caption_quality":
        return item_id, str(form.get("answer") or "")
    if tasks.kind.name == "zh_caption":
        return item_id, f"{form.get('relevance') or ''}/{form.get('fluency') or ''}"
    item = tasks.by_id().get(item_id)
    marked = {str(v) for v in form.getlist("match")}
    shown = range(len(item["results"])) if item else range(0)
    if not marked <= {str(n) for n in shown}:
        raise Refused(400, f"the form marks images the item does not show: {sorted(marked)}")
    return item_id, "".join(MATCH if str(n) in marked else NO_MATCH for n in shown)


def rating_app(tasks: TaskSet, db_url: str | None = None) -> Starlette:
    store = RatingStore(tasks, db_url)
    items = tasks.by_id()

    async def welcome(request: Request) -> Response:
        if name := request.query_params.get("rater", "").strip():
            if not RATER_NAME.fullmatch(name):
                raise Refused(400, "a rater's name is 1-64 letters, digits, spaces or . _ @ -")
            response = RedirectResponse(f"/rate/{quote(name)}", status_code=303)
            response.set_cookie(COOKIE, quote(name), max_age=90 * 24 * 3600, samesite="strict")
            return response
        known = html.escape(unquote(request.cookies.get(COOKIE, "")))
        return page(
            "Rating",
            f"<h1>Rating: {html.escape(tasks.name)}</h1><p>{len(items)} items, "
            f"{tasks.raters} raters each. Your name (you come back to where you stopped):</p>"
            f"<form method='get' action='/'><input type='text' id='rater' name='rater' "
            f"value='{known}' required autofocus> <button id='start'>Start</button></form>",
        )

    async def rate(request: Request) -> Response:
        rater = rater_of(request)
        item_id = store.current(rater)
        progress = store.progress(rater)
        undo = (
            f"<form id='undo' method='post' action='/rate/{quote(rater)}/undo'>"
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
            "zh_caption": "1-5: relevance, then 1-5: fluency · Enter: submit",
            "retrieval": "1-9: mark an image · Enter: submit",
        }[tasks.kind.name]
        return page(
            "Rating",
            status
            + item_body(tasks, items[item_id], rater)
            + f"<p class='keys'>Keys: {keys} · U: undo last</p>{undo}",
        )

    async def answer(request: Request) -> Response:
        rater = rater_of(request)
        item_id, given = await submitted_answer(tasks, request)
        store.answer(rater, item_id, given)
        return RedirectResponse(f"/rate/{quote(rater)}", status_code=303)

    async def undo(request: Request) -> Response:
        rater = rater_of(request)
        store.undo(rater)
        return RedirectResponse(f"/rate/{quote(rater)}", status_code=303)

    async def image(request: Request) -> Response:
        item = items.get(request.path_params["item_id"])
        n = request.path_params["n"]
        photos = [item["image"], *(r["image"] for r in item["results"] or [])] if item else []
        if not 0 <= n < len(photos) or not photos[n]:
            raise Refused(404, "no such image")
        return Response(
            photos[n], media_type="image/jpeg", headers={"Cache-Control": "max-age=3600"}
        )

    async def progress(request: Request) -> Response:
        return JSONResponse({"task_set": tasks.name, **store.overview()})

    async def refused(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, Refused)
        back = "<p><a href='/'>back to the start</a></p>"
        if rater := request.path_params.get("rater"):
            back = f"<p><a id='back' href='/rate/{quote(rater)}'>back to your item</a></p>"
        message = f"<h1>Not stored</h1><p class='error' id='error'>{html.escape(str(exc))}</p>"
        return page("Not stored", message + back, exc.status)

    routes = [
        Route("/", welcome),
        Route("/rate/{rater}", rate),
        Route("/rate/{rater}/answer", answer, methods=["POST"]),
        Route("/rate/{rater}/undo", undo, methods=["POST"]),
        Route("/image/{item_id}/{n:int}", image),
        Route("/progress", progress),
    ]
    return Starlette(routes=routes, exception_handlers={Refused: refused})
