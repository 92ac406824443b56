"""Every notebook script under docs/notebooks runs top to bottom (the build runs them too)."""

from __future__ import annotations

import pathlib
import runpy
import warnings

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

NOTEBOOKS = sorted((pathlib.Path(__file__).resolve().parents[1] / "docs" / "notebooks").glob("*.py"))


def test_there_are_notebooks():
    assert NOTEBOOKS


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(notebook):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*non-interactive.*")  # plt.show() under Agg
        namespace = runpy.run_path(str(notebook), run_name="__main__")
    plt.close("all")
    assert namespace, f"{notebook.name} defined nothing"
