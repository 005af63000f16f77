"""The dataset card quotes what the data says (issue 57): a `language` column, entity labels,
a stats.json's stage and reason names and the dataset's name, each built to break the card,
stay values in its YAML header (which yaml.safe_load, huggingface_hub's card parser and
`datasets` read back as they were) and text in its Markdown (no cell, block, heading or HTML
of their own). On a real MLflow (SQLite), without Ray."""

from __future__ import annotations

import json
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from test_publish_lineage import curated_rows, load

from conceptual.jobs import publish_dataset
from conceptual.records import CURATED

NAME = "Six | `x` <script>alert(1)</script>\n---\nlicense: mit"
LANGUAGE = "zh|`x`\n---\nlicense: mit <b>\x85\u2028"
STAGE = "text|<td>"
REASON = "too_short|</td><script>alert(1)</script>\n| forged | row |"
LABEL = "PERSON\n# Owned | <img src=x onerror=alert(1)>"
CAPTION = "a dog ```\n# not a heading"
UNESCAPED_PIPE = re.compile(r"(?<!\\)\|")


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("CONCEPTUAL_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return tmp_path / "home"


def hostile_curation(folder) -> None:
    rows = curated_rows()
    rows[0]["entities"][0]["label"] = LABEL
    rows[0]["caption"] = CAPTION  # the instance the card shows
    table = pa.Table.from_pylist(rows, schema=CURATED)
    table = table.append_column("language", pa.array(["en", LANGUAGE, "en"]))
    (folder / "curated").mkdir(parents=True)
    pq.write_table(table, folder / "curated" / "p.parquet")
    funnel = [{"stage": STAGE, "entering": 5, "rejected": 2, "leaving": 3}]
    stats = {"input": 5, "kept": 3, "rejected": {STAGE: {REASON: 2}}, "funnel": funnel}
    (folder / "stats.json").write_text(json.dumps(stats))
    (folder / "_SUCCESS").write_text("{}")


def unescaped(markdown: str) -> str:
    return re.sub(r"\\(.)", r"\1", markdown)


def test_the_card_keeps_hostile_values_as_values(tmp_path, home):
    from huggingface_hub import DatasetCard

    cur, pub = tmp_path / "cur", tmp_path / "pub"
    hostile_curation(cur)
    assert publish_dataset.main(["--data", str(cur), "--output", str(pub), "--name", NAME]) == 0
    card = (pub / "README.md").read_text()

    # The header: every value as it was, nothing added (no license, no second document).
    _, top, body = card.split("---\n", 2)
    header = yaml.safe_load(top)
    assert header["pretty_name"] == NAME and header["language"] == ["en", LANGUAGE]
    assert "license" not in header
    parsed = DatasetCard.load(pub / "README.md").data
    assert parsed.pretty_name == NAME and parsed.language == ["en", LANGUAGE]
    assert {split: len(rows) for split, rows in load(pub, tmp_path).items()} == {
        "train": 1,
        "validation": 1,
        "test": 1,
    }

    # The Markdown: the values as text, on their lines, in their cells.
    assert not re.search("[\x00-\x09\x0b-\x1f\x85\u2028\u2029]", card)  # no other line break
    lines = body.strip("\n").split("\n")
    assert [x for x in lines if x.startswith("# ")] == [lines[0]]  # the title alone
    assert unescaped(lines[0]) == f"# Dataset Card for {NAME.replace(chr(10), ' ')}"
    (row,) = [x for x in lines if x.startswith("| text")]
    assert len(UNESCAPED_PIPE.findall(row)) == 6  # five cells, as the header row has
    assert REASON.replace("\n", " ") in unescaped(row)
    assert f"{LABEL.replace(chr(10), ' ')} 1" in unescaped(body)
    outside = re.sub(r"^(`{3,})\w*\n.*?^\1$", "", body, flags=re.M | re.S)  # code blocks
    outside = re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", outside)  # and inline code
    tags = {m for m in re.findall(r"(?<!\\)</?\w+", outside)}
    assert tags <= {"<details", "</details", "<summary", "</summary"}, tags
    # The data instance: its caption's backticks inside a longer fence.
    fence = next(x for x in lines if x.endswith("json"))
    assert fence == "````json" and json.dumps(CAPTION)[1:-1] in body
