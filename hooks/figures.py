"""Build hook: publish each figure a page printed as an SVG file of its own.

``llm_attention_site.figures.to_html`` inlines each figure as a data URI, so its HTML works
anywhere. Inlined, a page of figures would weigh megabytes on first visit. This hook
moves every inlined SVG into ``assets/figures/<hash>.svg``, points the image and its
full-size link at that file, and marks the image ``loading="lazy"``: a reader downloads
a figure when it scrolls into view, and only the variant of the palette in use.
"""

from __future__ import annotations

import base64
import hashlib
import pathlib
import re

from mkdocs.utils import get_relative_url

FIGURES_URI = "assets/figures"
_DATA_URI = re.compile(r"data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)")
_FIGURE_IMG = re.compile(r'<img class="figure"(?![^>]*\bloading=)')

_published: dict[str, bytes] = {}


def on_pre_build(config):
    _published.clear()


def on_page_content(html, page, config, files):
    """Swap each inlined SVG of the page for a link to its published file."""

    def publish(match: re.Match) -> str:
        svg = base64.b64decode(match.group(1))
        name = hashlib.sha256(svg).hexdigest()[:16] + ".svg"
        _published[name] = svg
        return get_relative_url(f"{FIGURES_URI}/{name}", page.url)

    html = _DATA_URI.sub(publish, html)
    return _FIGURE_IMG.sub('<img class="figure" loading="lazy"', html)


def on_post_build(config):
    folder = pathlib.Path(config["site_dir"]) / FIGURES_URI
    folder.mkdir(parents=True, exist_ok=True)
    for name, svg in _published.items():
        (folder / name).write_bytes(svg)
