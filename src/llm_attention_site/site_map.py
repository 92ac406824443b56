# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""The home page's map of the site, read from the navigation in ``mkdocs.yml``, so that
a page added to the navigation appears on the map without an edit to the home page.

``sections()`` reads the navigation's sections of prose (every section but the notebooks
and the API reference, whose pages repeat the chapters and the modules).
``map_source(sections)`` writes them as a flowchart in the subset of mermaid that
``llm_attention_site.diagrams`` draws: one box per section, naming its pages, in reading
order. ``map_table(sections, notes)`` writes a Markdown table of every page: its link,
what it builds and its modules, from ``notes`` (keyed by the page's path) or, for a page
without a note, its first sentence and the modules whose code it shows (its ``--8<--``
includes of ``src/llm_attention/``). The home page draws the flowchart with
``diagrams.render``; this module needs only PyYAML, which MkDocs brings.
"""

from __future__ import annotations

import pathlib
import re

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
# Sections whose pages the map leaves out: the chapters again, as notebooks, and the
# modules' reference.
LEFT_OUT = ("notebooks/", "reference/")

_INCLUDE = re.compile(r"""--8<--\s+["']src/llm_attention/(\w+\.py)""")
_SENTENCE = re.compile(r"(.+?[.!?])(?:\s|$)")


class _AnyTag(yaml.SafeLoader):
    """mkdocs.yml's own tags (``!ENV``, ``!!python/name``) read as plain values."""


for _prefix in ("", "tag:yaml.org,2002:python/"):
    _AnyTag.add_multi_constructor(_prefix, lambda loader, suffix, node: None)


def sections(config: pathlib.Path = ROOT / "mkdocs.yml") -> list[tuple[str, list]]:
    """``[(section title, [(page title, path under docs/), ...]), ...]`` in the
    navigation's order, for every section of prose pages."""
    nav = yaml.load(config.read_text(encoding="utf8"), Loader=_AnyTag)["nav"]
    found = []
    for entry in nav:
        (title, value), = entry.items() if isinstance(entry, dict) else ((None, entry),)
        if not isinstance(value, list):  # a page of its own, such as Home
            continue
        pages = []
        for item in value:
            if isinstance(item, dict):
                (page_title, path), = item.items()
                if isinstance(path, str) and not path.startswith(LEFT_OUT):
                    pages.append((page_title, path))
        if pages:
            found.append((title, pages))
    if not found:
        raise ValueError(f"{config} has no section of prose pages in its nav")
    return found


def _label(text: str) -> str:
    return text.replace('"', "'")


def map_source(found: list[tuple[str, list]]) -> str:
    """A top-to-bottom flowchart: one box per section, its title in bold and its pages
    under it, each box pointing to the next section."""
    lines = ["flowchart TD"]
    for k, (title, pages) in enumerate(found):
        names = "<br/>".join(_label(page) for page, _ in pages)
        lines.append(f'    s{k}["<b>{_label(title)}</b><br/>{names}"]')
    lines += [f"    s{k} --> s{k + 1}" for k in range(len(found) - 1)]
    return "\n".join(lines)


def first_sentence(path: str) -> str:
    """The first sentence of the page's first paragraph (after its title), as plain
    text."""
    text = (DOCS / path).read_text(encoding="utf8")
    for block in re.split(r"\n\s*\n", text):
        block = block.strip()
        if block and not block.startswith(("#", "```", "!!!", "???", "|", "<", "-")):
            flat = re.sub(r"\[([^\]]+)\]\([^)]*\)", r"\1", " ".join(block.split()))
            match = _SENTENCE.match(flat)
            return match.group(1) if match else flat
    return ""


def page_modules(path: str) -> list[str]:
    """The package's modules whose code the page shows, in the order it first shows
    them."""
    text = (DOCS / path).read_text(encoding="utf8")
    return list(dict.fromkeys(_INCLUDE.findall(text)))


def page_url(path: str) -> str:
    """The address of a page from the site's root, as MkDocs publishes it (a folder per
    page): ``modern/rotary.md`` -> ``modern/rotary/``. The home page prints its table
    through markdown-exec, whose Markdown does not turn ``.md`` links into addresses."""
    stem = path.removesuffix(".md")
    return "" if stem == "index" else stem.removesuffix("/index") + "/"


def map_table(found: list[tuple[str, list]], notes: dict[str, tuple[str, list]]) -> str:
    """A Markdown table of every page of ``found``: its link (from the home page), what
    it builds and its modules. ``notes`` maps a page's path to ``(what it builds,
    [module, ...])``; a page without a note gets its first sentence and the modules it
    includes."""
    unknown = sorted(set(notes) - {path for _, pages in found for _, path in pages})
    if unknown:
        raise ValueError(f"notes name pages that are not in the nav: {unknown}")
    rows = ["| Page | What you build | Modules |", "|---|---|---|"]
    for _, pages in found:
        for title, path in pages:
            what, modules = notes.get(path) or (
                first_sentence(path),
                page_modules(path),
            )
            names = ", ".join(f"`{m}`" for m in modules)
            rows.append(f"| [{title}]({page_url(path)}) | {what} | {names} |")
    return "\n".join(rows)
