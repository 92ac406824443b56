"""The fence runner in tests/fences.py: admonitions, tabs, snippets and sessions, as the build sees them."""

from __future__ import annotations

import re
import textwrap

import llm_attention.toy  # noqa: F401

# The page's fences run in this process (pytester). It forgets the modules an inner run imports,
# and torch cannot be imported a second time: hence the import above, before any inner run.
pytest_plugins = ["pytester"]

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


def run_pytest(pytester, *args) -> str:
    """Run pytest on the page above, in this process (a page of its own each time)."""
    (pytester.path / "page.md").write_text(PAGE)  # as is: the tests name its line numbers
    (pytester.path / "pytest.ini").write_text("[pytest]\n")
    result = pytester.runpytest_inprocess(
        "-p", "tests.fences", "--markdown-docs", "--markdown-docs-syntax=superfences",
        "-p", "no:cacheprovider", "-rA", "page.md", *args,
    )
    return "\n".join(result.outlines)


def test_fences_in_admonitions_and_tabs_run_and_sessions_are_shared(pytester):
    out = run_pytest(pytester)
    assert "admonition fence ran" in out and "tab fence ran" in out, out
    assert re.search(r"2 failed, 6 passed", out), out


def test_a_fence_run_alone_replays_its_session(pytester):
    out = run_pytest(pytester, "-k", "line:34")
    assert re.search(r"\b1 passed\b", out), out
