"""The figures of the built site, driven in a browser.

Every explorable figure shows, for each query, the weights its page prints, and each switch
changes them; every figure of attention weights is drawn on the 0..1 colour scale; chapters
do not scroll sideways on a phone; every full-size link opens its SVG; a chapter's first visit
stays within 1 MB.
"""

from __future__ import annotations

import pytest

from tests.test_site_browser import arrive

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


def _open(browser, url, width=1280):
    page = browser.new_page(viewport={"width": width, "height": 900})
    arrive(page, url)
    return page


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


@pytest.mark.parametrize("path", EXPLORER_PAGES)
def test_explorers_show_the_printed_weights_and_switch_states(built_site, browser, path):
    page = _open(browser, built_site.url + path)
    figures = page.locator(".attention-explorer")
    assert figures.count() >= 1
    figure = figures.first
    figure.scroll_into_view_if_needed()
    printed = figure.evaluate(_PRINTED).strip().splitlines()
    tokens = printed[0].split()
    rows = [line.split()[1:] for line in printed[1:]]
    assert len(rows) == len(tokens)
    queries = figure.locator(".explorer-query")
    assert queries.count() == len(tokens)
    for i, token in enumerate(tokens):
        queries.nth(i).hover()
        shown = figure.evaluate(_READ)
        assert f"\u201c{token}\u201d" in shown["title"]
        assert shown["values"] == rows[i], (path, token)
    page.mouse.move(0, 0)  # off the figure: a hover must not stand in for the keyboard
    queries.nth(0).focus()
    page.keyboard.press("ArrowDown")
    page.wait_for_function(  # a busy machine may take a moment
        "([f, t]) => f.querySelector('.explorer-readout p').textContent.includes(t)",
        arg=[figure.element_handle(), f"\u201c{tokens[1]}\u201d"],
        timeout=15000,
    )
    default_cells = figure.evaluate(_READ)["cells"]
    assert default_cells == [v for row in rows for v in row]
    switches = figure.locator(".explorer-switches button")
    for k in range(1, switches.count()):
        switches.nth(k).click()
        assert switches.nth(k).get_attribute("aria-pressed") == "true"
        assert figure.evaluate(_READ)["cells"] != default_cells, (path, k)
    page.close()


@pytest.mark.parametrize("path", FIGURE_PAGES)
def test_weights_figures_use_the_zero_to_one_scale_and_open_at_full_size(
    built_site, browser, path
):
    page = _open(browser, built_site.url + path)
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
            assert figure["scale"] == "0..1", (path, figure["text"])
        if figure["href"] is not None:
            response = page.request.get(figure["href"])
            assert response.ok and response.headers["content-type"] == "image/svg+xml"
            assert response.body().lstrip().startswith((b"<?xml", b"<svg"))
    assert any(f["scale"] == "0..1" for f in figures) or path in ("chapters/why-attention/",
                                                                 "chapters/summary/")
    page.close()


@pytest.mark.parametrize("path", CHAPTERS)
def test_chapters_do_not_scroll_sideways_on_a_phone(built_site, browser, path):
    page = _open(browser, built_site.url + path, width=390)
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, (path, width)
    page.close()


def test_a_chapter_page_and_its_figures_stay_small_on_first_visit(built_site, browser):
    """The page and the figures it loads (lazily, one palette) stay well within 1 MB.

    Scripts and stylesheets are left out: they are the theme's, cached after the first page.
    """
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    sizes = {}

    def record(request):
        if request.resource_type in ("document", "image"):
            sizes[request.url] = request.sizes()["responseBodySize"]

    page.on("requestfinished", record)
    page.goto(built_site.url + "chapters/causal-attention/")
    page.wait_for_load_state("networkidle")
    figures = [url for url in sizes if "/assets/figures/" in url]
    assert 0 < sum(sizes.values()) <= 500_000, sizes
    inline = page.evaluate("document.documentElement.outerHTML.includes('data:image/svg')")
    assert not inline
    total = page.locator("img.figure").count()
    assert len(figures) < total  # lazy, and only the light palette's variants
    context.close()
