"""Every package has a README a newcomer can start from, and the prose says what is.

A package is a folder holding a ``pyproject.toml`` under ``libs/``, ``services/`` or
``tools/``. Its ``README.md`` opens, under its ``# title``, with a paragraph saying what the
package is for, and has a heading starting "Public interface" and one starting "Where to
start reading" (any level from ``##``), each with text under it.

The READMEs and ``docs/*.md`` cite no issue of this repository ("issue #38", "issue 36",
"(#35)", "#24"): a reference to an issue belongs in a commit message, history in a dated
``bench/results/`` file, a decision in ``docs/decisions/`` (whose records say which issue
they came from, so they are not checked). An upstream issue is cited as ``owner/repo#N`` or
by its URL, which this check leaves alone, as it does ``PKCS#8`` and ``[step](#3-title)``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SKIPPED_FOLDERS = {".venv", "node_modules", "__pycache__"}
PACKAGES = sorted(
    path.parent.relative_to(ROOT)
    for top in ("libs", "services", "tools")
    for path in (ROOT / top).rglob("pyproject.toml")
    if not SKIPPED_FOLDERS & set(path.relative_to(ROOT).parts)
)
PROSE = sorted(
    {
        *(package / "README.md" for package in PACKAGES),
        Path("README.md"),
        Path("bench/README.md"),
        Path("deploy/README.md"),
        Path("tools/stack/README.md"),
        *(path.relative_to(ROOT) for path in (ROOT / "docs").glob("*.md")),
    }
)
SECTIONS = ("Public interface", "Where to start reading")
OPENING_WORDS = 8  # a sentence, not a stray line
SECTION_WORDS = 5
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
ISSUE_CITATION = re.compile(
    r"\bissues?\s+#?\d+"  # "issue #38", "issue 36 §2", "issues 24"
    r"|(?<![\w/&#-])#\d+(?![\w-])",  # "#24", "(#35)"; not "PKCS#8", "apache/kafka#1", "&#8594;", "(#3-title)"
    re.IGNORECASE,
)


def prose_lines(text: str) -> list[tuple[int, str]]:
    """The lines outside fenced code blocks and HTML comments, numbered from 1."""
    kept, fence, comment = [], "", False
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if fence:
            fence = "" if stripped.startswith(fence) else fence
        elif comment:
            comment = "-->" not in stripped
        elif stripped.startswith(("```", "~~~")):
            fence = stripped[:3]
        elif stripped.startswith("<!--") and "-->" not in stripped:
            comment = True
        else:
            kept.append((number, line))
    return kept


def opening_paragraph(text: str) -> str:
    """The block after the ``# title``, if it is prose (not a heading, list, table, quote or code)."""
    lines = text.splitlines()
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None or not lines[first].startswith("# "):
        return ""
    block: list[str] = []
    for line in lines[first + 1 :]:
        if line.strip():
            block.append(line.strip())
        elif block:
            break
    if not block or block[0].startswith(("#", "```", "~~~", "|", "- ", "* ", ">", "<", "!", "[")):
        return ""
    return " ".join(block)


def sections(text: str) -> dict[str, str]:
    """Each heading's text (from level 2) with the prose under it, up to the next heading of its
    level or above; nested headings' text counts as the section's."""
    lines = prose_lines(text)
    found: dict[str, str] = {}
    for index, (_, line) in enumerate(lines):
        match = HEADING.match(line)
        if not match or len(match.group(1)) < 2:
            continue
        level, body = len(match.group(1)), []
        for _, after in lines[index + 1 :]:
            nested = HEADING.match(after)
            if nested and len(nested.group(1)) <= level:
                break
            body.append(after)
        found[match.group(2)] = "\n".join(body)
    return found


def words(text: str) -> int:
    return len(re.findall(r"\w+", text))


def test_the_packages_are_found() -> None:
    assert Path("libs/fluxgate-sink") in PACKAGES and Path("services/aggregator") in PACKAGES
    assert Path(".") not in PACKAGES  # the repository root is not a package


@pytest.mark.parametrize("package", PACKAGES, ids=str)
def test_every_package_has_a_readme_that_says_what_it_is_for_and_where_to_begin(package: Path) -> None:
    readme = ROOT / package / "README.md"
    assert readme.is_file(), f"{package} has no README.md"
    text = readme.read_text()
    opening = opening_paragraph(text)
    assert words(opening) >= OPENING_WORDS, (
        f"{package}/README.md: under its '# title', open with a paragraph saying what the package is for"
    )
    headings = sections(text)
    for wanted in SECTIONS:
        matching = [body for heading, body in headings.items() if heading.lower().startswith(wanted.lower())]
        assert matching, f"{package}/README.md has no '## {wanted}' section"
        assert words(matching[0]) >= SECTION_WORDS, f"{package}/README.md: '## {wanted}' has nothing under it"


@pytest.mark.parametrize("document", PROSE, ids=str)
def test_no_readme_or_doc_cites_an_issue_number(document: Path) -> None:
    text = (ROOT / document).read_text()
    cited = [
        f"{document}:{number}: {match.group(0)!r} in {line.strip()[:120]!r}"
        for number, line in enumerate(text.splitlines(), start=1)  # code blocks too
        for match in ISSUE_CITATION.finditer(line)
    ]
    assert not cited, (
        "issue numbers belong in commit messages; history in bench/results/, decisions in docs/decisions/:\n"
        + "\n".join(cited)
    )
