"""The site builds strictly: any warning (a code block that raised, a broken link) fails it.

The tests that need the built site skip when it did not build, all with the one cause that
``tests/build_site.py`` reads from the log (the page, the line and the error of the first
block that raised); this test is the one that fails, with that cause and the log's tail.
"""

from __future__ import annotations

import pathlib

from tests.build_site import failure_cause

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_the_site_builds_strictly(site_build):
    assert site_build["returncode"] == 0, (
        f"the site did not build: {site_build['cause']}\n\n{site_build['log']}"
    )


def test_every_notebook_page_took_its_notebook_rendered_ahead(site_build):
    """hooks/notebooks_ahead.py: each notebook rendered once, in the background, and used."""
    notebooks = len(list((ROOT / "docs" / "notebooks").glob("*.py")))
    assert f"notebooks run ahead of their pages: {notebooks} used, 0 unused" in site_build["log"]


LOG = """INFO    -  Building documentation...
WARNING -  markdown_exec: Execution of python code block exited with errors

Code block is:

  steps = [1, 2]
  assert len(steps) == 3  # as said

Output is:

  Traceback (most recent call last):
    File "<code block: session fixture; n2>", line 2, in <module>
      assert len(steps) == 3  # as said
  AssertionError

WARNING -  markdown_exec: Execution of python code block exited with errors
  NameError: name 'steps' is not defined
"""


def test_a_failed_block_is_named_by_its_page_and_line(tmp_path, monkeypatch):
    import tests.build_site as build_site

    page = tmp_path / "docs" / "chapter.md"
    page.parent.mkdir()
    page.write_text(
        '# A page\n\n```python exec="on" session="fixture"\n'
        "steps = [1, 2]\nassert len(steps) == 3  # as said\n```\n"
    )
    monkeypatch.setattr(build_site, "ROOT", tmp_path)
    cause = failure_cause(LOG)
    assert cause.startswith("docs/chapter.md, line 5 (the block that opens at line 3)"), cause
    assert "assert len(steps) == 3" in cause and "raised AssertionError" in cause
    assert "NameError" not in cause  # the first cause, not what followed from it


def test_a_build_without_a_failed_block_shows_its_first_warning():
    log = "INFO    -  ok\nWARNING -  Doc file 'a.md' contains a link 'b.md', not found\nINFO - x\n"
    assert failure_cause(log).startswith("WARNING -  Doc file 'a.md'")
