"""Visit every page of the built site in headless Chromium, once each.

Each page must load within its byte budget, with no console error and no request leaving
localhost; math must be typeset, diagrams shown and figures present; the figures' own checks
(tests/figure_checks.py), the rules every figure keeps on a phone (tests/figure_rules.py) and
the accessibility checks (tests/axe_checks.py: WCAG 2.2 A/AA in both palettes, content tabs and
downloads worked with the keyboard) run in the same visit. Set SCREENSHOT_DIR to keep a
screenshot of each page. The site is built once per run (the ``built_site`` fixture of
tests/conftest.py); skips, saying why, where Chromium or the browser driver is missing.
"""

from __future__ import annotations


import os
import pathlib
import re
import uuid
from urllib.parse import urlparse

import pytest

from tests import axe_checks, figure_checks, figure_rules, page_records

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def expected_pages() -> list[str]:
    """The address of every page, from the sources: Markdown pages and notebook scripts."""
    pages = []
    for source in sorted(DOCS.rglob("*.md")) + sorted((DOCS / "notebooks").glob("*.py")):
        rel = source.relative_to(DOCS).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "index" else rel.parts
        pages.append("/".join(parts) + "/" if parts else "")
    return pages


PAGES = expected_pages()


def page_paths(site_dir: pathlib.Path) -> list[str]:
    pages = []
    for html in sorted(site_dir.rglob("index.html")):
        rel = html.parent.relative_to(site_dir).as_posix()
        if rel.startswith("assets"):
            continue
        pages.append("" if rel == "." else rel + "/")
    return pages


# What a first visit may transfer in all (uncompressed, as the test server sends it: the page's
# HTML, theme, styles, fonts, the figures in the first screen; the search index only loads when
# the reader searches). Notebook pages carry their own stylesheet and their outputs' images
# inline, and get a larger budget.
PAGE_BUDGET = 1_000_000
# The largest, trainable_self_attention: its 764 KB page (JupyterLab's styles inline, outputs'
# images), the theme, and the explorers' script and styles.
NOTEBOOK_BUDGET = 1_500_000


def visit(browser, url: str):
    """Open a page in a new browser context (nothing cached); return (page, console errors,
    requests that left localhost, URLs fetched so far). Requests are watched, not intercepted:
    intercepting each one costs a round trip through the test process. Every request of the
    context names the visit (tests/page_records.py); ``fetched_by`` lists them afterwards."""
    tag = uuid.uuid4().hex
    page = browser.new_page(viewport={"width": 1280, "height": 900},
                            extra_http_headers={page_records.VISIT_HEADER: tag})
    downloads: list[str] = []  # started by the browser without the visit's header
    page.on("download", lambda download: downloads.append(urlparse(download.url).path))
    _VISITS[page] = (tag, downloads)
    errors, outside, fetched = [], [], []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("requestfinished", lambda request: fetched.append(request.url))

    def watch(request):
        if not request.url.startswith("data:") and urlparse(request.url).hostname not in ("127.0.0.1", "localhost"):
            outside.append(request.url)

    page.on("request", watch)
    arrive(page, url)
    return page, errors, outside, fetched


_VISITS: dict = {}  # page -> (the visit's name, paths it downloaded)


def fetched_by(page, built_site) -> set[str]:
    """Every path the visit asked the server for, the checks' own requests and downloads too."""
    tag, downloads = _VISITS.pop(page)
    return page_records.requested(built_site.visits, tag) | set(downloads)


def without_the_index(path: str, fetched: set[str]) -> set[str]:
    """What a page's record holds: everything its visit fetched, but the search index on any page
    other than the home page. Tabbing past the search box loads the index on every page, and any
    prose edit changes it; the home page's visit searches it and records it, so an index that
    breaks the search fails there, and a prose edit visits the edited page and the home page
    again, not every page."""
    return fetched if path == "" else {p for p in fetched if not p.endswith(SEARCH_INDEX)}


