"""Reading candidates on a local Ray: rows that once ended the whole job (a lone surrogate,
a 5,000-digit number, deep nesting, a stray CSV quote) are rejections, and a gzipped file
counts the records it holds, not the lines of its compressed bytes."""

from __future__ import annotations

import gzip
import json
from collections import Counter

import pytest

from conceptual.pipelines.readers import read_candidates

pytestmark = pytest.mark.integration


def test_every_hostile_row_is_a_rejection_and_the_read_completes(ray_local, tmp_path):
    good = [{"alt_text": f"A dog {i}", "image_url": f"http://x.test/{i}.jpg"} for i in range(2000)]
    (tmp_path / "good.jsonl.gz").write_bytes(
        gzip.compress("".join(json.dumps(r) + "\n" for r in good).encode())
    )
    (tmp_path / "bad.jsonl").write_bytes(
        b'{"alt_text": "A dog \\ud83d", "image_url": "http://x.test/1.jpg"}\n'
        + b'{"alt_text": '
        + b"1" * 5_000
        + b"}\n"
        + b"[" * 100_000
        + b"\n"
    )
    (tmp_path / "bad.csv").write_bytes(
        b'alt_text,image_url\n"A cat,http://x.test/c.jpg\nA cow,http://x.test/d.jpg\n'
    )

    rows = read_candidates(str(tmp_path), "auto", range_bytes=1000).take_all()

    reasons = Counter(row["reason"] for row in rows)
    assert reasons == {None: 2001, "invalid_utf8": 1, "invalid_json": 2, "malformed_row": 1}
