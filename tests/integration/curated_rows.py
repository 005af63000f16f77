"""What a curation wrote, as rows to compare between runs (test_row_faults.py,
test_resume.py)."""

from __future__ import annotations

import pyarrow.parquet as pq
from PIL import Image

from conceptual import storage


def outputs(uri: str) -> dict[str, list[dict]]:
    """The curated and rejected rows under `uri`, in a fixed order."""
    fs, _ = storage.resolve(uri)
    found = {}
    for part in ("curated", "rejected"):
        rows = []
        for path in storage.list_files(storage.join(uri, part)):
            if path.endswith(".parquet"):
                with fs.open_input_file(path) as f:
                    rows.extend(pq.read_table(f).to_pylist())
        found[part] = sorted(rows, key=lambda r: (r["id"], repr(sorted(r.items()))))
    return found


def scores_rounded(rows: list[dict]) -> list[dict]:
    """The rows with the classifier's scores to 5 decimals: images classified in batches of
    another size (a batch re-run row by row, a resumed run) differ in the last float bits."""
    return [
        {**r, "labels": [{**label, "score": round(label["score"], 5)} for label in r["labels"]]}
        for r in rows
    ]


def own_files(rows: list[dict], catalogue, base_url: str) -> list[dict]:
    """Each row's image as a file of its own, with bytes of its own where it is a JPEG that
    decodes (a comment names the row), so that a fault on one URL or one image's bytes hits
    one row."""
    for i, row in enumerate(rows):
        if not row["image_url"].startswith(base_url):
            continue
        name = row["image_url"].removeprefix(f"{base_url}/").split("?")[0]
        source, copy = catalogue.directory / name, catalogue.directory / f"row{i}-{name}"
        if not source.is_file():  # the server's special paths (/status/500, /slow, ...)
            continue
        try:
            with Image.open(source) as image:
                image.load()
                image.save(copy, "JPEG", quality=92, comment=f"row {i}".encode())
        except (OSError, ValueError, Image.DecompressionBombError):  # the same bytes will do
            copy.write_bytes(source.read_bytes())
        row["image_url"] = f"{base_url}/{copy.name}"
    return rows
