"""What search answers say of an image (conceptual.serve.schema.image_reference): a public
URL as it is, a dataset path as the image's path, never a path on the service's machines."""

from __future__ import annotations

import pytest

from conceptual.serve.schema import image_reference


@pytest.mark.parametrize(
    ("stored", "answer"),
    [
        (
            "http://images.cocodataset.org/val2017/a.jpg",
            ("http://images.cocodataset.org/val2017/a.jpg", None),
        ),
        ("HTTPS://example.com/x.jpg?s=1", ("HTTPS://example.com/x.jpg?s=1", None)),
        ("val2017/000000000139.jpg", (None, "val2017/000000000139.jpg")),
        ("images/a b#1.jpg", (None, "images/a b#1.jpg")),
        # Imports before dataset paths stored file:// URIs: only the file name is told.
        ("file:///home/someone/data/flickr/images/x%20y.jpg", (None, "x y.jpg")),
        ("/home/someone/data/images/x.jpg", (None, "x.jpg")),
        ("C:\\Users\\someone\\x.jpg", (None, "x.jpg")),
        ("s3://private-bucket/a/x.jpg", (None, "x.jpg")),
        (None, (None, None)),
        ("", (None, None)),
    ],
)
def test_answers_carry_no_local_path(stored, answer):
    assert image_reference(stored) == answer
    url, path = image_reference(stored)
    assert not any(part and ("someone" in part or "bucket" in part) for part in (url, path))
