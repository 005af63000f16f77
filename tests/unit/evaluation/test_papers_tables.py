"""docs/papers.md, "Reproducing the papers' tables", names every table and figure of the three
papers by the number the paper gives it, each once, and no number the paper does not have:
checked against the papers' texts in ../shared/papers (README there names each file)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

# docs/papers.md's subsection heading -> the paper's text file in ../shared/papers
PAPERS = {
    "## Conceptual Captions (Sharma et al., ACL 2018)": "000_5beb309b19f6c726.txt",
    "## Conceptual Spoken Captions and the dual encoders (Ilharco et al., CoNLL 2019)": (
        "003_254566ef51bc07c8.txt"
    ),
    "## Fluency-guided cross-lingual captioning (Lan, Li, Dong, ACM Multimedia 2017)": (
        "004_8d26046a466d0a18.txt"
    ),
}
# A caption starts a line: "Table 2: Human evaluation...", "Figure 4: The main model...".
CAPTION = re.compile(r"^(Table|Figure) (\d+):", re.M)
NAMED = re.compile(r"\*\*(Table|Figure) (\d+)\*\*")


@pytest.fixture(scope="module")
def papers(real_data) -> Path:
    folder = real_data.parent / "papers"
    if not folder.is_dir():
        pytest.skip(f"{folder} is not here")
    return folder


def section(readme: str, heading: str) -> str:
    start = readme.index(heading) + len(heading)
    end = readme.find("\n#", start)
    return readme[start : end if end >= 0 else None]


@pytest.mark.parametrize("heading", PAPERS)
def test_the_docs_number_each_table_and_figure_as_its_paper_does(repo, papers, heading):
    text = (papers / PAPERS[heading]).read_text(encoding="utf-8")
    captions = {(kind, int(n)) for kind, n in CAPTION.findall(text)}
    assert captions, f"no captions found in {PAPERS[heading]}"
    named = [
        (kind, int(n))
        for kind, n in NAMED.findall(
            section(repo.joinpath("docs", "papers.md").read_text(), heading)
        )
    ]
    assert sorted(set(named)) == sorted(captions)
    repeated = {entry for entry in named if named.count(entry) > 1}
    assert not repeated, f"named twice: {repeated}"
