"""Every relative link of the README and docs/ points at a file that exists, and every
`#anchor` at a heading (or an `<a id>`) of that file, as GitHub renders them; the README's
contents list names every document in docs/."""

from __future__ import annotations

import re
from pathlib import Path

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def outside_code(text: str) -> str:
    """The text without its fenced blocks and inline code spans."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def anchors(document: Path) -> set[str]:
    """GitHub's anchors: each heading lower-cased, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"^```.*?^```", "", document.read_text(), flags=re.M | re.S)
    headings = re.findall(r"^#{1,6} (.+)$", text, re.M)
    slugs = {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}
    return slugs | set(re.findall(r'<a id="([^"]+)"></a>', text))


def documents(repo: Path) -> list[Path]:
    return [repo / "README.md", *sorted((repo / "docs").rglob("*.md"))]


def test_every_relative_link_and_anchor_resolves(repo):
    broken = []
    for document in documents(repo):
        for target in LINK.findall(outside_code(document.read_text())):
            if re.match(r"^[a-z]+:", target):
                continue  # http(s), mailto: not ours to check offline
            path, _, anchor = target.partition("#")
            file = (document.parent / path).resolve() if path else document
            if not file.exists():
                broken.append(f"{document.relative_to(repo)}: {target} (no such file)")
            elif anchor and file.suffix == ".md" and anchor not in anchors(file):
                broken.append(f"{document.relative_to(repo)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_the_readme_contents_list_names_every_document(repo):
    readme = (repo / "README.md").read_text()
    linked = {(repo / t.partition("#")[0]).resolve() for t in LINK.findall(readme)}
    missing = [
        str(doc.relative_to(repo))
        for doc in sorted((repo / "docs").glob("*.md"))
        if doc.resolve() not in linked
    ]
    assert not missing, f"docs not linked from the README: {missing}"


def test_the_readme_first_screen_is_short(repo):
    """What it does and the two commands with their times, before any reference text."""
    readme = (repo / "README.md").read_text()
    first_screen = readme.split("## Your first job", 1)[0]
    assert len(first_screen.splitlines()) <= 40
    assert "make demo" in first_screen and "make test" in first_screen
