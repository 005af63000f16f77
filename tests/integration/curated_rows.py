"""What a curation wrote, as rows to compare between runs (test_row_faults.py,
test_resume.py)."""

from __future__ import annotations

import pyarrow.parquet as pq

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
