"""A pytest plugin (loaded by the root conftest.py): run every Python fence of the site the way
the site build runs it.

Three gaps between a plain Markdown parser and the site are closed here:

1. Fences inside admonitions (``!!!``, ``???``) and content tabs (``===``) are parsed, not skipped.
2. A ``--8<-- "path"`` or ``--8<-- "path:section"`` line inside a fence is replaced by the file's
   code, as the site's snippets extension does, so included code is tested too.
3. Fences that share a build session (``exec="on" session="NAME"``) share one namespace, in page
   order, exactly as at build time. A fence that is shown but not executed at build
   (no ``exec="on"``) and names a session is checked against a copy of that session's state,
   so it sees the page's imports but cannot change what later fences see.

Each fence stays its own test. Runs are linear: a session's namespace is cached and advanced
fence by fence; a fence run on its own replays its session's earlier fences first.
"""

from __future__ import annotations

import contextlib
import io
import pathlib
import re
from dataclasses import dataclass
from functools import lru_cache

import pytest
from markdown_it import MarkdownIt
from mdit_py_plugins.admon import admon_plugin
from pytest_markdown_docs._runners import DefaultRunner, register_runner
from pytest_markdown_docs.plugin import parse_superfences_block_info

ROOT = pathlib.Path(__file__).resolve().parents[1]
PYTHON_LANGS = {"py", "python", "python3"}

_TAB = re.compile(r"^(?P<indent>[ \t]*)===(?P<plus>\+?)(?=[ \t])", re.MULTILINE)
_SNIPPET = re.compile(r"""^[ \t]*--8<--[ \t]+["'](?P<target>[^"']+)["'][ \t]*$""", re.MULTILINE)
_OPTION = re.compile(r"""(?P<key>[\w-]+)=(?P<quote>["']?)(?P<value>.*?)(?P=quote)(?=\s|$)""")


def _tabs_as_admonitions(state) -> None:
    """Read content tabs as admonitions: same nesting rules, same line count, so fences inside are found."""
    state.src = _TAB.sub(lambda m: m["indent"] + ("???+" if m["plus"] else "!!!"), state.src)


def read_snippet(target: str) -> str:
    """Return what ``--8<-- "target"`` inserts: a whole file, or the lines of one named section."""
    path, _, section = target.partition(":")
    file = ROOT / path
    if not file.is_file():
        raise FileNotFoundError(f"snippet {target!r}: no file {file}")
    lines = file.read_text(encoding="utf8").splitlines(keepends=True)
    if not section:
        return "".join(line for line in lines if "--8<-- [" not in line)
    start, end = f"--8<-- [start:{section}]", f"--8<-- [end:{section}]"
    inside, kept = False, []
    for line in lines:
        if start in line:
            inside = True
        elif end in line:
            break
        elif inside and "--8<-- [" not in line:
            kept.append(line)
    if not kept:
        raise ValueError(f"snippet {target!r}: no section {section!r} in {path}")
    return "".join(kept)


def _inline_snippets(state) -> None:
    for token in state.tokens:
        if token.type == "fence" and "--8<--" in token.content:
            token.content = _SNIPPET.sub(lambda m: read_snippet(m["target"]).rstrip("\n"), token.content)


def make_parser() -> MarkdownIt:
    parser = MarkdownIt("commonmark").use(admon_plugin)
    parser.core.ruler.after("normalize", "content_tabs", _tabs_as_admonitions)
    parser.core.ruler.push("inline_snippets", _inline_snippets)
    return parser


@pytest.hookimpl(tryfirst=True)
def pytest_markdown_docs_markdown_it() -> MarkdownIt:
    return make_parser()


@dataclass(frozen=True)
class Fence:
    start_line: int  # as the collector numbers it: the fence's opening line, 1-based
    lang: str
    options: frozenset[str]
    attrs: dict
    code: str

    @property
    def session(self) -> str | None:
        return self.attrs.get("session")

    @property
    def executed_at_build(self) -> bool:
        return self.attrs.get("exec", "").lower() in {"on", "1", "true", "yes"}


