"""Meta-test: every Python fence in the pages is collected and run by pytest.

The fences are found here by a plain line scanner, independent of the parser that the
collector uses, so a fence that the collector silently skips (inside an admonition, a content
tab, a list) shows up as a difference between the two.
"""

from __future__ import annotations

import ast
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
# The API reference's pages show the package's files whole: the conftest leaves them out.
PAGES = sorted(
    page for page in (ROOT / "docs").rglob("*.md") if "reference" not in page.parts
) + [ROOT / "README.md"]
OPENING = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`]*)$")
PYTHON = {"py", "python", "python3"}


def scan_python_fences(text: str) -> list[tuple[int, str, str]]:
    """(opening line, info string, first code line) of each Python fence, by scanning lines."""
    found, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        match = OPENING.match(lines[i])
        if not match:
            i += 1
            continue
        fence, info = match["fence"], match["info"].strip()
        closing = re.compile(rf"^[ \t]*{fence[0]}{{{len(fence)},}}[ \t]*$")
        end = next((j for j in range(i + 1, len(lines)) if closing.match(lines[j])), len(lines))
        words = info.strip("{}").split()
        lang = next((w[1:] for w in words if w.startswith(".")), words[0] if words else "")
        if lang in PYTHON:
            first = lines[i + 1].strip() if i + 1 < end else ""
            found.append((i + 1, info, first))
        i = end + 1
    return found


def collected_fences() -> set[tuple[str, int]]:
    paths = [str(p.relative_to(ROOT)) for p in PAGES]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", *paths],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    items = re.findall(r"^(\S+\.md)::\[CodeFence#\d+\]\[line:(\d+)\]$", result.stdout, re.MULTILINE)
    return {(path, int(line)) for path, line in items}


def test_scanner_finds_fences_in_admonitions_and_tabs():
    text = '!!! note\n    ```python\n    x = 1\n    ```\n\n=== "Tab"\n\n    ```{.python notest}\n    # notest: GPU\n    ```\n'
    assert [line for line, _, _ in scan_python_fences(text)] == [2, 8]


def test_every_python_fence_is_collected():
    expected = set()
    for page in PAGES:
        for line, info, _ in scan_python_fences(page.read_text(encoding="utf8")):
            if "notest" not in info.split():
                expected.add((str(page.relative_to(ROOT)), line))
    collected = collected_fences()
    assert expected, "the scanner found no Python fence at all"
    assert expected - collected == set(), "fences that pytest does not run"
    assert collected - expected == set(), "collected fences the scanner does not know"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_notest_fences_say_why(page):
    for line, info, first in scan_python_fences(page.read_text(encoding="utf8")):
        if "notest" in info.split():
            assert first.startswith("# notest:"), (
                f"{page.name}:{line}: a notest fence must open with '# notest: <why it cannot run on a CPU>'"
            )


def test_sessions_belong_to_one_page():
    """A build session is global to the build; two pages sharing a name would share state."""
    owner = {}
    for page in PAGES:
        for line, info, _ in scan_python_fences(page.read_text(encoding="utf8")):
            for session in re.findall(r'session="([^"]+)"', info):
                assert owner.setdefault(session, page) == page, (
                    f"session {session!r} is used by {owner[session].name} and {page.name}"
                )


@pytest.mark.xdist_group("grouping-check")
def test_a_group_reaches_the_scheduler(request):
    """Under ``--dist loadgroup`` a grouped test's id carries its group: that is how pytest-xdist
    keeps a page's fences in one worker (and it silently stops doing so with some pytest
    versions: see requirements.txt)."""
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not run by a pytest-xdist worker with --dist loadgroup")
    assert request.node.nodeid.endswith("@grouping-check"), request.node.nodeid


def test_no_python_file_under_the_test_paths_holds_a_fence_in_a_docstring():
    """tests/fences.py leaves Python files' docstrings out of the fence collection: a fence
    written in one would never run. So there must be none (the scanner finds a planted one)."""
    assert scan_python_fences(ast.get_docstring(ast.parse('"""Use:\n\n```python\nx = 1\n```\n"""')))
    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")) + sorted((ROOT / "docs").rglob("*.py")):
        if "vendor" in path.parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf8"))
        for node in ast.walk(tree):  # the module itself first
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                docstring = ast.get_docstring(node) or ""
                found += [f"{path.relative_to(ROOT)}: {first}" for _, _, first in scan_python_fences(docstring)]
    assert not found, f"fences in docstrings, which pytest does not run: {found}"
