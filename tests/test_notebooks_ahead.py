"""The notebooks render in the background while the pages build (hooks/notebooks_ahead.py), and
each notebook's page gets exactly what the plugin's own call would have given it: the same
options, the same result, the same error. The renderer is replaced here by a stand-in that
records its calls; tests/test_site_build.py checks that the real build used every notebook
rendered ahead."""

from __future__ import annotations

import importlib.util
import logging
import os
import pathlib
import threading
from concurrent.futures import wait

import pytest
from mkdocs.config import load_config
from mkdocs.structure.files import get_files
from mkdocs.structure.pages import Page
from mkdocs_jupyter import convert

ROOT = pathlib.Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("notebooks_ahead_under_test", ROOT / "hooks" / "notebooks_ahead.py")
notebooks_ahead = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(notebooks_ahead)


@pytest.fixture(scope="module")
def site():
    """The site's configuration, its files and its notebooks' paths."""
    config = load_config(str(ROOT / "mkdocs.yml"))
    files = get_files(config)
    plugin = config.plugins[notebooks_ahead.PLUGIN]
    notebooks = [file for file in files if plugin.should_include(file)]
    assert len(notebooks) == len(list((ROOT / "docs" / "notebooks").glob("*.py"))), notebooks
    return config, files, notebooks


class Renderer:
    """A stand-in for ``convert.nb2html``: records each call and the thread it ran in; raises
    for the paths in ``failing``."""

    def __init__(self, failing=()):
        self.calls, self.threads, self.failing = [], [], set(failing)

    def __call__(self, path, **options):
        self.calls.append((path, options))
        self.threads.append(threading.current_thread().name)
        if path in self.failing:
            raise ValueError(f"planted failure in {path}")
        return f"<p>{pathlib.Path(path).name} {sorted(options.items())}</p>"


@pytest.fixture(autouse=True)
def environment(monkeypatch):
    """The hook sets OMP_WAIT_POLICY in this process: put it back as it was after each test."""
    monkeypatch.setenv("OMP_WAIT_POLICY", "unset")
    monkeypatch.delenv("OMP_WAIT_POLICY")


@pytest.fixture
def renderer(monkeypatch):
    render = Renderer()
    monkeypatch.setattr(convert, "nb2html", render)
    yield render
    notebooks_ahead._stop()


def _page_render(config, files, file) -> str:
    """What the build does for a notebook's page: the plugin's own call of ``nb2html``."""
    page = Page(None, file, config)
    config.plugins[notebooks_ahead.PLUGIN].on_pre_page(page, config=config, files=files)
    page.render(config, files)
    return page.content


def test_the_options_are_those_the_plugin_passes(site, renderer):
    config, files, notebooks = site
    plugin = config.plugins[notebooks_ahead.PLUGIN]
    for file in notebooks:
        _page_render(config, files, file)
    assert renderer.calls == [(file.abs_src_path, notebooks_ahead._options(plugin.config, file.abs_src_path))
                              for file in notebooks]


def test_each_page_takes_the_notebook_rendered_ahead_in_another_thread(site, renderer, caplog):
    config, files, notebooks = site
    notebooks_ahead.on_nav(None, config, files)
    contents = [_page_render(config, files, file) for file in notebooks]
    assert [path for path, _ in renderer.calls] == [file.abs_src_path for file in notebooks]  # once each
    assert all(thread.startswith("notebooks-ahead") for thread in renderer.threads), renderer.threads
    assert contents == [renderer(path, **options) for path, options in renderer.calls[: len(notebooks)]]
    with caplog.at_level(logging.INFO, logger="mkdocs"):
        notebooks_ahead.on_post_build(config)
    assert f"notebooks run ahead of their pages: {len(notebooks)} used, 0 unused" in caplog.text


def test_what_a_render_imports_is_imported_before_the_renders_start(site, monkeypatch):
    """The list is imported by the build's own thread, and before the first render starts in
    the background: a module half-imported there could be seen by the build's thread."""
    import importlib

    config, files, notebooks = site
    imported, seen = [], []

    class Importer:
        @staticmethod
        def import_module(name):
            imported.append((name, threading.current_thread().name))
            return importlib.import_module(name)

    def render(path, **options):
        seen.append(len(imported))
        return ""

    monkeypatch.setattr(notebooks_ahead, "importlib", Importer)
    monkeypatch.setattr(convert, "nb2html", render)
    try:
        notebooks_ahead.on_nav(None, config, files)
        for file in notebooks:
            _page_render(config, files, file)
    finally:
        notebooks_ahead._stop()
    assert "IPython" in notebooks_ahead.IMPORTED_FIRST
    assert imported == [(name, threading.current_thread().name) for name in notebooks_ahead.IMPORTED_FIRST]
    assert seen == [len(notebooks_ahead.IMPORTED_FIRST)] * len(notebooks), seen


def test_a_call_with_other_options_renders_then_and_there(site, renderer):
    config, files, notebooks = site
    notebooks_ahead.on_nav(None, config, files)
    path = notebooks[0].abs_src_path
    wait(list(notebooks_ahead._state["ahead"].values()))  # the background's calls are all in
    before = len(renderer.calls)
    shown = convert.nb2html(path, execute=False)
    assert renderer.calls[before:] == [(path, {"execute": False})]
    assert renderer.threads[before:] == [threading.current_thread().name]
    assert shown == renderer(path, execute=False)


def test_a_failing_notebook_raises_its_error_at_its_page(site, monkeypatch):
    config, files, notebooks = site
    failing = notebooks[1].abs_src_path
    monkeypatch.setattr(convert, "nb2html", Renderer(failing=[failing]))
    try:
        notebooks_ahead.on_nav(None, config, files)
        _page_render(config, files, notebooks[0])
        with pytest.raises(ValueError, match="planted failure"):
            _page_render(config, files, notebooks[1])
    finally:
        notebooks_ahead.on_build_error(None)
    assert notebooks_ahead._state["executor"] is None and not notebooks_ahead._state["ahead"]


def test_a_second_build_renders_afresh_through_what_is_installed_then(site, renderer, monkeypatch):
    """Under ``mkdocs serve`` every rebuild starts anew, wrapping the renderer installed for
    that build (hooks/exec_cache.py installs its own each time), never its own last wrapper."""
    config, files, notebooks = site
    notebooks_ahead.on_nav(None, config, files)
    first = convert.nb2html
    for file in notebooks:
        _page_render(config, files, file)
    notebooks_ahead.on_post_build(config)
    second = Renderer()
    monkeypatch.setattr(convert, "nb2html", second)  # as a rebuild's exec_cache would
    notebooks_ahead.on_nav(None, config, files)
    for file in notebooks:
        _page_render(config, files, file)
    assert len(second.calls) == len(notebooks) and len(renderer.calls) == len(notebooks)
    notebooks_ahead.on_post_build(config)
    monkeypatch.setattr(convert, "nb2html", first)  # a rebuild without exec_cache: its own wrapper
    notebooks_ahead.on_nav(None, config, files)
    assert convert.nb2html._ahead_of is renderer and convert.nb2html.__wrapped__ is renderer


def test_the_programs_the_build_starts_wait_without_spinning_unless_told_otherwise(site, renderer, monkeypatch):
    config, files, _ = site
    notebooks_ahead.on_nav(None, config, files)
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    notebooks_ahead._stop()
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    notebooks_ahead.on_nav(None, config, files)
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"