def parse_fences(text: str) -> list[Fence]:
    """Every Python fence of a Markdown text, in order, as the collector and the build see it."""
    fences = []
    for token in make_parser().parse(text):
        if token.type != "fence" or not token.map:
            continue
        info = parse_superfences_block_info(token.info)
        if not info or info[0] not in PYTHON_LANGS:
            continue
        attrs = {m["key"]: m["value"] for m in _OPTION.finditer(" ".join(info[1:]))}
        options = frozenset(part for part in info[1:] if "=" not in part)
        fences.append(Fence(token.map[0] + 1, info[0], options, attrs, token.content))
    return fences


@lru_cache(maxsize=None)
def _fences_of(path: pathlib.Path) -> tuple[Fence, ...]:
    return tuple(parse_fences(path.read_text(encoding="utf8")))


@register_runner(default=True)
class SessionRunner(DefaultRunner):
    """Run a fence in the namespace its build session has reached at that point of the page."""

    _state: dict[tuple[pathlib.Path, str], tuple[int, dict]] = {}

    def runtest(self, test, args, *, asyncio_runner=None):
        path = pathlib.Path(test.source_path)
        if path.suffix != ".md":
            return super().runtest(test, args, asyncio_runner=asyncio_runner)
        fences = _fences_of(path)
        index = next(i for i, f in enumerate(fences) if f.start_line == test.start_line)
        fence = fences[index]
        if fence.session is None:
            return self._exec(fence, path, args)
        namespace = self._session_before(path, fences, index, args)
        if fence.executed_at_build:
            self._exec(fence, path, namespace)
            self._state[(path, fence.session)] = (index, namespace)
        else:
            self._exec(fence, path, dict(namespace))

    def _session_before(self, path, fences, index, args) -> dict:
        """The namespace of the session after its executed fences that come before ``index``."""
        session = fences[index].session
        earlier = [i for i in range(index) if fences[i].session == session and fences[i].executed_at_build]
        reached, namespace = self._state.get((path, session), (None, None))
        if earlier and reached == earlier[-1]:
            return namespace
        namespace = args
        for i in earlier:  # replay: this fence runs without the ones before it
            self._exec(fences[i], path, namespace)
        self._state[(path, session)] = (earlier[-1] if earlier else None, namespace)
        return namespace

    @staticmethod
    def _exec(fence: Fence, path: pathlib.Path, namespace: dict) -> None:
        # Pad with newlines so tracebacks point at the Markdown line.
        code = compile("\n" * fence.start_line + fence.code, str(path), "exec", dont_inherit=True)
        with contextlib.redirect_stdout(io.StringIO()):  # what a fence prints belongs to the page
            exec(code, namespace)


@pytest.hookimpl(tryfirst=True)  # before the worker's own hook reads the groups
def pytest_collection_modifyitems(items) -> None:
    """Keep the fences of one page in one worker under ``--dist loadgroup`` (pytest-xdist), so a
    session's namespace is advanced fence by fence instead of replayed in several processes."""
    for item in items:
        if item.path.suffix == ".md":
            item.add_marker(pytest.mark.xdist_group(item.path.as_posix()))


@pytest.hookimpl(wrapper=True)
def pytest_collect_file(file_path, parent):
    """The fences that run are the pages' (and the README's). ``--markdown-docs`` would also import
    every Python file under tests/ in each worker and walk its docstrings for fences, and there
    are none there to find (tests/test_fences_collected.py holds that): those files are left to
    pytest's own collector."""
    from pytest_markdown_docs.plugin import MarkdownDocstringCodeModule

    collected = yield
    if file_path.suffix != ".py":
        return collected
    return [node for node in collected if not isinstance(node, MarkdownDocstringCodeModule)]