# What the page has transferred so far, from the browser's own record (Resource Timing): URL ->
# (body bytes, what asked for it: "navigation" for the page itself, "img", "script", "fetch"...).
# It counts what the workers the page starts fetched too.
_TRANSFERRED = """() => Object.fromEntries(
    [...performance.getEntriesByType('navigation'), ...performance.getEntriesByType('resource')]
        .map(e => [e.name, [e.encodedBodySize, e.initiatorType]]))"""


def transferred(page) -> dict:
    return {url: tuple(entry) for url, entry in page.evaluate(_TRANSFERRED).items()}


# A first visit is over once the page has loaded and the images in the first screen are in.
# The search index is no part of it: it loads when the reader first uses search
# (overrides/main.html), and check_first_visit holds that.
_FIRST_SCREEN_IMAGES_IN = """() => [...document.images]
    .filter(i => i.getClientRects().length && i.getBoundingClientRect().top < innerHeight)
    .every(i => i.complete)"""
SEARCH_INDEX = "/search/search_index.json"


def arrive(page, url: str) -> None:
    page.goto(url, wait_until="load")
    page.wait_for_function(_FIRST_SCREEN_IMAGES_IN)


def diagram_heights(page) -> list[float]:
    """Scroll to each diagram (drawn at build, its image loaded lazily) and return the height of the
    image shown, once it has loaded; 0 for one that did not load."""
    heights = []
    for diagram in page.locator(".diagram").all():
        if not diagram.is_visible():
            continue  # the other orientation's variant, hidden at this width
        diagram.scroll_into_view_if_needed()
        image = diagram.locator("img.figure:visible")
        page.wait_for_function("img => img.complete", arg=image.element_handle(), timeout=10000)
        heights.append(image.evaluate("img => img.naturalWidth ? img.getBoundingClientRect().height : 0"))
    return heights


_PAGE_FACTS = r"""() => ({
    rawTex: (() => {
        const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT), found = [];
        while (walker.nextNode()) {
            const node = walker.currentNode;
            if (node.parentElement.closest('pre, code, script, style, .katex')) continue;
            if (/\\\(|\\\[|\$\\[a-zA-Z]|\$\$/.test(node.textContent)) found.push(node.textContent.trim().slice(0, 60));
        }
        return found;
    })(),
    math: document.querySelectorAll('.arithmatex').length,
    typeset: document.querySelectorAll('.arithmatex .katex').length,
    katex: document.querySelectorAll('.katex').length,
    katexErrors: document.querySelectorAll('.katex-error').length,
    diagrams: [...document.querySelectorAll('.diagram')].filter(d => d.offsetParent !== null).length,
    brokenImages: [...document.images].filter(i => i.complete && i.naturalWidth === 0).map(i => i.alt || i.src.slice(0, 60)),
})"""


def check_first_visit(path: str, first_visit: dict, fetched: list, errors: list, outside: list) -> None:
    """Within the byte budget, no diagram library, no console error, nothing fetched from outside.
    Every request the browser finished is in the record the budget is counted from."""
    uncounted = sorted({url for url in fetched if not url.startswith("data:")} - set(first_visit))
    assert not uncounted, f"fetched but not counted: {uncounted}"
    index = [url for url in {*fetched, *first_visit} if url.endswith(SEARCH_INDEX)]
    assert not index, f"the search index loaded before anyone searched: {index}"
    budget = NOTEBOOK_BUDGET if path.startswith("notebooks/") and path != "notebooks/" else PAGE_BUDGET
    sizes = {url: size for url, (size, _) in first_visit.items()}
    total = sum(sizes.values())
    biggest = sorted(sizes.items(), key=lambda item: -item[1])[:5]
    assert total <= budget, f"a first visit transfers {total:,} bytes, over {budget:,}; the largest: {biggest}"
    scripts = [url for url, (_, kind) in first_visit.items() if kind == "script" or url.endswith(".js")]
    assert not any("mermaid" in url for url in scripts), f"a diagram library was loaded: {scripts}"
    assert not errors, f"console errors {errors}"
    assert not outside, f"requests left localhost {outside}"


