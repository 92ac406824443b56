"""Build hook: under ``mkdocs serve``, remember two pure steps of the build between rebuilds.

After a save, ``mkdocs serve`` rebuilds every page. Two steps redo the same work for every page
whose HTML did not change: the theme's search plugin parses each page's HTML into sections, and
the highlighter colours each code listing (the API reference shows whole files). Both are pure
functions of their inputs, so this hook keeps their results in the serving process, keyed by
those inputs in full: the page's HTML, and the listing's source with every option of the
highlighter and of the call. An edited page or listing has a new key and is processed afresh.
``mkdocs build`` (CI, the tests) runs without it.
"""

from __future__ import annotations

import copy
import hashlib

_parsed: dict[str, list] = {}
_highlighted: dict[tuple, str] = {}


def on_startup(command: str, dirty: bool) -> None:
    if command == "serve":
        _remember_search_sections()
        _remember_highlighting()


def _remember_search_sections() -> None:
    from material.plugins.search import plugin as search

    def add_entry_from_context(self, page):  # the theme's method, with its parse remembered
        if (page.meta.get("search") or {}).get("exclude"):
            return
        key = hashlib.sha256(page.content.encode()).hexdigest()
        if key not in _parsed:
            parser = search.Parser()
            parser.feed(page.content)
            parser.close()
            _parsed[key] = parser.data
        for section in _parsed[key]:
            if not section.is_excluded():  # a copy: the theme may set a section's title
                self.create_entry_for_section(copy.copy(section), page.toc, page.url, page)

    search.SearchIndex.add_entry_from_context = add_entry_from_context


def _remember_highlighting() -> None:
    from pymdownx import highlight

    original = highlight.Highlight.highlight
    if getattr(original, "remembered", False):
        return

    def remembered(self, src, language, *args, **kwargs):
        settings = tuple((k, repr(v)) for k, v in sorted(vars(self).items()) if k != "md")
        key = (settings, src, language, repr(args), repr(sorted(kwargs.items())))
        if key not in _highlighted:
            _highlighted[key] = original(self, src, language, *args, **kwargs)
        return _highlighted[key]

    remembered.remembered = True
    highlight.Highlight.highlight = remembered
