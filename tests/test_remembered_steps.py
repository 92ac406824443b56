"""The build's remembered steps (hooks/remembered_steps.py) give what the steps themselves give,
find a result kept by another process on disk only when the cache is on, and key it by every
input."""

from __future__ import annotations

import importlib.util
import pathlib
import pickle

import markdown
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("remembered_steps_under_test", ROOT / "hooks" / "remembered_steps.py")
remembered_steps = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(remembered_steps)

LISTING = "```python\ndef f(x):\n    return x + 1  # one\n```\n"


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A fresh store on disk and in memory, with the cache on."""
    monkeypatch.setattr(remembered_steps, "STORE", tmp_path / "remembered")
    monkeypatch.setattr(remembered_steps, "_highlighted", {})
    monkeypatch.setattr(remembered_steps, "_parsed", {})
    monkeypatch.setenv(remembered_steps.SWITCH, "1")
    from material.plugins.search import plugin as search
    from pymdownx import highlight

    # Undone after the test: the other tests of this process meet the steps as installed.
    monkeypatch.setattr(highlight.Highlight, "highlight", highlight.Highlight.highlight)
    monkeypatch.setattr(search.SearchIndex, "add_entry_from_context", search.SearchIndex.add_entry_from_context)
    remembered_steps.on_startup(command="build", dirty=False)
    return tmp_path / "remembered"


def convert(text: str, **options) -> str:
    extensions = ["pymdownx.highlight", "pymdownx.superfences"]
    return markdown.Markdown(extensions=extensions, extension_configs={"pymdownx.highlight": options}).convert(text)


def test_a_listing_is_coloured_as_the_highlighter_colours_it_and_kept_on_disk(store):
    from pymdownx import highlight

    assert getattr(highlight.Highlight.highlight, "remembered", False)
    remembered = convert(LISTING)
    assert '<span class="k">def</span>' in remembered
    kept = list(store.rglob("*.pickle"))
    assert len(kept) == 1
    remembered_steps._highlighted.clear()  # a new process: memory empty, the disk kept
    kept[0].write_bytes(pickle.dumps("<p>from the disk</p>"))
    assert "from the disk" in convert(LISTING)


def test_each_option_and_each_character_of_the_listing_is_part_of_the_key(store):
    convert(LISTING)
    convert(LISTING.replace("one", "two"))
    convert(LISTING, linenums=True)
    convert(LISTING, anchor_linenums=True, linenums=True)
    assert len(list(store.rglob("*.pickle"))) == 4


def test_with_the_cache_off_nothing_is_read_from_or_written_to_disk(store, monkeypatch):
    convert(LISTING)
    (kept,) = store.rglob("*.pickle")
    kept.write_bytes(pickle.dumps("<p>from the disk</p>"))
    remembered_steps._highlighted.clear()
    monkeypatch.setenv(remembered_steps.SWITCH, "0")
    assert "from the disk" not in convert(LISTING) and "def" in convert(LISTING)
    convert(LISTING.replace("one", "three"))
    assert len(list(store.rglob("*.pickle"))) == 1


def test_a_page_s_search_sections_are_the_parser_s_own(store):
    from material.plugins.search import plugin as search

    html = '<h2 id="a">Title</h2><p>Some <code>code</code> and text.</p><h2 id="b">Next</h2><p>More.</p>'
    parser = search.Parser()
    parser.feed(html)
    parser.close()
    expected = [(s.id, s.title, s.text) for s in parser.data]
    key = remembered_steps._key("search", html)
    got = remembered_steps._remembered(remembered_steps._parsed, key, lambda: parser.data)
    remembered_steps._parsed.clear()
    again = remembered_steps._remembered(remembered_steps._parsed, key, lambda: pytest.fail("parsed again"))
    assert [(s.id, s.title, s.text) for s in got] == [(s.id, s.title, s.text) for s in again] == expected
