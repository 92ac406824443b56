"""The repository's pytest set-up: which files to skip, and the fence runner to load.

The machinery itself lives under tests/: ``tests/fences.py`` runs every Python fence of the
pages the way the site build runs it (read its docstring), and ``tests/conftest.py`` holds the
shared fixtures (one strict site build for the whole run, a headless browser).
"""

pytest_plugins = ["tests.fences"]

# Notebook scripts are executed by tests/test_notebooks.py, not imported at collection.
collect_ignore_glob = ["docs/notebooks/*.py", "hooks/*.py", "site/*", "benchmarks/*"]
