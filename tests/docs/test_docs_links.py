"""Every relative link in the README and docs/ (decisions included) names a file that exists and,
with ``#anchor``, a heading of that file (GitHub's anchor rule: lower case, punctuation other
than ``-`` and ``_`` dropped, spaces to ``-``)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.helpers import REPO

LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchor(heading: str) -> str:
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    lines = path.read_text().splitlines()
    return {_anchor(line.lstrip("#")) for line in lines if line.startswith("#")}


def _documents() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def test_every_relative_link_resolves_to_a_file_and_heading():
    broken = []
    for doc in _documents():
        for match in LINK.finditer(doc.read_text()):
            link = match.group(1)
            if link.startswith(("http://", "https://", "mailto:")):
                continue
            path, _, anchor = link.partition("#")
            target = (doc.parent / path).resolve() if path else doc
            if not target.exists():
                broken.append(f"{doc.relative_to(REPO)}: {link} (no such file)")
            elif anchor and target.suffix == ".md" and anchor not in _anchors(target):
                broken.append(f"{doc.relative_to(REPO)}: {link} (no such heading)")
    assert broken == []


def test_each_decision_has_a_status():
    for path in sorted((REPO / "docs" / "decisions").glob("*.md")):
        if path.name == "README.md":
            continue
        sections = path.read_text().split("\n## ")[1:]
        assert sections, f"{path.name} holds no decision"
        for section in sections:
            status = section.split("\n\n", 2)[1]
            assert re.match(r"\*Status: (accepted|superseded (in part )?by \[)", status), (
                f"{path.name}: {section.splitlines()[0]!r} has no status line"
            )
