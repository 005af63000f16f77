"""Decoder refusals as API errors (conceptual.serve.schema.image_error): any code maps to
415/422 in the service's own words, never the decoder's exception text."""

from __future__ import annotations

import pytest

from conceptual.models.inference import ImageError
from conceptual.serve.schema import image_error

PILLOW_TEXT = "OSError: broken data stream when reading image file"


@pytest.mark.parametrize(
    ("code", "status"),
    [("not_an_image", 415), ("corrupt", 422), ("a_guard_added_later", 422)],
)
def test_every_decoder_code_is_answered_in_our_words(code, status):
    error = image_error(ImageError(code, f"{code} ({PILLOW_TEXT})"))
    assert (error.status, error.code) == (status, code)
    assert error.message and "Error" not in error.message and "broken" not in error.message
