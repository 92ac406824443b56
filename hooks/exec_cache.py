"""Build hook: a cache of executed outputs, so that ``mkdocs serve`` shows a prose edit in seconds.

Every page runs its code at build time (markdown-exec blocks, executed notebooks). A change to one
page's prose makes ``mkdocs serve`` rebuild every page, so without a cache each save re-runs all
the code of the site. This hook stores what each block printed, what each notebook rendered
and how each chart was drawn, under a key made of everything that can change it:

- the fingerprint of the build: every file under ``src/``, ``hooks/`` and ``benchmarks/`` (the
  pages include and read them), ``mkdocs.yml``, the Python version and the name and version of
  every installed package;
- for a markdown-exec block: its page, its session, the code of every block of that session that
  came before it on the page, its own code and options; on a page whose blocks read the other
  pages' sources (``READS_THE_PAGES``: the home page's map quotes each page's first sentence),
  every page under ``docs/`` too;
- for a notebook: its source file and the renderer's options;
- for a chart (a mermaid fence, drawn by ``llm_attention_site.diagrams``): its source.

A block whose key is stored is not executed; its session's earlier blocks are run (their output
discarded) as soon as a later block of the session misses, so a block never runs without the
state the full build would give it. A change under ``src/`` changes the fingerprint, hence every
key: every page runs again. Failures are never stored.

On by default under ``mkdocs serve`` and ``mkdocs build``, so that a contributor's strict build
after a prose edit takes seconds; ``LLM_ATTENTION_CACHE=0`` turns it off, and what is checked or
published is built with it off: CI's strict build (.ci/run) and the Pages build (.ci/pages) run
every block. The tests' browser build keeps it on (the tests run every block themselves).
Stored in ``.cache/executed/`` (delete the folder to empty it).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import pathlib
import sys
import threading
from collections import defaultdict
from typing import Callable

ROOT = pathlib.Path(__file__).resolve().parents[1]
SWITCH = "LLM_ATTENTION_CACHE"
FINGERPRINTED = ("src", "hooks", "benchmarks")  # folders whose files the pages include or read
FINGERPRINTED_FILES = ("mkdocs.yml",)
READS_THE_PAGES = {"index.md"}  # pages whose blocks read other pages (llm_attention_site.site_map)


def _add_files(digest, root: pathlib.Path, files) -> None:
    """Each file's path and bytes into ``digest``, in path order (a path that is no file: left out)."""
    for path in sorted(files):
        if path.is_file():
            digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")


def pages_digest(root: pathlib.Path = ROOT) -> str:
    """One hash of every page's source under docs/."""
    digest = hashlib.sha256()
    _add_files(digest, root, (root / "docs").rglob("*.md"))
    return digest.hexdigest()


def installed_packages() -> list[str]:
    return sorted(f"{d.metadata['Name']}=={d.version}" for d in importlib.metadata.distributions())


def fingerprint(root: pathlib.Path = ROOT, packages: list[str] | None = None) -> str:
    """One hash of every input that a page's code can see outside the page itself."""
    digest = hashlib.sha256()
    files = [root / name for name in FINGERPRINTED_FILES]
    for folder in FINGERPRINTED:
        files += [p for p in (root / folder).rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    _add_files(digest, root, files)
    digest.update(sys.version.encode())
    for package in installed_packages() if packages is None else packages:
        digest.update(package.encode() + b"\0")
    return digest.hexdigest()


def _key(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=repr).encode()).hexdigest()


