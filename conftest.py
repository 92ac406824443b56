"""The repository's pytest set-up: which files to skip, and the fence runner to load.

The machinery itself lives under tests/: ``tests/fences.py`` runs every Python fence of the
pages the way the site build runs it (read its docstring), and ``tests/conftest.py`` holds the
shared fixtures (one strict site build for the whole run, a headless browser).
"""

import os
import pathlib
import sys

pytest_plugins = ["tests.fences"]

# pytest rewrites the asserts of every test module when it imports it, and keeps the result
# beside the module, unless PYTHONDONTWRITEBYTECODE is set (some CI images set it): then every
# worker rewrites them again on every run, about 1.3 s each. The test run keeps them (in the
# __pycache__ folders git ignores), as it keeps its other caches.
sys.dont_write_bytecode = False

# Pages and tests that train a model share one run, kept on disk (llm_attention.induction);
# LLM_ATTENTION_RUN_CACHE="" turns the disk copy off.
os.environ.setdefault(
    "LLM_ATTENTION_RUN_CACHE", str(pathlib.Path(__file__).resolve().parent / ".cache")
)

# Notebook scripts are run by the site build and, downloaded from it, by
# tests/test_notebook_download.py; they are not imported at collection. The API
# reference's pages only show the package's files whole; the package's own tests run them.
collect_ignore_glob = ["docs/reference/*.md", "docs/notebooks/*.py", "hooks/*.py", "site/*", "benchmarks/*"]


def pytest_collection_modifyitems(items) -> None:
    """Run the tests that need the built site last: while the site builds in the background, the
    workers do everything else instead of waiting for it."""
    needs_site = {"built_site", "site_build"}
    items.sort(key=lambda item: bool(needs_site & set(getattr(item, "fixturenames", ()))))
