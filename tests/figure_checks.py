"""Checks of the figures of a built page, run inside its one browser visit (tests/test_site_browser.py).

Every explorable figure shows, for each query, the weights its page prints, and each switch
changes them; every figure of attention weights is drawn on the 0..1 colour scale and its
full-size link opens its SVG; a chapter does not scroll sideways on a phone; a chapter's figures
load lazily, in one palette. Each check raises AssertionError saying what is wrong.
"""

from __future__ import annotations

CHAPTERS = [
    "chapters/why-attention/",
    "chapters/simple-self-attention/",
    "chapters/trainable-self-attention/",
    "chapters/causal-attention/",
    "chapters/multi-head-attention/",
    "chapters/summary/",
]
FIGURE_PAGES = [*CHAPTERS, "beyond/pitfalls/"]
EXPLORER_PAGES = [*CHAPTERS[1:5], "at-work/watching-attention-learn/"]
NO_WEIGHTS_HEATMAP = ("chapters/why-attention/", "chapters/summary/")

_READ = """figure => {
  const values = [...figure.querySelectorAll('.explorer-value')].map(e => e.textContent);
  const cells = [...figure.querySelectorAll('tbody td')].map(e => e.textContent);
  return {title: figure.querySelector('.explorer-readout p').textContent, values, cells};
}"""

_PRINTED = """figure => {
  const after = [...document.querySelectorAll('pre')].find(
    pre => figure.compareDocumentPosition(pre) & Node.DOCUMENT_POSITION_FOLLOWING);
  return after.textContent;
}"""


def check_explorer(page) -> None:
    """Hovering each query shows the row the page prints below the figure; the keyboard moves
    between queries; every switch changes the table."""
    figures = page.locator(".attention-explorer")
    assert figures.count() >= 1, "no explorable figure"
    figure = figures.first
    figure.scroll_into_view_if_needed()
    printed = figure.evaluate(_PRINTED).strip().splitlines()
    tokens = printed[0].split()
    rows = [line.split()[1:] for line in printed[1:]]
    assert len(rows) == len(tokens), printed
    queries = figure.locator(".explorer-query")
    assert queries.count() == len(tokens), (queries.count(), tokens)
    for i, token in enumerate(tokens):
        queries.nth(i).hover(force=True)  # a real pointer move; the figure does not move
        shown = figure.evaluate(_READ)
        assert f"\u201c{token}\u201d" in shown["title"], (token, shown["title"])
        assert shown["values"] == rows[i], (token, shown["values"], rows[i])
    page.mouse.move(0, 0)  # off the figure: a hover must not stand in for the keyboard
    queries.nth(0).focus()
    page.keyboard.press("ArrowDown")
    page.wait_for_function(  # a busy machine may take a moment
        "([f, t]) => f.querySelector('.explorer-readout p').textContent.includes(t)",
        arg=[figure.element_handle(), f"\u201c{tokens[1]}\u201d"],
        timeout=15000,
    )
    default_cells = figure.evaluate(_READ)["cells"]
    assert default_cells == [v for row in rows for v in row], "the table is not the printed weights"
    switches = figure.locator(".explorer-switches button")
    for k in range(1, switches.count()):
        switches.nth(k).click()
        assert switches.nth(k).get_attribute("aria-pressed") == "true", f"switch {k} not pressed"
        assert figure.evaluate(_READ)["cells"] != default_cells, f"switch {k} changed nothing"


def check_weights_figures(page, path: str) -> None:
    """Heatmaps of weights use the 0..1 scale; every full-size link serves an SVG."""
    figures = page.evaluate("""() => [
      ...[...document.querySelectorAll('img.figure')].map(e => ({
          text: e.alt, scale: e.dataset.scale || null,
          href: e.closest('a') ? e.closest('a').href : null})),
      ...[...document.querySelectorAll('.attention-explorer')].map(e => ({
          text: e.textContent, scale: e.dataset.scale || null, href: null}))]""")
    for figure in figures:
        text = figure["text"].lower()
        # Every heatmap records its colour scale (line plots have none). Weights after
        # dropout are scaled by 1 / (1 - p) and may exceed 1, so they are not on 0..1.
        if figure["scale"] is not None and "weight" in text and "dropout" not in text:
            assert figure["scale"] == "0..1", figure["text"]
        if figure["href"] is not None:
            response = page.request.get(figure["href"])
            assert response.ok and response.headers["content-type"] == "image/svg+xml", figure["href"]
            assert response.body().lstrip().startswith((b"<?xml", b"<svg")), figure["href"]
    assert any(f["scale"] == "0..1" for f in figures) or path in NO_WEIGHTS_HEATMAP, "no 0..1 heatmap"


def check_lazy_figures(page, sizes_by_type: dict) -> None:
    """The page's HTML and the figures of its first screen stay within 500 kB: the figures load
    lazily, in the light palette only, and none is inlined."""
    documents_and_images = {url: size for url, (size, kind) in sizes_by_type.items() if kind in ("navigation", "img")}
    assert 0 < sum(documents_and_images.values()) <= 500_000, documents_and_images
    assert not page.evaluate("document.documentElement.outerHTML.includes('data:image/svg')"), "an inline SVG"
    loaded = [url for url in documents_and_images if "/assets/figures/" in url]
    assert len(loaded) < page.locator("img.figure").count(), "every figure loaded at once"


def check_phone_width(page) -> None:
    """At a phone's width (390 px) the page does not scroll sideways."""
    page.set_viewport_size({"width": 390, "height": 900})
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"{width} px wide at 390"
