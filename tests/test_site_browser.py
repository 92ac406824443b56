"""Build the site, serve it on localhost and visit every page in headless Chromium.

Each page must load with no console error and no request leaving localhost; math must be
typeset, diagrams drawn and figures present. Set SCREENSHOT_DIR to keep a screenshot of each
page. Skips, saying why, where Chromium or the browser driver is missing.
"""

from __future__ import annotations

import functools
import http.server
import os
import pathlib
import shutil
import subprocess
import sys
import threading
from urllib.parse import urlparse

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
]

playwright_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (Debian package: chromium)")


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """Build the site strictly and serve it; yields (base URL, site directory)."""
    site_dir = tmp_path_factory.mktemp("site")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site_dir)],
        cwd=ROOT, capture_output=True, text=True, env=env,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    handler = functools.partial(QuietHandler, directory=str(site_dir))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/", site_dir
    server.shutdown()


def page_paths(site_dir: pathlib.Path) -> list[str]:
    pages = []
    for html in sorted(site_dir.rglob("index.html")):
        rel = html.parent.relative_to(site_dir).as_posix()
        if rel.startswith("assets"):
            continue
        pages.append("" if rel == "." else rel + "/")
    return pages


@pytest.fixture(scope="module")
def browser():
    with playwright_api.sync_playwright() as p:
        try:
            instance = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        except Exception as error:  # the driver could not start this browser
            pytest.skip(f"Chromium at {CHROMIUM} did not start under playwright: {error}")
        yield instance
        instance.close()


def visit(browser, url: str):
    """Open a page; return (page, console errors, requests that left localhost)."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors, outside = [], []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))

    def route(r):
        host = urlparse(r.request.url).hostname
        if r.request.url.startswith("data:") or host in ("127.0.0.1", "localhost"):
            return r.continue_()
        outside.append(r.request.url)
        return r.abort()

    page.route("**/*", route)
    page.goto(url, wait_until="networkidle")
    return page, errors, outside


def wait_for_diagrams(page) -> None:
    """The theme swaps each <pre class="mermaid"> for a <div> whose closed shadow root holds the SVG."""
    page.wait_for_function("() => document.querySelectorAll('pre.mermaid').length === 0", timeout=15000)


def test_every_page_loads_offline_with_math_diagrams_and_figures(site, browser):
    base, site_dir = site
    paths = page_paths(site_dir)
    assert "" in paths and "notebooks/toy_heatmap/" in paths, paths
    shots = os.environ.get("SCREENSHOT_DIR")
    problems = []
    for path in paths:
        page, errors, outside = visit(browser, base + path)
        wait_for_diagrams(page)
        checks = page.evaluate(
            """() => ({
                math: document.querySelectorAll('.arithmatex').length,
                typeset: document.querySelectorAll('.arithmatex .katex').length,
                katex: document.querySelectorAll('.katex').length,
                katexErrors: document.querySelectorAll('.katex-error').length,
                diagrams: document.querySelectorAll('.mermaid').length,
                drawn: [...document.querySelectorAll('div.mermaid')].filter(d => d.getBoundingClientRect().height > 20).length,
                brokenImages: [...document.images].filter(i => i.complete && i.naturalWidth === 0).map(i => i.alt || i.src.slice(0, 60)),
            })"""
        )
        if shots:
            pathlib.Path(shots).mkdir(parents=True, exist_ok=True)
            name = (path.strip("/").replace("/", "_") or "home") + ".png"
            page.screenshot(path=str(pathlib.Path(shots) / name), full_page=True)
        if errors:
            problems.append(f"{path}: console errors {errors}")
        if outside:
            problems.append(f"{path}: requests left localhost {outside}")
        if checks["typeset"] != checks["math"] or checks["katexErrors"]:
            problems.append(f"{path}: math not typeset {checks}")
        if checks["drawn"] != checks["diagrams"]:
            problems.append(f"{path}: diagrams not drawn {checks}")
        if checks["brokenImages"]:
            problems.append(f"{path}: images that did not load {checks['brokenImages']}")
        page.close()
    assert not problems, "\n".join(problems)


def test_home_page_draws_its_diagram(site, browser):
    base, _ = site
    page, _, _ = visit(browser, base)
    wait_for_diagrams(page)
    heights = page.evaluate("[...document.querySelectorAll('div.mermaid')].map(d => d.getBoundingClientRect().height)")
    assert heights and min(heights) > 100, f"the chapter map was not drawn at a readable size: {heights}"
    assert page.locator("button.md-code__button[title='Copy to clipboard']").count() >= 1, "code blocks have no copy button"
    page.close()


def test_notebook_page_has_typeset_math_heatmap_and_downloads(site, browser):
    base, _ = site
    page, _, _ = visit(browser, base + "notebooks/toy_heatmap/")
    assert page.locator(".katex").count() >= 1, "the notebook's formula was not typeset"
    assert page.locator(".jupyter-wrapper img[src^='data:image/png']").count() >= 1, "no heatmap image"
    links = page.locator("a.md-button[download]")
    assert links.count() == 2
    notebook = page.request.get(links.nth(0).evaluate("a => a.href"))
    assert notebook.ok and notebook.json()["cells"], "the .ipynb download is not a notebook"
    script = page.request.get(links.nth(1).evaluate("a => a.href"))
    assert script.ok and "# %%" in script.text(), "the script download is not the notebook's source"
    page.close()


def test_search_finds_a_word_from_the_chapters(site, browser):
    base, _ = site
    page, errors, _ = visit(browser, base)
    page.locator(".md-search__input").first.click()
    page.keyboard.type("journey")
    page.wait_for_selector(".md-search-result__item", timeout=15000)
    assert page.locator(".md-search-result__item").count() >= 1
    assert not errors, errors
    page.close()


def test_dark_palette_toggles(site, browser):
    base, _ = site
    page, _, _ = visit(browser, base)
    before = page.evaluate("document.body.getAttribute('data-md-color-scheme')")
    page.locator("form[data-md-component=palette] label:visible").first.click()
    after = page.evaluate("document.body.getAttribute('data-md-color-scheme')")
    assert {before, after} == {"default", "slate"}, (before, after)
    page.close()
