"""Every notebook script under docs/notebooks has the checks of the numbers its page relies on
(tests/notebook_checks.py). The build runs each notebook; tests/test_notebook_download.py runs
each as a reader gets it, downloaded from the site into an environment with only torch and
matplotlib, and applies those checks to what it computed."""

from __future__ import annotations

import pathlib

from tests.notebook_checks import CHECKS

NOTEBOOKS = sorted((pathlib.Path(__file__).resolve().parents[1] / "docs" / "notebooks").glob("*.py"))


def test_there_are_notebooks_and_each_has_a_check():
    assert NOTEBOOKS
    assert sorted(CHECKS) == [notebook.name for notebook in NOTEBOOKS]
