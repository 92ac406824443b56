"""A notebook downloaded from the site runs where the package is not installed.

The site is built with SITE_URL at the address it is served at (the ``built_site`` fixture); each
notebook's .ipynb is downloaded from it and run, as a script, by the Python of a new virtual
environment that can import torch and matplotlib (borrowed from this one's site-packages
through a path file) but not ``llm_attention``: the notebook's first code cell must fetch the
package's modules from the site.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import sysconfig
import urllib.request

import jupytext
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p.stem for p in (ROOT / "docs" / "notebooks").glob("*.py"))


@pytest.fixture(scope="module")
def clean_python(tmp_path_factory) -> pathlib.Path:
    """A venv's Python with torch and matplotlib, and no llm_attention."""
    venv = tmp_path_factory.mktemp("clean-venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()
    # A path line adds that folder only: the .pth files inside it (the editable install) are not read.
    (pathlib.Path(purelib) / "borrowed.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    probe = subprocess.run(
        [str(python), "-c", "import importlib.util as u, torch, matplotlib; print(u.find_spec('llm_attention'))"],
        capture_output=True, text=True, cwd=venv,
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip() == "None", "the clean environment can import llm_attention"
    return python


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_downloaded_notebook_runs_without_the_package(built_site, clean_python, tmp_path, name):
    url = f"{built_site.url}notebooks/{name}/{name}.ipynb"
    notebook = jupytext.reads(urllib.request.urlopen(url).read().decode(), fmt="ipynb")
    first_code = next(cell.source for cell in notebook.cells if cell.cell_type == "code")
    assert f'SITE_URL = "{built_site.url}"' in first_code, "the download does not name the site it came from"
    script = tmp_path / f"{name}.py"
    script.write_text(jupytext.writes(notebook, fmt="py:percent"))
    env = {"PATH": os.environ.get("PATH", ""), "MPLBACKEND": "Agg", "HOME": str(tmp_path)}
    done = subprocess.run([str(clean_python), script.name], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    fetched = sorted(p.name for p in (tmp_path / "llm_attention").glob("*.py"))
    assert fetched == sorted(p.name for p in (ROOT / "src" / "llm_attention").glob("*.py"))