def check_static_count(built_site, path: str, first_visit: dict) -> None:
    """Every file the browser transferred is counted from the files, at its size; what is
    counted and not yet transferred is only what the theme fetches after the page has loaded
    (the search worker, the icon, the sitemap), so the count never falls short of a visit.
    KaTeX's rarer fonts (a few KB each) are the exception, left out of the count."""
    counted = static_first_visit(built_site.site_dir, path)
    site = built_site.site_dir.resolve()
    loaded = {}
    for url, (size, _) in first_visit.items():
        if url.startswith("data:"):
            continue
        file = site / urlparse(url).path.lstrip("/")
        loaded[str((file / "index.html" if file.is_dir() else file).resolve())] = size
    missing = sorted(f for f in loaded if f not in counted and "/katex/fonts/" not in f)
    assert not missing, f"transferred but not counted: {missing}"
    sizes = {f: (counted[f], loaded[f]) for f in loaded if f in counted and counted[f] != loaded[f]}
    assert not sizes, f"counted at another size than transferred: {sizes}"
    late = sorted(f for f in counted if f not in loaded)
    assert all("/workers/search." in f or f.endswith(("favicon.png", "sitemap.xml")) for f in late), (
        f"counted but never transferred: {late}")


def check_math_diagrams_and_images(page) -> None:
    """Every formula typeset (no raw TeX left), every diagram shown, no broken image."""
    heights = diagram_heights(page)
    facts = page.evaluate(_PAGE_FACTS)
    assert not facts["rawTex"], f"raw TeX on the page: {facts['rawTex']}"
    assert facts["typeset"] == facts["math"] and not facts["katexErrors"], f"math not typeset {facts}"
    assert len(heights) == facts["diagrams"] and all(h > 40 for h in heights), (
        f"diagrams not drawn: {facts['diagrams']} on the page, heights shown {heights}")
    assert not facts["brokenImages"], f"images that did not load {facts['brokenImages']}"


def check_home(page) -> None:
    """The chapter map is drawn large, code has a copy button, the search index loads when the
    search box is used and search finds a chapter's word, and the palette switch flips light
    and dark."""
    heights = diagram_heights(page)
    assert heights and min(heights) > 300, f"the chapter map was not drawn at a readable size: {heights}"
    assert page.locator("button.md-code__button[title='Copy to clipboard']").count() >= 1, "no copy button"
    with page.expect_event("requestfinished", lambda r: r.url.endswith(SEARCH_INDEX)):
        page.locator(".md-search__input").first.click()  # the index loads now, not before
    page.keyboard.type("journey")
    page.wait_for_selector(".md-search-result__item", timeout=15000)
    assert page.locator(".md-search-result__item").count() >= 1, "search found nothing"
    page.keyboard.press("Escape")
    before = page.evaluate("document.body.getAttribute('data-md-color-scheme')")
    page.locator("form[data-md-component=palette] label:visible").first.click()
    after = page.evaluate("document.body.getAttribute('data-md-color-scheme')")
    assert {before, after} == {"default", "slate"}, (before, after)


def check_notebook_downloads(page) -> None:
    """The notebook page shows its formula and heatmap and links its .ipynb and script."""
    assert page.locator(".katex").count() >= 1, "the notebook's formula was not typeset"
    assert page.locator(".jupyter-wrapper img.figure").count() >= 1, "no heatmap image"
    links = page.locator("a.md-button[download]")
    assert links.count() == 2, links.count()
    notebook = page.request.get(links.nth(0).evaluate("a => a.href"))
    assert notebook.ok and notebook.json()["cells"], "the .ipynb download is not a notebook"
    script = page.request.get(links.nth(1).evaluate("a => a.href"))
    assert script.ok and "# %%" in script.text(), "the script download is not the notebook's source"


def shoot(page, path: str) -> None:
    """Keep a full-page screenshot in $SCREENSHOT_DIR, when set."""
    shots = os.environ.get("SCREENSHOT_DIR")
    if shots:
        pathlib.Path(shots).mkdir(parents=True, exist_ok=True)
        name = (path.strip("/").replace("/", "_") or "home") + ".png"
        page.evaluate("scrollTo(0, 0)")  # the theme's fixed header is drawn where the view is
        page.screenshot(path=str(pathlib.Path(shots) / name), full_page=True)


