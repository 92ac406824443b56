"""The GitHub workflows run on GitHub's runners today and follow its security advice:
``actionlint`` (syntax, expressions, actions on a removed Node runtime) and ``zizmor``
(actions pinned to a commit, least permissions, no persisted credentials, no template
injection) report nothing above low on either. Both come from PyPI as binary wheels."""

from __future__ import annotations

import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: it comes with requirements.txt")
    return path


def test_there_are_two_workflows_and_each_runs_a_script_of_the_repository():
    ci, pages = WORKFLOWS / "ci.yml", WORKFLOWS / "pages.yml"
    assert sorted(p.name for p in WORKFLOWS.glob("*.yml")) == ["ci.yml", "pages.yml"]
    assert "run: bash .ci/run" in ci.read_text()
    assert "run: bash .ci/pages" in pages.read_text()


def test_actionlint_finds_nothing():
    done = subprocess.run(
        [tool("actionlint"), "-no-color", *sorted(map(str, WORKFLOWS.glob("*.yml")))],
        capture_output=True, text=True, cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_zizmor_finds_nothing_above_low():
    done = subprocess.run(
        [tool("zizmor"), "--offline", "--no-progress", "--min-severity", "medium",
         "--format", "plain", *sorted(map(str, WORKFLOWS.glob("*.yml")))],
        capture_output=True, text=True, cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "No findings to report" in done.stdout + done.stderr
