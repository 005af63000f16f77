"""API errors (conceptual.serve.schema): decoder refusals map to 415/422 in the service's
own words, never the decoder's exception text; every 503 says when to retry."""

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