def test_the_site_has_exactly_the_expected_pages(built_site):
    assert "" in PAGES and "notebooks/toy_heatmap/" in PAGES, PAGES
    assert REFERENCE_SAMPLES | NOTEBOOK_SAMPLES <= set(PAGES), (
        (REFERENCE_SAMPLES | NOTEBOOK_SAMPLES) - set(PAGES))
    assert sorted(page_paths(built_site.site_dir)) == sorted(PAGES)


# The API pages are one template (mkdocstrings, the copy set, the whole file): the keyboard and
# WCAG checks run on the table of modules, the largest copyable module's page, the one whose
# docstring holds a table, and a page of the site's own code. Every page gets the other checks.
REFERENCE_SAMPLES = {"reference/api/", "reference/modern/", "reference/hf_config/",
                     "reference/families/"}
# The notebook pages are one template too (mkdocs-jupyter: code cells, text and image outputs):
# the same two checks run on the list of notebooks, the smallest and the one with the most kinds
# of output (training logs, heatmaps, line plots).
NOTEBOOK_SAMPLES = {"notebooks/", "notebooks/toy_heatmap/", "notebooks/attention_at_work/"}


def sampled(path: str) -> bool:
    """Whether the keyboard and WCAG checks run on this page: every page that is not one of
    the many generated from a template, and the samples of those."""
    if path.startswith("reference/"):
        return path in REFERENCE_SAMPLES
    if path.startswith("notebooks/"):
        return path in NOTEBOOK_SAMPLES
    return True


# The other API pages hold text and code only (no figure, no diagram, no script of their own):
# what a first visit loads follows from their HTML, and is counted from the files; the samples,
# visited in the browser, check that this count holds every file a browser transfers.
STATIC_PAGES = [p for p in PAGES if p.startswith("reference/") and not sampled(p)]
# The pages with the most checks go first (explorers, then every page the keyboard and WCAG
# checks run on, then the other notebook pages): the workers then end together, on short pages.
BROWSER_PAGES = sorted((p for p in PAGES if p not in STATIC_PAGES), key=lambda p: (
    p not in figure_checks.EXPLORER_PAGES, not sampled(p), p))
_LINKED = re.compile(r'<link\b[^>]*\brel="(?:stylesheet|icon)"[^>]*\bhref="([^"]+)"|<script\b[^>]*\bsrc="([^"]+)"')


def static_first_visit(site_dir: pathlib.Path, path: str) -> dict[str, int]:
    """Bytes of what a first visit to a page without figures loads, by file: the page, the
    stylesheets, icon and scripts it links, what the theme's script fetches on every page (the
    search worker and the sitemap; the index waits for a search) and, where the page has
    math, KaTeX's two fonts that every formula uses (a large operator may add a few KB)."""
    page = site_dir / path / "index.html"
    html = page.read_text(encoding="utf8")
    files = {page, site_dir / "sitemap.xml",
             *(site_dir / "assets" / "javascripts" / "workers").glob("search.*.min.js")}
    for link, script in _LINKED.findall(html):
        files.add(page.parent / (link or script))
    if 'class="katex' in html:
        fonts = site_dir / "assets" / "vendor" / "katex" / "fonts"
        files |= {fonts / "KaTeX_Main-Regular.woff2", fonts / "KaTeX_Math-Italic.woff2"}
    files = {file.resolve() for file in files}
    return {str(file): file.stat().st_size for file in files}


_RAW_TEX = re.compile(r"\\\(|\\\[|\$\\[a-zA-Z]|\$\$")
_SKIPPED = re.compile(r"<(pre|code|script|style)\b.*?</\1>|<span class=\"katex\b.*?</math>", re.DOTALL)


# Each planted style, alone on a page that passes: what the contrast check must say of it.
_PLANTED_CONTRAST = [
    (".md-typeset p { color: #b0b0b0 !important }", "light", "p "),
    (".md-typeset .highlight .c1 { color: #c8c8c8 !important }", "light", "span.c1"),
    (".md-typeset .katex { color: #bbbbbb !important }", "light", "span.mord"),
    ("[data-md-color-scheme=slate] .md-typeset figure.explorer td { color: #444 !important }",
     "dark", "span"),
    (".md-typeset h1 { background-image: url(data:image/gif;base64,R0lGODlhAQABAAAAACw=) }",
     "light", "background image"),
    (".md-typeset p { color: #b0b0b0 !important; opacity: 0 }", None, None),  # not seen
    (".md-typeset figure.explorer { opacity: 0.35 }", "light", "td"),  # a faded group
]


