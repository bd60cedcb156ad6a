"""The README and docs/*.md hold together: every relative link and image points to a file that exists (and an
`#anchor` to a heading of that page), every topic page is in the README's table of contents and starts with a
title and a summary paragraph, and the README stays a front page (at most 300 lines)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tests import REPO

ROOT = REPO
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: Pages written by scripts (their first line says by what); the rest are hand-written topic pages.
GENERATED = {"min_precision.md", "two_sum_min_precision.md", "hybrid_constructions.md", "hybrid_results.md",
             "sparse_results.md", "training.md"}
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def prose(page: Path) -> list[tuple[int, str]]:
    """The page's lines outside code blocks, with inline code spans blanked."""
    lines, fenced = [], False
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, re.sub(r"`[^`]*`", "``", line)))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (letters, digits, `_`, `-` and spaces kept),
    spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    raw = page.read_text(encoding="utf-8").splitlines()
    found, seen = set(), {}
    for number, line in prose(page):
        if re.match(r"^#{1,6}\s", line):
            base = slug(raw[number - 1].lstrip("#").strip())
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(page: Path) -> list[tuple[int, str]]:
    return [(number, target) for number, line in prose(page) for target in LINK.findall(line)]


@pytest.mark.parametrize("page", PAGES, ids=[page.relative_to(ROOT).as_posix() for page in PAGES])
def test_every_relative_link_and_image_points_to_something_that_exists(page):
    problems = []
    for number, target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, ...
            continue
        path, _, anchor = target.partition("#")
        destination = (page.parent / path).resolve() if path else page
        where = f"{page.relative_to(ROOT)}:{number}: {target}"
        if not destination.exists():
            problems.append(f"{where}: no such file")
        elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            problems.append(f"{where}: no heading #{anchor} in {destination.relative_to(ROOT)}")
    assert not problems, "\n".join(problems)


def test_the_slugs_follow_github():
    assert slug("§3 Arithmetic: what precision p means") == "3-arithmetic-what-precision-p-means"
    assert slug("Minimal precision p\\*") == "minimal-precision-p"
    assert slug("2-Sum under (B,k)-block-sparse attention (`two_sum_sparse`)") == \
        "2-sum-under-bk-block-sparse-attention-two_sum_sparse"


def test_every_topic_page_is_in_the_readme_table_of_contents_and_the_docs_index():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    index = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    topics = [page for page in PAGES[1:] if page.name not in GENERATED and page.name != "README.md"]
    assert len(topics) >= 12
    missing = [page.name for page in topics if f"](docs/{page.name})" not in readme]
    assert not missing, f"not linked from the README: {missing}"
    missing = [page.name for page in topics if f"]({page.name})" not in index]
    assert not missing, f"not linked from docs/README.md: {missing}"


@pytest.mark.parametrize("page", [page for page in PAGES[1:] if page.name not in GENERATED],
                         ids=lambda page: page.name)
def test_a_topic_page_starts_with_a_title_and_a_summary_paragraph(page):
    lines = page.read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("# "), "the first line is the page's title"
    assert lines[1] == "" and lines[2] and not lines[2].startswith(("#", "```", "|", "*", "<")), \
        "a summary paragraph follows the title"


def test_the_readme_is_a_front_page():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 300
    headings = [line for line in lines if line.startswith("## ")]
    for wanted in ("## Install", "## Two commands", "## Documentation", "## Layout"):
        assert wanted in headings
    assert not any("tests/test_" in line for line in lines), "test files are cited in the docs pages"
