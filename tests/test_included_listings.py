"""Code that a page includes from a file fits a listing: at most 88 columns, so no reader has to
scroll sideways to read a line of it."""

from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
INCLUDE = re.compile(r"""^[ \t]*--8<--[ \t]+["'](?P<target>[^"']+\.py(?::[\w-]+)?)["']""", re.MULTILINE)
MAX_COLUMNS = 88


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