# What the styles are planted in: the page keeps the first block of each kind and every
# explorer (the header and the navigation too), so that each of the sixteen weighings walks
# a short page.
_FIRST_OF = ["h1", "p", ".highlight:has(.c1)", ".arithmatex:has(.katex)"]
_EVERY = "figure.explorer"
_ONE_OF_EACH = """([first, every]) => {
    const article = document.querySelector('.md-content__inner');
    const found = [...first.map(kind => article.querySelector(kind)), ...article.querySelectorAll(every)];
    const blocks = found.filter(Boolean).map(block => {
        while (block.parentElement !== article) block = block.parentElement;
        return block;
    });
    for (const child of [...article.children]) if (!blocks.includes(child)) child.remove();
    return {kinds: first.filter(kind => article.querySelector(kind)), every: article.querySelectorAll(every).length};
}"""


def _contrast_both_ways(page) -> dict[str, list[str]]:
    """The contrast check's findings in the palette shown, then in the other (left shown)."""
    first = axe_checks.PALETTES[axe_checks._scheme(page)]
    found = {first: axe_checks._text_contrast(page, first)}
    axe_checks.switch_palette_with_keyboard(page)
    second = axe_checks.PALETTES[axe_checks._scheme(page)]
    found[second] = axe_checks._text_contrast(page, second)
    return found


def test_the_contrast_check_finds_planted_low_contrast(built_site, browser):
    """axe-core's contrast rule is off (tests/axe_checks.py weighs each style once instead):
    text too faint for WCAG's 4.5:1, in listings, formulas, explorers and prose, in either
    palette, over an image or in a faded group, is named; text no one can see is not. One
    visit, to the page cut to one block of each kind: each style is planted alone, then
    taken out again."""
    record = page_records.record_of(built_site, "the contrast check's plants")
    if record.holds():
        pytest.skip(record.reason)
    page, *_ = visit(browser, built_site.url + "chapters/causal-attention/")
    kept = page.evaluate(_ONE_OF_EACH, [_FIRST_OF, _EVERY])
    assert kept["kinds"] == _FIRST_OF and kept["every"], f"the page lost what is planted in: {kept}"
    page.add_style_tag(content=axe_checks._NO_FADES)
    assert _contrast_both_ways(page) == {"light": [], "dark": []}  # the page as built passes
    missed = []
    for style, palette, named in _PLANTED_CONTRAST:
        planted = page.add_style_tag(content=style)
        found = _contrast_both_ways(page)
        planted.evaluate("tag => tag.remove()")
        expected = [] if palette is None else found[palette]
        if palette is None and found != {"light": [], "dark": []}:
            missed.append(f"{style}: named text no one sees: {found}")
        elif palette is not None and not any(named in p for p in expected):
            missed.append(f"{style}: not found in the {palette} palette: {found}")
    page.close()
    assert not missed, "\n".join(missed)
    record.save(without_the_index("chapters/causal-attention/", fetched_by(page, built_site)))


