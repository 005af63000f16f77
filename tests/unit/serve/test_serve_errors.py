"""API errors (conceptual.serve.schema): decoder refusals map to 415/422 in the service's
own words, never the decoder's exception text, and so do refused parameters, never the
validation library's; every 503 says when to retry."""

from __future__ import annotations

import pytest

from conceptual.models.inference import ImageError
from conceptual.serve.schema import RETRY_AFTER_S, ApiError, image_error

PILLOW_TEXT = "OSError: broken data stream when reading image file"


@pytest.mark.parametrize(
    ("code", "status"),
    [("not_an_image", 415), ("corrupt", 422), ("a_guard_added_later", 422)],
)
def test_every_decoder_code_is_answered_in_our_words(code, status):
    error = image_error(ImageError(code, f"{code} ({PILLOW_TEXT})"))
    assert (error.status, error.code) == (status, code)
    assert error.message and "Error" not in error.message and "broken" not in error.message


@pytest.mark.parametrize("code", ["busy", "model_unavailable", "not_ready", "a_code_added_later"])
def test_every_503_says_when_to_retry(code):
    response = ApiError(503, code, "retry").response()
    assert response.status_code == 503
    assert response.headers["retry-after"] == str(RETRY_AFTER_S.get(code, 1))


def test_other_errors_carry_no_retry_after():
    assert "retry-after" not in ApiError(422, "bad_parameter", "k").response().headers


# --- refused parameters, in the service's words -------------------------------------------


@pytest.fixture
def api():
    """The ingress's routes over a captioner handle that is never called: parameters are
    refused before any model is."""
    from starlette.testclient import TestClient

    from conceptual.serve.config import ServeConfig
    from conceptual.serve.routes import Handles, make_api

    with TestClient(make_api(ServeConfig(), Handles(captioners={"en": None}))) as client:
        yield client


@pytest.mark.parametrize(
    ("beam", "said"),
    [
        ("9" * 6000, "beam_size: a number of too many digits (got '999"),
        ("wide", "beam_size: not an integer (got 'wide')"),
        ("0", "beam_size: must be at least 1 (got '0')"),
        ("9", "beam_size: must be at most 8 (got '9')"),
    ],
    ids=["6000 digits", "text", "0", "over max"],
)
def test_a_refused_beam_size_is_told_in_the_service_s_words_and_bounded(api, beam, said):
    """A 6,000-digit beam_size got the validation library's own "Unable to parse input
    string as an integer, exceeded maximum size"."""
    response = api.post(f"/v1/captions?beam_size={beam}", content=b"not read")
    error = response.json()["error"]
    assert (response.status_code, error["code"]) == (422, "bad_parameter")
    assert error["message"].startswith(said) and len(error["message"]) < 200
    assert "Input should" not in error["message"] and "Unable" not in error["message"]


def test_a_search_s_refused_json_is_told_in_the_service_s_words():
    from conceptual.serve.retriever_deployment import RetrievalSettings
    from conceptual.serve.uploads import text_query

    with pytest.raises(ApiError) as refused:
        text_query(b'{"text": 5, "k": "' + b"9" * 6000 + b'", "x": 1}', RetrievalSettings())
    assert refused.value.message == (
        "text: not a string; k: a number of too many digits; x: not a parameter of this route"
    )
