"""Code a page shows fits a listing: at most 88 columns, what a wide screen's column holds
(the stylesheet sets code to fit them), so no reader scrolls sideways to read a line of it.
Checked for code included from a file and for the Python blocks written in the pages."""

from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
INCLUDE = re.compile(r"""^[ \t]*--8<--[ \t]+["'](?P<target>[^"']+\.py(?::[\w-]+)?)["']""", re.MULTILINE)
MAX_COLUMNS = 88
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<info>[^\n]*)\n(?P<body>.*?)^(?P=indent)```", re.S | re.M)


def included_sections() -> list[str]:
    targets = set()
    for page in (ROOT / "docs").rglob("*.md"):
        targets |= {m["target"] for m in INCLUDE.finditer(page.read_text(encoding="utf8"))}
    return sorted(targets)


def section_lines(target: str) -> list[str]:
    path, _, section = target.partition(":")
    lines = (ROOT / path).read_text(encoding="utf8").splitlines()
    if not section:
        return lines
    start = next(i for i, line in enumerate(lines) if f"--8<-- [start:{section}]" in line)
    end = next(i for i, line in enumerate(lines) if f"--8<-- [end:{section}]" in line)
    return lines[start + 1 : end]


def test_pages_include_code():
    assert len(included_sections()) >= 5


@pytest.mark.parametrize("target", included_sections())
def test_included_lines_fit_a_listing(target):
    too_long = [line for line in section_lines(target) if len(line) > MAX_COLUMNS]
    assert not too_long, f"{target}: {len(too_long)} lines over {MAX_COLUMNS} columns: {too_long[:3]}"


def shown_python_lines() -> list[tuple[str, int, str]]:
    """(page, line number, line) for each line of a Python block a page shows: a block run at
    build without ``source=`` only prints its output, and is not shown."""
    lines = []
    for page in sorted((ROOT / "docs").rglob("*.md")):
        text = page.read_text(encoding="utf8")
        for block in FENCE.finditer(text):
            info = block["info"].strip()
            if not re.match(r"\{?\.?python\b|py\b|pycon\b", info):
                continue
            if 'exec="on"' in info and "source=" not in info:
                continue
            first = text.count("\n", 0, block.start("body")) + 1
            rel = page.relative_to(ROOT).as_posix()
            lines += [(rel, first + i, line) for i, line in enumerate(block["body"].splitlines())]
    return lines


def test_shown_python_blocks_fit_a_listing():
    lines = shown_python_lines()
    assert len(lines) > 1000, f"only {len(lines)} lines of shown Python found: update the pattern"
    too_long = [f"{page}:{number} ({len(line)})" for page, number, line in lines if len(line) > MAX_COLUMNS]
    assert not too_long, f"{len(too_long)} lines over {MAX_COLUMNS} columns: {too_long[:5]}"