@pytest.mark.parametrize("path", BROWSER_PAGES, ids=lambda p: p or "home")
def test_page_in_the_browser(built_site, browser, path):
    """One visit per page runs every check that applies to it, in an order where the checks
    that change the page (scrolling, hovering, clicking, narrowing the window) come last, and
    reports every check that failed. Skipped where it passed before on the same files and
    checking code (tests/page_records.py)."""
    record = page_records.record_of(built_site, f"page {path or '/'}")
    if record.holds():
        pytest.skip(record.reason)
    page, errors, outside, fetched = visit(browser, built_site.url + path)
    fetched = list(fetched)  # what had finished before the record below is read
    first_visit = transferred(page)  # before any scrolling
    errors_on_arrival = list(errors)
    checks = [
        ("first visit", lambda: check_first_visit(path, first_visit, fetched, errors_on_arrival, outside)),
        ("math, diagrams, images", lambda: check_math_diagrams_and_images(page)),
    ]
    if path == "chapters/causal-attention/":
        checks.append(("lazy figures", lambda: figure_checks.check_lazy_figures(page, first_visit)))
    if path in figure_checks.FIGURE_PAGES:
        checks.append(("weights figures", lambda: figure_checks.check_weights_figures(page, path)))
    if path in figure_checks.EXPLORER_PAGES:
        checks.append(("explorable figure", lambda: figure_checks.check_explorer(page)))
    if path == "notebooks/toy_heatmap/":
        checks.append(("notebook downloads", lambda: check_notebook_downloads(page)))
    if path == "":
        checks.append(("home page", lambda: check_home(page)))
        checks.append(("site map", lambda: figure_checks.check_site_map(page)))
    if path in REFERENCE_SAMPLES:  # the other API pages are counted from their files
        checks.append(("count from the files", lambda: check_static_count(built_site, path, first_visit)))
    if sampled(path):
        checks.append(("keyboard", lambda: axe_checks.check_keyboard(page)))
        checks.append(("WCAG 2.2 AA (axe-core), both palettes", lambda: axe_checks.check_wcag(page)))
    checks.append(("figures, tables, headings, listings", lambda: figure_rules.check_figure_rules(page)))
    if sampled(path):  # at the phone's width the rules end at
        checks.append(("Tab order on a phone", lambda: axe_checks.check_phone_tab_order(page)))
    if path in figure_checks.EXPLORER_PAGES:  # at the phone's width the rules end at
        checks.append(("explorable figure at 390 px", lambda: figure_checks.check_explorer_phone_layout(page)))
    if path in figure_checks.CHAPTERS:
        checks.append(("phone width", lambda: figure_checks.check_phone_width(page)))
    failures = []
    for name, check in checks:
        try:
            check()
        except AssertionError as failure:
            failures.append(f"{name}: {failure}")
        if name == "math, diagrams, images":
            shoot(page, path)  # the page as a reader first sees it, before any check changes it
    if len(errors) > len(errors_on_arrival):  # searching, hovering, clicking must not log errors either
        failures.append(f"console errors during the checks: {errors[len(errors_on_arrival):]}")
    page.close()
    assert not failures, "\n".join(failures)
    record.save(without_the_index(path, fetched_by(page, built_site)))


@pytest.mark.parametrize("path", STATIC_PAGES)
def test_api_page_weight_and_math(built_site, path):
    """Within the byte budget, every formula typeset at build, no raw TeX in the prose."""
    sizes = static_first_visit(built_site.site_dir, path)
    total = sum(sizes.values())
    biggest = sorted(sizes.items(), key=lambda item: -item[1])[:3]
    assert total <= PAGE_BUDGET, f"a first visit loads {total:,} bytes, over {PAGE_BUDGET:,}: {biggest}"
    html = (built_site.site_dir / path / "index.html").read_text(encoding="utf8")
    # Formulas are elements; a listing may hold the same words as text (stepper.py writes them).
    math = len(re.findall(r'<(?:span|div) class="arithmatex">', html))
    typeset = len(re.findall(r'<(?:span|div) class="arithmatex"><span class="katex', html))
    assert math == typeset and "katex-error" not in html, f"{math - typeset} formulas not typeset"
    prose = re.sub(r"<[^>]+>", " ", _SKIPPED.sub(" ", html))
    assert not _RAW_TEX.search(prose), f"raw TeX: {_RAW_TEX.search(prose).group(0)!r}"


def test_the_header_links_the_repository_only_when_told(built_site):
    """The Pages workflow sets REPO_URL; a local build (this one) links no repository."""
    home = (built_site.site_dir / "index.html").read_text(encoding="utf8")
    assert os.environ.get("REPO_URL") or 'class="md-source"' not in home
    workflow = (ROOT / ".github" / "workflows" / "pages.yml").read_text(encoding="utf8")
    assert "REPO_URL: ${{ github.server_url }}/${{ github.repository }}" in workflow


