"""A notebook downloaded from the site runs where the package is not installed.

The site is built with SITE_URL at the address it is served at (the ``built_site`` fixture); each
notebook's .ipynb is downloaded from it and run, as a script, by the Python of a new virtual
environment that holds torch, matplotlib and the distributions they require, and nothing else: no
``llm_attention``, no Jupyter, none of the project's other packages. The notebook's first code cell
must fetch the package's modules, and the site's figure helpers, from the site.

At its end, the notebook's namespace is checked for the numbers its page relies on
(tests/notebook_checks.py, which needs torch alone): a notebook that runs but computes something
else fails.

The environment is made in a second (tests/clean_python.py), and its Python imports torch and
matplotlib (its pyplot too) once and runs each notebook in a fork of itself: the notebook starts
as ``python notebook.py`` would, with those imports already done. One difference remains: with
pyplot imported, ``matplotlib.pyplot`` and the modules it imports are reachable as attributes of
a bare ``import matplotlib``, where a reader's Python would raise AttributeError; a static check
here holds that the notebooks and the modules they fetch never reach one that way.
"""

from __future__ import annotations

import ast
import json
import os
import pathlib
import re
import subprocess
import sys
import urllib.request

import jupytext
import pytest

from tests import page_records
from tests.clean_python import PreloadedRunner, make_clean_python
from tests.notebook_checks import CHECKS

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p.stem for p in (ROOT / "docs" / "notebooks").glob("*.py"))
WANTED = ("torch", "matplotlib")  # what a reader is told a notebook needs
# What the runner imports once, before each fork: the two, and matplotlib's pyplot, which every
# notebook's figures import (measured: the eight runs take about 2.5 s less); nothing else.
PRELOADED = ("torch", "matplotlib", "matplotlib.pyplot")
CHECKS_FILE = ROOT / "tests" / "notebook_checks.py"
# Run after the notebook's last cell, in its namespace: which of its page's checks hold.
CHECKS_CODE = """

import json as _json, runpy as _runpy
_checks = _runpy.run_path({checks_file!r})["CHECKS"][{name!r}](globals())
with open({out!r}, "w") as _out:
    _json.dump({{check: bool(holds) for check, holds in _checks.items()}}, _out)
"""


def test_there_are_notebooks_and_each_has_its_page_s_checks():
    assert NOTEBOOKS
    assert sorted(CHECKS) == [f"{name}.py" for name in NOTEBOOKS]


@pytest.fixture(scope="module")
def notebook_runner(tmp_path_factory):
    """Run a script with a clean Python that has torch and matplotlib, and nothing else of this
    project (tests/clean_python.py); return its exit code and output."""
    python = make_clean_python(tmp_path_factory.mktemp("clean-venv"), WANTED)
    home = tmp_path_factory.mktemp("notebook-home")
    env = {"PATH": os.environ.get("PATH", ""), "MPLBACKEND": "Agg", "HOME": str(home)}
    runner = PreloadedRunner(python, PRELOADED, home, env)
    yield runner.run
    runner.close()


@pytest.mark.xdist_group("notebook downloads")  # one clean environment and runner per run
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_downloaded_notebook_runs_without_the_package(built_site, request, tmp_path, name):
    """Skipped where it passed before on the same .ipynb, the same files under the site's code/
    and the same checking code (tests/page_records.py); the clean environment is made only
    when a notebook runs."""
    record = page_records.record_of(built_site, f"notebook {name} run without the package")
    if record.holds():
        pytest.skip(record.reason)
    notebook_runner = request.getfixturevalue("notebook_runner")
    url = f"{built_site.url}notebooks/{name}/{name}.ipynb"
    notebook = jupytext.reads(urllib.request.urlopen(url).read().decode(), fmt="ipynb")
    first_code = next(cell.source for cell in notebook.cells if cell.cell_type == "code")
    assert f'SITE_URL = "{built_site.url}"' in first_code, "the download does not name the site it came from"
    script = tmp_path / f"{name}.py"
    checked = tmp_path / "checks.json"
    script.write_text(jupytext.writes(notebook, fmt="py:percent")
                      + CHECKS_CODE.format(checks_file=str(CHECKS_FILE), name=f"{name}.py", out=str(checked)))
    env = {"PATH": os.environ.get("PATH", ""), "MPLBACKEND": "Agg", "HOME": str(tmp_path)}
    # The tiny GPT's training run, which the site build made and keyed by the code of the modules
    # it fetched (the same files): loaded, not trained a third time.
    env["LLM_ATTENTION_RUN_CACHE"] = os.environ.get("LLM_ATTENTION_RUN_CACHE", "")
    returncode, output = notebook_runner(script, env)
    assert returncode == 0, output[-3000:]
    assert checked.exists(), f"{name} stopped before its page's checks ran: {output[-3000:]}"
    results = json.loads(checked.read_text())
    failed = [check for check, holds in results.items() if not holds]
    assert results and not failed, f"{name} computed other numbers: {failed}"
    for package in ("llm_attention", "llm_attention_site"):
        fetched = sorted(p.name for p in (tmp_path / package).glob("*.py"))
        assert fetched == sorted(p.name for p in (ROOT / "src" / package).glob("*.py")), package
    record.save(notebook_inputs(built_site.site_dir, name))


