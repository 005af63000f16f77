"""One memory budget for any single row in a worker: `limits.row_bytes`.

A row is the unit that no input may make expensive: whatever one candidate brings, a worker
holds at most this many bytes for it at any step, and a row over it is rejected with a
reason, never read, fetched or decoded whole. Where it is enforced:

| step | what is bounded | over it |
|---|---|---|
| reading (pipelines/dataflow/readers.py) | a line of a candidates file, or a CSV record over several, plain or compressed, as it streams (at most `min(row_bytes, LINE_BYTES)`) | `too_long` (read) |
| fetching (vision/fetch.py) | an image's body, `fetch.max_bytes` (at most row_bytes) | `too_large` (fetch) |
| decoding (vision/decoding.py) | an image's pixels, `image.max_pixels` x 4 bytes (at most row_bytes) | `too_many_pixels` (image) |
| decoding (speech/audio.py) | a clip's samples, 4 bytes each (at most row_bytes) | `too_long` |

A config whose own limit is over the budget is refused when it is loaded (`check`), naming
both keys: the budget is the one number to change for a worker of another size.
"""

from __future__ import annotations

from pydantic import Field

from conceptual.config import Config

ROW_BYTES = 256 << 20  # 50 MP of RGBA pixels with room to spare; a 1 GiB worker holds 4 rows
# A text row needs far less: a candidates line is rejected past this even when the budget
# is larger (its fields are capped at MAX_STORED_CHARS characters each).
LINE_BYTES = 4 << 20
# The largest image body taken anywhere: fetched for curation (`fetch.max_bytes`), uploaded
# to the service (`max_body_bytes`, the API and nginx in front of it). Declared once here.
IMAGE_BYTES = 16 << 20
BYTES_PER_PIXEL = 4  # what Pillow holds for the widest mode it decodes (RGBA, CMYK)
BYTES_PER_SAMPLE = 4  # float32


class LimitsConfig(Config):
    row_bytes: int = Field(ROW_BYTES, ge=1 << 20)

    @property
    def line_bytes(self) -> int:
        return min(self.row_bytes, LINE_BYTES)


def over_budget(row_bytes: int, **limits: int) -> str | None:
    """What is wrong when one of `limits` (a key and the bytes it lets one row take) is over
    `row_bytes`, or None."""
    for key, size in limits.items():
        if size > row_bytes:
            return (
                f"{key} lets one row take {size:,} bytes, over limits.row_bytes={row_bytes:,}: "
                f"lower {key} or raise limits.row_bytes"
            )
    return None
