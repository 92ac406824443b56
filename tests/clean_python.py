"""A Python with only some distributions installed, and a runner that forks it per script.

``make_clean_python(folder, wanted)`` makes a virtual environment that holds the distributions
in ``wanted`` and those they require, and nothing else: each is linked, files and metadata, from
this environment's site-packages (a fresh ``pip install`` would copy the same files), so it takes
a second. It checks what the new Python can import against that list.

``PreloadedRunner`` runs scripts with that Python, each in a fork of one process that imported
``wanted`` once (tests/preloaded_python.py): a script starts as ``python script.py`` would,
without spending most of its time importing torch again.

Used by the tests of downloads: notebooks (torch and matplotlib) and copy sets (torch alone).
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
from importlib.metadata import distribution

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = pathlib.Path(__file__).resolve().parents[1]
# What the project has and a clean environment must not: the packages, the site's tools.
PROJECT_ONLY = ("llm_attention", "llm_attention_site", "jupytext", "transformers", "IPython", "matplotlib")


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


def make_clean_python(venv: pathlib.Path, wanted: tuple[str, ...]) -> pathlib.Path:
    """A venv's Python in ``venv`` that has ``wanted``, their requirements, and nothing else."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = pathlib.Path(subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip())
    dists = requirement_closure(wanted)
    for dist in dists.values():
        # The top-level entries a distribution installed: its packages, modules, .libs and .dist-info.
        tops = {pathlib.PurePath(f).parts[0] for f in dist.files if not str(f).startswith("..")}
        for top in tops:
            source = pathlib.Path(dist.locate_file(top))
            if source.exists() and not (purelib / top).exists():
                (purelib / top).symlink_to(source)
    forbidden = [name for name in PROJECT_ONLY if canonicalize_name(name) not in dists]
    probe = subprocess.run(
        [str(python), "-I", "-c",
         "import json, sys, importlib.metadata as m, importlib.util as u; "
         "print(json.dumps([sorted({d.metadata['Name'].lower().replace('_', '-') for d in m.distributions()}), "
         "[n for n in sys.argv[1:] if u.find_spec(n)]]))", *forbidden],
        capture_output=True, text=True, cwd=venv,
    )
    assert probe.returncode == 0, probe.stderr
    installed, importable = json.loads(probe.stdout)
    assert installed == sorted(dists), f"the clean environment holds {installed}, expected {sorted(dists)}"
    assert not importable, f"the clean environment can import {importable}"
    return python


class PreloadedRunner:
    """Runs scripts with ``python``, each in a fork of a process that imported ``modules`` once."""

    def __init__(self, python: pathlib.Path, modules: tuple[str, ...], home: pathlib.Path, env: dict):
        self.server = subprocess.Popen(
            [str(python), str(ROOT / "tests" / "preloaded_python.py"), *modules],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=home,
        )
        ready = json.loads(self.server.stdout.readline())
        assert ready == {"ready": list(modules)}, ready

    def run(self, script: pathlib.Path, env: dict) -> tuple[int, str]:
        """Run ``script`` in its folder with ``env``; return its exit code and output."""
        out = script.with_suffix(".out")
        request = {"script": str(script), "cwd": str(script.parent), "env": env, "out": str(out)}
        self.server.stdin.write(json.dumps(request) + "\n")
        self.server.stdin.flush()
        return json.loads(self.server.stdout.readline())["returncode"], out.read_text()

    def close(self) -> None:
        self.server.stdin.close()
        self.server.wait(timeout=30)
