"""What the pages offer to download works as the sentences beside the links say.

**Code.** A page links a module of ``src/llm_attention/`` in one of two ways: its copy set as a
zip (``code/llm_attention/<module>.zip``: the module and every module it imports, with an
``__init__.py``), or its file alone (``code/llm_attention/<module>.py``). The pages say that
what they link needs only PyTorch. This test finds every such link in the pages' Markdown and
checks that the build publishes a file at that address, and that the link's text names it.
A zip is one of the copy sets that tests/test_copy_sets.py downloads from the built site and
runs, unpacked under another package name, in a Python that has torch and nothing else. A single
file is run here the same way, alone in an empty folder as a top-level module: its module's
example (from that test) must compute what the package computes. A file that imports a sibling
(``from .checks import ...``) fails alone, so only a module that imports none can be linked as a
single file.

**Notebooks.** The home page and the README say that chapters 1 to 5 each have a notebook and
the summary has none: each chapter page but the summary links a notebook that exists.
"""

from __future__ import annotations

import collections
import os
import pathlib
import posixpath
import re
import textwrap

import pytest
from mkdocs.config import load_config
from mkdocs.structure.files import get_files

from llm_attention_site.copy_sets import copyable_modules
from tests.clean_python import PreloadedRunner, make_clean_python
from tests.test_copy_sets import EXAMPLES, SCRIPT, assert_same, run_example

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
CODE = "code/llm_attention/"
# [text](target): a Markdown link whose target lies under the published package folder.
LINK = re.compile(r"\[([^\]]+)\]\(([^)\s#]*" + re.escape(CODE) + r"[^)\s#]+)\)")


def code_links() -> dict[str, list[tuple[str, int, str]]]:
    """Every link to a published module or zip: site path -> [(page, line, link text)]."""
    found = collections.defaultdict(list)
    for page in sorted(DOCS.rglob("*.md")) + sorted((DOCS / "notebooks").glob("*.py")):
        relative = page.relative_to(DOCS).as_posix()
        for number, line in enumerate(page.read_text(encoding="utf8").splitlines(), 1):
            for text, target in LINK.findall(line):
                if "://" in target:
                    continue
                path = posixpath.normpath(posixpath.join(posixpath.dirname(relative), target))
                found[path].append((relative, number, text.strip("`")))
    return dict(found)


LINKS = code_links()
MODULE_LINKS = sorted(p for p in LINKS if p.endswith((".py", ".zip")))


def test_the_pages_link_code_both_ways():
    """The search finds the links the chapters give (so an empty list cannot pass the test)."""
    assert {f"{CODE}simple.py", f"{CODE}causal.zip", f"{CODE}multihead.zip"} <= set(LINKS)
    assert all(p in MODULE_LINKS or p.endswith(".txt") for p in LINKS), sorted(LINKS)


@pytest.fixture(scope="module")
def site_files():
    """The site's files as the build sees them once every plugin and hook has added its own."""
    config = load_config(str(ROOT / "mkdocs.yml"))
    return config.plugins.on_files(get_files(config), config=config)


@pytest.fixture(scope="module")
def torch_only(tmp_path_factory):
    """Runs a script with a Python that has torch and nothing else; returns (exit code, output)."""
    python = make_clean_python(tmp_path_factory.mktemp("torch-only-venv"), ("torch",))
    home = tmp_path_factory.mktemp("reader-home")
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "OMP_NUM_THREADS": "1"}
    runner = PreloadedRunner(python, ("torch",), home, env)
    yield lambda script: runner.run(script, env)
    runner.close()


@pytest.mark.parametrize("path", MODULE_LINKS)
def test_a_linked_download_is_published_under_the_name_its_link_gives(site_files, path):
    where = ", ".join(f"{page}:{line}" for page, line, _ in LINKS[path])
    assert site_files.get_file_from_path(path) is not None, (
        f"{where} links {path}, which the site does not publish")
    name = posixpath.basename(path)
    stem, kind = name.rsplit(".", 1)
    assert f"{stem}.py" in copyable_modules(), f"{where}: {name} is no module of the package"
    for page, line, text in LINKS[path]:  # the text names the download, or calls it a zip
        allowed = {name, "zip", f"{stem}.py"} if kind == "zip" else {name}
        assert text in allowed, f"{page}:{line}: the link [{text}] downloads {name}"


SINGLE_FILES = [p for p in MODULE_LINKS if p.endswith(".py")]


@pytest.mark.xdist_group("page downloads")  # one worker, one clean environment
@pytest.mark.parametrize("path", SINGLE_FILES)
def test_a_module_linked_alone_works_alone_with_only_torch(site_files, torch_only, tmp_path, path):
    import importlib

    import torch

    where = ", ".join(f"{page}:{line}" for page, line, _ in LINKS[path])
    name = posixpath.basename(path)
    stem = name.removesuffix(".py")
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / name).write_bytes(site_files.get_file_from_path(path).content_bytes)
    out, script = tmp_path / "result.pt", tmp_path / "use_it.py"
    script.write_text(SCRIPT.format(
        parent=str(folder), prefix="", stem=stem, out=str(out),
        example=textwrap.dedent(EXAMPLES[name]).strip(),
    ))
    returncode, output = torch_only(script)
    assert returncode == 0, f"{where}: {name} alone does not work with only torch:\n{output[-2000:]}"
    ours = run_example(importlib.import_module(f"llm_attention.{stem}"),
                       lambda sibling: importlib.import_module(f"llm_attention.{sibling}"), name)
    assert_same(torch.load(out, weights_only=False), ours, f"{where}: {name}")


CHAPTERS = ("why-attention", "simple-self-attention", "trainable-self-attention",
            "causal-attention", "multi-head-attention")  # chapters 1 to 5, in order


def test_chapters_one_to_five_link_a_notebook_and_the_summary_none():
    linked = re.compile(r"\]\(\.\./notebooks/([a-z_]+\.py)\)")
    chapters = sorted(p.stem for p in (DOCS / "chapters").glob("*.md"))
    assert chapters == sorted([*CHAPTERS, "summary"])
    for chapter in CHAPTERS:
        names = linked.findall((DOCS / "chapters" / f"{chapter}.md").read_text(encoding="utf8"))
        assert names, f"{chapter} links no notebook"
        assert all((DOCS / "notebooks" / n).is_file() for n in names), (chapter, names)
    assert not linked.findall((DOCS / "chapters" / "summary.md").read_text(encoding="utf8"))