class ExecCache:
    """Stored outputs under ``directory``; ``fingerprint`` covers everything outside the page."""

    def __init__(self, directory: pathlib.Path, fingerprint: str, pages: str = ""):
        self.directory = pathlib.Path(directory)
        self.fingerprint = fingerprint
        self.pages = pages  # pages_digest(), for the blocks of READS_THE_PAGES
        self.hits = self.misses = 0
        self._counting = threading.Lock()  # notebooks render in a thread (hooks/notebooks_ahead.py)
        self._chains: dict[tuple[str, str], list[str]] = defaultdict(list)  # code seen so far
        self._pending: dict[tuple[str, str], list[tuple[str, dict]]] = defaultdict(list)  # not yet run

    def _load(self, key: str):
        path = self.directory / key[:2] / f"{key}.json"
        return json.loads(path.read_text(encoding="utf8")) if path.is_file() else None

    def _count(self, hit: bool) -> None:
        with self._counting:
            if hit:
                self.hits += 1
            else:
                self.misses += 1

    def _store(self, key: str, value) -> None:
        path = self.directory / key[:2] / f"{key}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".part")
        partial.write_text(json.dumps(value), encoding="utf8")
        partial.replace(path)

    def run_block(self, page: str, session: str | None, code: str, options: dict, run: Callable[..., str]) -> str:
        """What the block prints: stored, or from ``run(code, session=session, **options)``."""
        chain = self._chains[(page, session)] if session else []
        reads = (self.pages,) if page in READS_THE_PAGES else ()  # the other pages it quotes
        key = _key("block", self.fingerprint, page, session, chain, code, options, *reads)
        stored = self._load(key)
        if session:
            chain.append(code)
        self._count(hit=stored is not None)
        if stored is not None:
            if session:
                self._pending[(page, session)].append((code, options))
            return stored
        if session:  # bring the session to the state the full build gives this block
            pending = self._pending.pop((page, session), [])
            for earlier, earlier_options in pending:
                run(earlier, session=session, **earlier_options)
        output = run(code, session=session, **options)
        self._store(key, output)
        return output

    def _stored_or_made(self, key: str, make: Callable[[], str]) -> str:
        stored = self._load(key)
        self._count(hit=stored is not None)
        if stored is not None:
            return stored
        made = make()
        self._store(key, made)
        return made

    def render_notebook(self, path: str, options: dict, render: Callable[..., str]) -> str:
        source = pathlib.Path(path).read_bytes()
        key = _key("notebook", self.fingerprint, path, hashlib.sha256(source).hexdigest(), options)
        return self._stored_or_made(key, lambda: render(path, **options))

    def render_diagram(self, source: str, render: Callable[[str], str]) -> str:
        """A chart's HTML (``llm_attention_site.diagrams.render``): stored, or drawn now."""
        return self._stored_or_made(_key("diagram", self.fingerprint, source), lambda: render(source))


# --- MkDocs hook -------------------------------------------------------------------------------

_state: dict = {"cache": None, "page": None}


def enabled() -> bool:
    return os.environ.get(SWITCH) == "1"


def on_startup(command: str, dirty: bool) -> None:
    if command in ("serve", "build"):
        os.environ.setdefault(SWITCH, "1")


def on_pre_build(config) -> None:
    from markdown_exec._internal.formatters import python as exec_python

    # Each build starts every session afresh, as a first build does (serve keeps the process).
    exec_python._sessions_globals.clear()
    exec_python._sessions_counter.clear()
    _state["cache"] = ExecCache(ROOT / ".cache" / "executed", fingerprint(), pages_digest()) if enabled() else None
    _install()


def on_page_markdown(markdown: str, page, config, files) -> str:
    _state["page"] = page.file.src_uri
    return markdown


def on_post_build(config) -> None:
    cache = _state["cache"]
    if cache is not None:
        import logging

        logging.getLogger("mkdocs").info(f"executed-output cache: {cache.hits} reused, {cache.misses} run")


def _install() -> None:
    """Route markdown-exec's Python blocks and mkdocs-jupyter's renderer through the cache."""
    from markdown_exec._internal import main as exec_main
    from markdown_exec._internal.formatters import python as exec_python
    from markdown_exec._internal.formatters.base import base_format
    from mkdocs_jupyter import convert

    original_run = exec_python._run_python

    def cached_run(code, returncode=None, session=None, id=None, **extra):  # noqa: A002
        cache = _state["cache"]
        options = dict(extra, returncode=returncode, id=id)
        if cache is None:
            return original_run(code, session=session, **options)
        return cache.run_block(_state["page"] or "", session, code, options, original_run)


    def format_python(**kwargs):
        return base_format(language="python", run=cached_run, **kwargs)

    exec_main.formatters["python"] = exec_main.formatters["py"] = format_python

    original_render = getattr(convert.nb2html, "__wrapped__", convert.nb2html)

    def cached_render(path, **options):
        cache = _state["cache"]
        if cache is None:
            return original_render(path, **options)
        return cache.render_notebook(path, options, original_render)

    cached_render.__wrapped__ = original_render
    convert.nb2html = cached_render

    from llm_attention_site import diagrams  # its fence formatter calls diagrams.render

    # The function as the module defines it (with its own in-memory cache, which keeps serving
    # rebuilds when this cache is off), not a wrapper left by an earlier build of this process.
    original_diagram = getattr(diagrams.render, "_before_exec_cache", diagrams.render)

    def cached_diagram(source):
        cache = _state["cache"]
        if cache is None:
            return original_diagram(source)
        return cache.render_diagram(source, original_diagram)

    cached_diagram._before_exec_cache = original_diagram
    diagrams.render = cached_diagram
