"""The fence runner in tests/fences.py: admonitions, tabs, snippets and sessions, as the build sees them."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys
import textwrap

ROOT = pathlib.Path(__file__).resolve().parents[1]

PAGE = textwrap.dedent(
    '''
    # A page

    ```python exec="on" session="s"
    x = 1
    ```

    !!! note "An admonition"

        ```python
        raise RuntimeError("admonition fence ran")
        ```

    === "A tab"

        ```python
        raise RuntimeError("tab fence ran")
        ```

    ```{.python session="s"}
    assert x == 1
    x = 100  # shown but not executed at build: must not leak
    ```

    ```python exec="on" session="s"
    assert x == 1, x
    x = 2
    ```

    ```python exec="on" session="s"
    --8<-- "src/llm_attention/toy.py"
    ```

    ```python exec="on" session="s"
    assert x == 2 and TOKENS[1] == "journey"
    ```

    ```python exec="on"
    assert "x" not in globals()
    ```
    '''
)


def run_pytest(tmp_path, *args):
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.fences", "--markdown-docs",
         "--markdown-docs-syntax=superfences", "-p", "no:cacheprovider", "-rA", "page.md", *args],
        cwd=tmp_path, capture_output=True, text=True, env={"PYTHONPATH": str(ROOT), "PATH": ""},
    )


def test_fences_in_admonitions_and_tabs_run_and_sessions_are_shared(tmp_path):
    result = run_pytest(tmp_path)
    out = result.stdout
    assert "admonition fence ran" in out and "tab fence ran" in out, out
    assert re.search(r"2 failed, 6 passed", out), out


def test_a_fence_run_alone_replays_its_session(tmp_path):
    result = run_pytest(tmp_path, "-k", "line:34")
    assert re.search(r"\b1 passed\b", result.stdout), result.stdout
