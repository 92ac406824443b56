"""Build hook: remember two pure steps of the build, in the process and on disk.

Every build repeats two steps for every page whose HTML did not change: the theme's search plugin
parses each page's HTML into sections, and the highlighter colours each code listing (the API
reference shows whole files). Both are pure functions of their inputs, so this hook keeps their
results, keyed by those inputs in full: the page's HTML, and the listing's source with every
option of the highlighter and of the call, with the installed packages' versions. An edited page
or listing has a new key and is processed afresh.

The results are kept in the process (``mkdocs serve`` rebuilds in the same one) and, when the
executed-output cache is on (hooks/exec_cache.py: serve, a contributor's build, the tests' build),
in ``.cache/remembered/``, so that the next build's process finds them too. What is checked or
published (``LLM_ATTENTION_CACHE=0``) neither reads nor writes them there.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import inspect
import os
import pathlib
import pickle
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
STORE = ROOT / ".cache" / "remembered"
SWITCH = "LLM_ATTENTION_CACHE"  # hooks/exec_cache.py's switch

_parsed: dict[str, list] = {}
_highlighted: dict[str, str] = {}


def on_startup(command: str, dirty: bool) -> None:
    _remember_search_sections()
    _remember_highlighting()


@functools.cache
def _packages() -> str:
    import importlib.metadata

    names = sorted(f"{d.metadata['Name']}=={d.version}" for d in importlib.metadata.distributions())
    return "\n".join(names)


def _key(kind: str, material: str) -> str:
    """The digest of a step's whole input, with the Python (whose HTMLParser the search's parse
    runs on) and every installed package's version."""
    return hashlib.sha256(f"{kind}\0{sys.version}\0{_packages()}\0{material}".encode()).hexdigest()


def _on_disk() -> bool:
    return os.environ.get(SWITCH) == "1"


def _remembered(memory: dict, key: str, make):
    """The value kept for ``key``: in memory, else on disk (when on), else made and kept."""
    if key in memory:
        return memory[key]
    path = STORE / key[:2] / f"{key}.pickle"
    if _on_disk() and path.is_file():
        try:
            memory[key] = pickle.loads(path.read_bytes())
            return memory[key]
        except Exception:  # a file this Python cannot read back: made again, and replaced
            pass
    memory[key] = value = make()
    if _on_disk():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.part")
        partial.write_bytes(pickle.dumps(value))
        partial.replace(path)
    return value


def _remember_search_sections() -> None:
    from material.plugins.search import plugin as search

    if getattr(search.SearchIndex.add_entry_from_context, "remembered", False):
        return

    def parse(html: str) -> list:
        parser = search.Parser()
        parser.feed(html)
        parser.close()
        return parser.data

    def add_entry_from_context(self, page):  # the theme's method, with its parse remembered
        if (page.meta.get("search") or {}).get("exclude"):
            return
        sections = _remembered(_parsed, _key("search", page.content), lambda: parse(page.content))
        for section in sections:
            if not section.is_excluded():  # a copy: the theme may set a section's title
                self.create_entry_for_section(copy.copy(section), page.toc, page.url, page)

    add_entry_from_context.remembered = True
    search.SearchIndex.add_entry_from_context = add_entry_from_context


def _remember_highlighting() -> None:
    from pymdownx import highlight

    original = highlight.Highlight.highlight
    if getattr(original, "remembered", False):
        return
    signature = inspect.signature(original)

    def remembered(self, src, language, *args, **kwargs):
        # Only a block listing is remembered: its result is a string, made without side effects.
        # Inline code returns an element that the caller then changes, and an HTML title is
        # stored in the page's stash as the listing is made: both are made afresh every time.
        inline = signature.bind(self, src, language, *args, **kwargs).arguments.get("inline", False)
        if inline or self.title_mode == "html":
            return original(self, src, language, *args, **kwargs)
        settings = tuple((k, repr(v)) for k, v in sorted(vars(self).items()) if k != "md")
        material = repr((settings, src, language, args, sorted(kwargs.items())))

        def listing() -> str:
            made = original(self, src, language, *args, **kwargs)
            if not isinstance(made, str):
                raise TypeError(f"the highlighter returned {type(made).__name__} for a block listing")
            return made

        return _remembered(_highlighted, _key("highlight", material), listing)

    remembered.remembered = True
    highlight.Highlight.highlight = remembered
