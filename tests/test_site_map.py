"""The home page's map is read from the navigation: every page of prose is on it, and a page
added to the navigation appears with no edit to the home page."""

from __future__ import annotations

import pathlib

import pytest

from llm_attention_site import site_map
from llm_attention_site.diagrams import parse

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def prose_pages() -> set[str]:
    """Every page under docs/ but the home page, the notebooks and the API reference."""
    return {
        path.relative_to(DOCS).as_posix()
        for path in DOCS.rglob("*.md")
        if path.name != "index.md" and not path.relative_to(DOCS).as_posix().startswith(site_map.LEFT_OUT)
    }


def test_every_page_of_prose_is_on_the_map_in_the_order_of_the_nav():
    found = site_map.sections()
    paths = [path for _, pages in found for _, path in pages]
    assert set(paths) == prose_pages() and len(paths) == len(set(paths))
    assert found[0][0] == "Chapters" and found[0][1][0] == ("1. Why attention", "chapters/why-attention.md")
    chart = parse(site_map.map_source(found))  # the subset diagrams.py draws
    labels = " ".join(chart.nodes.values())
    assert all(title in labels for _, pages in found for title, _ in pages)
    assert len(chart.edges) == len(found) - 1
    table = site_map.map_table(found, {})
    assert all(f"]({path.removesuffix('.md')}/)" in table for path in paths)
    assert "use_directory_urls" not in (ROOT / "mkdocs.yml").read_text()  # a folder a page


def test_a_page_added_to_the_nav_appears_without_a_note(tmp_path):
    """A new section in mkdocs.yml: its box on the chart and its row in the table, with the
    page's first sentence and the modules it includes; a note replaces both."""
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf8")
    added = config.replace("  - Notebooks:\n", "  - New ideas:\n      - A new page: modern/combined.md\n  - Notebooks:\n")
    assert added != config
    (tmp_path / "mkdocs.yml").write_text(added, encoding="utf8")
    found = site_map.sections(tmp_path / "mkdocs.yml")
    assert found[-1] == ("New ideas", [("A new page", "modern/combined.md")])
    assert "<b>New ideas</b><br/>A new page" in site_map.map_source(found)
    row = site_map.map_table(found, {}).splitlines()[-1]
    first = site_map.first_sentence("modern/combined.md")
    assert first.startswith("`ModernAttention` puts the three previous pages together")
    assert row == f"| [A new page](modern/combined/) | {first} | `modern.py` |"
    noted = site_map.map_table(found, {"modern/combined.md": ("all of it", ["modern.py"])})
    assert noted.splitlines()[-1] == "| [A new page](modern/combined/) | all of it | `modern.py` |"


def test_notes_for_pages_not_in_the_nav_are_refused():
    with pytest.raises(ValueError, match=r"notes name pages that are not in the nav: \['nowhere.md'\]"):
        site_map.map_table(site_map.sections(), {"nowhere.md": ("x", [])})


def test_a_nav_without_prose_is_refused(tmp_path):
    (tmp_path / "mkdocs.yml").write_text("nav:\n  - Home: index.md\n", encoding="utf8")
    with pytest.raises(ValueError, match="has no section of prose pages in its nav"):
        site_map.sections(tmp_path / "mkdocs.yml")
