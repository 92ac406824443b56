"""A notebook downloaded from the site runs where the package is not installed.

The site is built with SITE_URL at the address it is served at (the ``built_site`` fixture); each
notebook's .ipynb is downloaded from it and run, as a script, by the Python of a new virtual
environment that holds torch, matplotlib and the distributions they require, and nothing else: no
``llm_attention``, no Jupyter, none of the project's other packages. The notebook's first code cell
must fetch the package's modules from the site.

The environment is made in a second: each of those distributions is linked, files and metadata,
from this environment's site-packages (a fresh ``pip install torch matplotlib`` would copy the same
files). The test checks what the environment can import against that list.

That environment's Python imports torch and matplotlib once and runs each notebook in a fork of
itself (tests/preloaded_python.py): the notebook starts as ``python notebook.py`` would, with
those two imports already done, instead of spending most of its time redoing them.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import urllib.request
from importlib.metadata import distribution

import jupytext
import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p.stem for p in (ROOT / "docs" / "notebooks").glob("*.py"))
WANTED = ("torch", "matplotlib")  # what a reader is told a notebook needs


def requirement_closure(names) -> dict:
    """Each distribution in ``names`` and everything it requires here, by canonical name."""
    found, todo = {}, list(names)
    while todo:
        name = canonicalize_name(todo.pop())
        if name in found:
            continue
        found[name] = dist = distribution(name)
        for line in dist.requires or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return found


@pytest.fixture(scope="module")
def clean_python(tmp_path_factory) -> pathlib.Path:
    """A venv's Python that has torch, matplotlib and their requirements, and nothing else."""
    venv = tmp_path_factory.mktemp("clean-venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = pathlib.Path(subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip())
    dists = requirement_closure(WANTED)
    for dist in dists.values():
        # The top-level entries a distribution installed: its packages, modules, .libs and .dist-info.
        tops = {pathlib.PurePath(f).parts[0] for f in dist.files if not str(f).startswith("..")}
        for top in tops:
            source = pathlib.Path(dist.locate_file(top))
            if source.exists() and not (purelib / top).exists():
                (purelib / top).symlink_to(source)
    probe = subprocess.run(
        [str(python), "-I", "-c",
         "import json, importlib.metadata as m, importlib.util as u; "
         "print(json.dumps([sorted({d.metadata['Name'].lower().replace('_', '-') for d in m.distributions()}), "
         "[n for n in ('llm_attention', 'jupytext', 'transformers', 'IPython') if u.find_spec(n)]]))"],
        capture_output=True, text=True, cwd=venv,
    )
    assert probe.returncode == 0, probe.stderr
    installed, importable = json.loads(probe.stdout)
    assert installed == sorted(dists), f"the clean environment holds {installed}, expected {sorted(dists)}"
    assert not importable, f"the clean environment can import {importable}"
    return python


@pytest.fixture(scope="module")
def notebook_runner(clean_python, tmp_path_factory):
    """Run a script with the clean Python (torch and matplotlib imported once, tests/preloaded_python.py);
    return its exit code and output."""
    home = tmp_path_factory.mktemp("notebook-home")
    env = {"PATH": os.environ.get("PATH", ""), "MPLBACKEND": "Agg", "HOME": str(home)}
    server = subprocess.Popen(
        [str(clean_python), str(ROOT / "tests" / "preloaded_python.py"), *WANTED],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=home,
    )
    assert json.loads(server.stdout.readline()) == {"ready": list(WANTED)}

    def run(script: pathlib.Path, env: dict) -> tuple[int, str]:
        out = script.with_suffix(".out")
        request = {"script": str(script), "cwd": str(script.parent), "env": env, "out": str(out)}
        server.stdin.write(json.dumps(request) + "\n")
        server.stdin.flush()
        return json.loads(server.stdout.readline())["returncode"], out.read_text()

    yield run
    server.stdin.close()
    server.wait(timeout=30)


@pytest.mark.xdist_group("notebook downloads")  # one clean environment and runner per run
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_downloaded_notebook_runs_without_the_package(built_site, notebook_runner, tmp_path, name):
    url = f"{built_site.url}notebooks/{name}/{name}.ipynb"
    notebook = jupytext.reads(urllib.request.urlopen(url).read().decode(), fmt="ipynb")
    first_code = next(cell.source for cell in notebook.cells if cell.cell_type == "code")
    assert f'SITE_URL = "{built_site.url}"' in first_code, "the download does not name the site it came from"
    script = tmp_path / f"{name}.py"
    script.write_text(jupytext.writes(notebook, fmt="py:percent"))
    env = {"PATH": os.environ.get("PATH", ""), "MPLBACKEND": "Agg", "HOME": str(tmp_path)}
    # The tiny GPT's training run, which the site build made and keyed by the code of the modules
    # it fetched (the same files): loaded, not trained a third time.
    env["LLM_ATTENTION_RUN_CACHE"] = os.environ.get("LLM_ATTENTION_RUN_CACHE", "")
    returncode, output = notebook_runner(script, env)
    assert returncode == 0, output[-3000:]
    fetched = sorted(p.name for p in (tmp_path / "llm_attention").glob("*.py"))
    assert fetched == sorted(p.name for p in (ROOT / "src" / "llm_attention").glob("*.py"))
