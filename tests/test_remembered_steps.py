"""The build's remembered steps (hooks/remembered_steps.py) give what the steps themselves give,
find a result kept by another process on disk only when the cache is on, and key it by every
input."""

from __future__ import annotations

import importlib.util
import pathlib
import pickle
from types import SimpleNamespace

import markdown
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("remembered_steps_under_test", ROOT / "hooks" / "remembered_steps.py")
remembered_steps = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(remembered_steps)

LISTING = "```python\ndef f(x):\n    return x + 1  # one\n```\n"


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A fresh store (``folder`` on disk, and in memory), with the cache on; the steps as the
    theme and the highlighter define them (``original``)."""
    monkeypatch.setattr(remembered_steps, "STORE", tmp_path / "remembered")
    monkeypatch.setattr(remembered_steps, "_highlighted", {})
    monkeypatch.setattr(remembered_steps, "_parsed", {})
    monkeypatch.setenv(remembered_steps.SWITCH, "1")
    from material.plugins.search import plugin as search
    from pymdownx import highlight

    # Undone after the test: the other tests of this process meet the steps as installed.
    monkeypatch.setattr(highlight.Highlight, "highlight", highlight.Highlight.highlight)
    monkeypatch.setattr(search.SearchIndex, "add_entry_from_context", search.SearchIndex.add_entry_from_context)
    original = {"highlight": highlight.Highlight.highlight, "search": search.SearchIndex.add_entry_from_context}
    assert not any(getattr(step, "remembered", False) for step in original.values())
    remembered_steps.on_startup(command="build", dirty=False)
    return SimpleNamespace(folder=tmp_path / "remembered", original=original)


def convert(text: str, **options) -> str:
    extensions = ["pymdownx.highlight", "pymdownx.superfences", "pymdownx.inlinehilite"]
    return markdown.Markdown(extensions=extensions, extension_configs={"pymdownx.highlight": options}).convert(text)


def unremembered(store, convert_call):
    """What ``convert_call()`` gives with the highlighter as pymdownx defines it."""
    from pymdownx import highlight

    patched = highlight.Highlight.highlight
    highlight.Highlight.highlight = store.original["highlight"]
    try:
        return convert_call()
    finally:
        highlight.Highlight.highlight = patched


def test_a_listing_is_coloured_as_the_highlighter_colours_it_and_kept_on_disk(store):
    remembered = convert(LISTING)
    assert remembered == unremembered(store, lambda: convert(LISTING))
    assert '<span class="k">def</span>' in remembered
    kept = list(store.folder.rglob("*.pickle"))
    assert len(kept) == 1
    remembered_steps._highlighted.clear()  # a new process: memory empty, the disk kept
    kept[0].write_bytes(pickle.dumps("<p>from the disk</p>"))
    assert "from the disk" in convert(LISTING)
    kept[0].write_bytes(b"not a pickle")  # unreadable: made again, as the highlighter makes it
    remembered_steps._highlighted.clear()
    assert convert(LISTING) == remembered


def test_inline_code_is_made_afresh_each_time_as_the_highlighter_makes_it(store):
    """Inline code comes back as an element its caller changes: one remembered element, handed
    to a second caller, moved the text of the page around it."""
    page = "Use `#!python x = 1` here, and `#!python x = 1` there.\n\nThen **bold** `#!python x = 1`.\n"
    first, second = convert(page), convert(page)
    assert first == second == unremembered(store, lambda: convert(page))
    assert first.count('<code class="highlight">') == 3
    assert not list(store.folder.rglob("*.pickle"))


def test_each_option_and_each_character_of_the_listing_is_part_of_the_key(store):
    convert(LISTING)
    convert(LISTING.replace("one", "two"))
    convert(LISTING, linenums=True)
    convert(LISTING, anchor_linenums=True, linenums=True)
    assert len(list(store.folder.rglob("*.pickle"))) == 4
    assert convert(LISTING, linenums=True) == unremembered(store, lambda: convert(LISTING, linenums=True))


def test_with_the_cache_off_nothing_is_read_from_or_written_to_disk(store, monkeypatch):
    convert(LISTING)
    (kept,) = store.folder.rglob("*.pickle")
    kept.write_bytes(pickle.dumps("<p>from the disk</p>"))
    remembered_steps._highlighted.clear()
    monkeypatch.setenv(remembered_steps.SWITCH, "0")
    assert "from the disk" not in convert(LISTING) and "def" in convert(LISTING)
    convert(LISTING.replace("one", "three"))
    assert len(list(store.folder.rglob("*.pickle"))) == 1


def test_a_page_s_search_entries_are_the_theme_s_own_from_memory_and_from_disk(store):
    """The entries the theme's own method makes; a section without a title (a page that starts
    at an h2) takes the page's title in its copy, never in the section kept for the next build."""
    from types import SimpleNamespace

    from material.plugins.search import plugin as search

    html = ('<h2 id="a">Title</h2><p>Some <code>code</code> and text.</p>'
            '<p>Before any heading</p><h2 id="b">Next</h2><p>More.</p>')
    untitled = '<p>No heading at all, <em>some</em> text.</p><h3 id="c">Later</h3><p>x</p>'
    pages = [SimpleNamespace(meta={}, content=content, toc=[], url=f"p{n}/", title=f"Page {n}")
             for n, content in enumerate((html, untitled, untitled))]

    def entries(method) -> list:
        index = search.SearchIndex()
        for page in pages:
            method(index, page)
        return index.entries

    expected = entries(store.original["search"])
    assert expected and any(e["title"] == "Page 2" for e in expected)
    assert entries(search.SearchIndex.add_entry_from_context) == expected  # parsed, then from memory
    remembered_steps._parsed.clear()  # a new process: from the disk
    assert entries(search.SearchIndex.add_entry_from_context) == expected
    assert len(list(store.folder.rglob("*.pickle"))) == 2  # two distinct pages of HTML
