"""Every relative link between the documentation pages resolves, anchors included.

The pages are docs/*.md and README.md. A link is `[text](target)` or `![alt](target)` outside
code; a target with a scheme (https:, mailto:) is left alone. A relative target must name a
file of the repository, and its `#anchor` a heading of that page, as GitHub makes anchors:
lower case, punctuation dropped, spaces to hyphens, a repeated heading suffixed -1, -2, ….
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([*(ROOT / "docs").glob("*.md"), ROOT / "README.md"])

FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def prose_lines(text: str) -> list[tuple[int, str]]:
    """The page's lines outside fenced code blocks, with their 1-based numbers."""
    lines: list[tuple[int, str]] = []
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link counts as its text
    kept = []
    for char in text.lower():
        category = unicodedata.category(char)
        if char in " -" or category[0] in "LMN" or category == "Pc":
            kept.append(char)
    return "".join(kept).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    result: set[str] = set()
    for _, line in prose_lines(page.read_text(encoding="utf-8")):
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        result.add(base if count == 0 else f"{base}-{count}")
    return result


def links(page: Path) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for number, line in prose_lines(page.read_text(encoding="utf-8")):
        for match in LINK.finditer(CODE_SPAN.sub("", line)):
            found.append((number, match.group(1)))
    return found


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    problems: list[str] = []
    for number, target in links(page):
        if SCHEME.match(target):
            continue
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        where = f"{page.relative_to(root)}:{number}: {target}"
        if not dest.exists():
            problems.append(f"{where}: no file {path_part}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            page_name = path_part or "this page"
            problems.append(f"{where}: no heading with anchor #{anchor} in {page_name}")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_and_anchors_resolve(page: Path) -> None:
    assert broken_links(page) == []


def test_slug_follows_github() -> None:
    assert slug("Nodes: leases, take-over, fencing (the scheduler's side)") == (
        "nodes-leases-take-over-fencing-the-schedulers-side"
    )
    assert slug("6. next_after for old jobs (µs per call)") == (
        "6-next_after-for-old-jobs-µs-per-call"
    )
    assert slug("`overlap`: a slot that comes while the job still runs") == (
        "overlap-a-slot-that-comes-while-the-job-still-runs"
    )
    assert slug("Alerts in the file: `add_job` (bench/alerting.py)") == (
        "alerts-in-the-file-add_job-benchalertingpy"
    )


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# Title\n\n## Part\n\n[ok](#part) [bad](#nowhere) [gone](missing.md)\n"
        "`[in code](#nowhere)`\n\n```\n[fenced](#nowhere)\n```\n",
        encoding="utf-8",
    )
    assert broken_links(page, tmp_path) == [
        "page.md:5: #nowhere: no heading with anchor #nowhere in this page",
        "page.md:5: missing.md: no file missing.md",
    ]


def test_repeated_headings_get_numbered_anchors(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# A\n\n## Notes\n\n## Notes\n\n## Notes\n", encoding="utf-8")
    assert anchors(page) == {"a", "notes", "notes-1", "notes-2"}