def test_api_reference_shows_and_links_every_whole_module(built_site):
    """Each copyable module: its zip linked from the table and from its page, which names its set
    and shows the file whole; the site's own modules: shown, offered to nobody."""
    import re

    from llm_attention_site.copy_sets import copy_set, copyable_modules

    reference = built_site.site_dir / "reference"
    api = (reference / "api" / "index.html").read_text(encoding="utf8")
    for name in copyable_modules():
        stem = name.removesuffix(".py")
        zip_link = f'href="../../code/llm_attention/{stem}.zip"'
        assert zip_link in api, f"no download of {stem}.zip in the table"
        own = (reference / stem / "index.html").read_text(encoding="utf8")
        assert zip_link in own and f'download="{stem}.zip"' in own, f"no download of {stem}.zip on its page"
        if len(copy_set(name)) == 1:  # a file that needs no other may be taken alone
            assert f'href="../../code/llm_attention/{name}"' in own, f"no link to {name} alone on its page"
        for needed in copy_set(name)[1:]:
            assert f"<code>{needed}</code>" in own.split("The whole file")[0], f"{stem} does not name {needed}"
        assert f"The whole file: <code>src/llm_attention/{name}</code>" in own, f"{name} not shown whole"
        assert "::copy-set::" not in own, f"{stem}: the copy-set line was not expanded"
    for module in sorted((ROOT / "src" / "llm_attention_site").glob("*.py")):
        if module.name == "__init__.py":
            continue
        own = (reference / module.stem / "index.html").read_text(encoding="utf8")
        assert f"The whole file: <code>src/llm_attention_site/{module.name}</code>" in own, module.name
        offered = re.search(r'<a [^>]*(\bdownload=|class="md-button)', own)
        assert offered is None, f"{module.name} is offered to copy: {offered and offered.group(0)}"


def test_search_index_holds_no_tex_diagram_source_or_pilcrow(built_site):
    """Nor an explorer's digits and labels (its figure is marked data-search-exclude), nor a
    formula cut into fragments."""
    import json
    import re

    docs = json.loads((built_site.site_dir / "search" / "search_index.json").read_text(encoding="utf8"))["docs"]
    diagrams = {
        line.strip()
        for page in (ROOT / "docs").rglob("*.md")
        for block in re.findall(r"```mermaid\n(.*?)```", page.read_text(encoding="utf8"), re.DOTALL)
        for line in block.splitlines()[:2]
        if line.strip()
    }
    assert diagrams, "no mermaid diagram found in the pages: update this test"
    problems = []
    for doc in docs:
        prose = re.sub(r"<(pre|code)\b.*?</\1>", "", doc["text"], flags=re.DOTALL)
        for bad in ("¶", "\\(", "\\[", "$", "key \u2192"):  # "key →": an explorer's corner
            if bad in prose or bad in doc["title"]:
                problems.append(f"{doc['location']}: {bad!r}")
        # A formula reads as text in a result's preview (hooks/search_clean.readable_math):
        # no TeX command, no subscript or superscript cut from its base ("s_ ij", "_ k=1 T").
        for fragment in re.findall(r"\\[a-zA-Z]+|\S*[_^] \S*| [_^]\S*", prose):
            problems.append(f"{doc['location']}: formula fragment {fragment!r}")
        problems += [f"{doc['location']}: diagram source {d!r}" for d in diagrams if d in doc["text"]]
    assert not problems, problems
    titles = {doc["location"]: doc["title"] for doc in docs}
    for notebook in (ROOT / "docs" / "notebooks").glob("*.py"):  # each repeats its chapter
        page = f"notebooks/{notebook.stem}/"
        assert not [loc for loc in titles if loc.startswith(page)], f"{page} is in the index"
    assert "notebooks/" in titles  # the list of notebooks stays findable
    for module in (ROOT / "src" / "llm_attention_site").glob("[!_]*.py"):  # contributors' pages
        assert not [loc for loc in titles if loc.startswith(f"reference/{module.stem}/")], module.name
    assert "reference/latent/" in titles  # the modules offered to copy stay findable