def notebook_inputs(site_dir: pathlib.Path, name: str) -> set[str]:
    """What a downloaded notebook reads from the site: its .ipynb and the files under code/."""
    code = {"/" + p.relative_to(site_dir).as_posix() for p in (site_dir / "code").rglob("*") if p.is_file()}
    return {f"/notebooks/{name}/{name}.ipynb", *code}


def test_the_notebooks_fetch_from_the_site_only_under_code():
    """What a notebook's record holds (notebook_inputs) is all it can read from the site: the
    notebooks, and the fetcher they run, name the site's address only before code/."""
    sources = {path: path.read_text(encoding="utf8") for path in sorted((ROOT / "docs" / "notebooks").glob("*.py"))}
    fetcher = ROOT / "src" / "llm_attention_site" / "fetch_packages.py"
    sources[fetcher] = fetcher.read_text(encoding="utf8")
    for path, source in sources.items():
        uses = re.findall(r"\{(?:SITE_URL|site_url)\}([^\"']*)", source)
        assert all(use.startswith("code/") for use in uses), (path.name, uses)
    assert re.findall(r"\{(?:SITE_URL|site_url)\}", sources[fetcher]), "the fetcher no longer names the site"
    assert all("{SITE_URL}code/" in source for path, source in sources.items() if path != fetcher)


def _unimported_matplotlib_modules(source: str, not_loaded: set[str]) -> set[str]:
    """``matplotlib.X`` reached as an attribute (of ``matplotlib`` or its alias) where X is one
    of ``not_loaded`` (the modules a bare ``import matplotlib`` leaves unloaded) and this
    source does not import it."""
    tree = ast.parse(source)
    aliases, imported = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for name in node.names:
                if name.name == "matplotlib":
                    aliases.add(name.asname or "matplotlib")
                elif name.name.startswith("matplotlib."):
                    imported.add(name.name.split(".")[1])
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("matplotlib"):
            parts = node.module.split(".")
            imported.update([parts[1]] if len(parts) > 1 else [n.name for n in node.names])
    reached = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
               and isinstance(node.value, ast.Name) and node.value.id in aliases}
    return (reached & not_loaded) - imported


def test_notebook_code_imports_each_matplotlib_module_it_uses():
    """The runner has imported pyplot before a notebook starts; a reader's Python has not. So no
    notebook, and no module a notebook fetches, may reach a matplotlib module that a bare
    ``import matplotlib`` does not load without importing it (a planted case is caught)."""
    import pkgutil

    import matplotlib

    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, matplotlib; print(' '.join(sorted({m.split('.')[1] "
         "for m in sys.modules if m.startswith('matplotlib.')})))"],
        capture_output=True, text=True, check=True).stdout.split()
    not_loaded = {module.name for module in pkgutil.iter_modules(matplotlib.__path__)} - set(loaded)
    assert {"pyplot", "patches"} <= not_loaded, loaded
    planted = "import matplotlib\nmatplotlib.patches.Rectangle((0, 0), 1, 1)\n"
    assert _unimported_matplotlib_modules(planted, not_loaded) == {"patches"}
    sources = sorted((ROOT / "docs" / "notebooks").glob("*.py")) + sorted((ROOT / "src").glob("llm_attention*/*.py"))
    found = {str(path.relative_to(ROOT)): modules for path in sources
             if (modules := _unimported_matplotlib_modules(path.read_text(encoding="utf8"), not_loaded))}
    assert not found, f"matplotlib modules used without their import: {found}"
