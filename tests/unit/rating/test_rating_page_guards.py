"""What the rating page keeps from strangers (Starlette's test client, the store on a real
SQLite file): an item's photos only under an invitation, forms only from the page's own
origin (scheme, host and port), one rater per name however it is spelled and no name that
only looks like another, and a database file that is its owner's alone."""

from __future__ import annotations

import random
import stat

import pytest
from starlette.testclient import TestClient

from conceptual.rating.page import form_token, normalized_name, rating_app
from conceptual.rating.store import RatingStore, Refused
from conceptual.rating.tasks import new_task_set

PHOTO = b"\xff\xd8 a photo \xff\xd9"


def store_of(tmp_path) -> RatingStore:
    item = {"item_id": "item-0", "approach": "model", "text": "a caption", "image": PHOTO,
            "image_id": None, "source_id": "r0", "results": None}  # fmt: skip
    tasks = new_task_set("caption_quality", [item], 2, 0, {"data": "d"}, random.Random(0))
    return RatingStore(tasks, f"sqlite:///{tmp_path / 'ratings.db'}")


def test_an_items_photo_is_served_to_an_invited_rater_only(tmp_path):
    store = store_of(tmp_path)
    ann = store.invite("ann")
    client = TestClient(rating_app(store, hosts=["testserver"]))
    shown = client.get(f"/rate/{ann}").text
    assert f"src='/rate/{ann}/image/item-0/0'" in shown  # under the rater's own link
    assert client.get(f"/rate/{ann}/image/item-0/0").content == PHOTO
    assert client.get("/image/item-0/0").status_code == 404  # no public path
    assert client.get("/rate/not-an-invitation/image/item-0/0").status_code == 403


def test_a_form_from_another_port_or_scheme_is_refused(tmp_path):
    store = store_of(tmp_path)
    client = TestClient(rating_app(store, open_raters=True, hosts=["testserver"]))
    client.get("/rate/ann")  # the item on ann's screen
    form = {"csrf": form_token(store.csrf_key(), store.tasks.name, "ann")}
    for other in ("http://testserver:8081", "https://testserver", "null"):
        assert (
            client.post("/rate/ann/undo", data=form, headers={"Origin": other}).status_code == 403
        )
    refer = {"Referer": "http://testserver:8081/rate/ann"}
    assert client.post("/rate/ann/undo", data=form, headers=refer).status_code == 403
    for own in ("http://testserver", "http://TestServer:80"):  # the page's own origin
        answered = client.post("/rate/ann/answer", data={**form, "item_id": "item-0",
                               "answer": "GOOD"}, headers={"Origin": own})  # fmt: skip
        assert answered.status_code == 200, answered.text
        assert client.post("/rate/ann/undo", data=form, headers={"Origin": own}).status_code == 200


@pytest.mark.parametrize(
    "typed",
    ["\u0430lice", "\u0430\u04cf\u0456\u0441\u0435", "\u0391LICE", "p\u0430ypal"],
    ids=["a Cyrillic a among Latin", "all Cyrillic look-alikes", "a Greek capital alpha",
         "mixed in the middle"],
)  # fmt: skip
def test_a_name_that_only_looks_like_another_is_refused(typed):
    with pytest.raises(Refused, match="one script") as refused:
        normalized_name(typed)
    assert refused.value.status == 400


def test_names_in_one_script_are_one_rater_however_spelled():
    assert normalized_name("\uff21lice") == normalized_name(" ALICE ") == "alice"  # fullwidth
    assert normalized_name("\u0391\u039b\u0399\u039a\u0397") == "\u03b1\u03bb\u03b9\u03ba\u03b7"
    for name in ("\u043c\u0430\u0448\u0430", "\u5c71\u7530 \u306f\u306a\u3053",
                 "\u0645\u0631\u064a\u0645", "\u00e9lodie 2"):  # fmt: skip
        assert normalized_name(name) == name  # Cyrillic, Japanese, Arabic, accented Latin


def test_the_open_page_turns_a_look_alike_away(tmp_path):
    client = TestClient(rating_app(store_of(tmp_path), open_raters=True, hosts=["testserver"]))
    assert client.get("/rate/alice").status_code == 200
    assert client.get("/rate/\u0430lice").status_code == 400
    assert (
        client.get("/", params={"rater": "\u0430lice"}, follow_redirects=False).status_code == 400
    )


def test_the_database_file_is_created_the_owners_alone(tmp_path):
    store_of(tmp_path).csrf_key()
    assert stat.S_IMODE((tmp_path / "ratings.db").stat().st_mode) == 0o600
