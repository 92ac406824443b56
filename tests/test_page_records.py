"""A browser check is skipped only where it passed before on the same bytes and the same
checking code (tests/page_records.py), and the record holds every file the visit fetched."""

from __future__ import annotations

import pathlib

import pytest

from tests import page_records
from tests.conftest import CHROMIUM

URL = "http://127.0.0.1:41234/"


@pytest.fixture
def site(tmp_path, monkeypatch):
    monkeypatch.delenv(page_records.RECHECK, raising=False)
    monkeypatch.delenv("SCREENSHOT_DIR", raising=False)
    monkeypatch.setattr(page_records, "checking_code_digest", lambda browser: "code-1")
    root = tmp_path / "site"
    (root / "page").mkdir(parents=True)
    (root / "page" / "index.html").write_text(f'<link rel="canonical" href="{URL}page/">')
    (root / "style.css").write_text("p { color: black }")
    return root


def record(site: pathlib.Path, url: str = URL) -> page_records.Record:
    return page_records.Record("page page/", url, site, "chromium", records=site.parent / "records")


def test_a_passed_check_holds_until_a_file_it_fetched_changes(site):
    assert not record(site).holds()  # never passed
    record(site).save({"/page/", "/style.css", "/page/?q=1"})
    assert record(site).holds()
    (site / "unrelated.txt").write_text("not fetched by the check")
    assert record(site).holds()
    (site / "style.css").write_text("p { color: #777 }")
    assert not record(site).holds()


def test_the_run_s_own_address_is_not_a_change_but_any_other_byte_is(site):
    record(site).save({"/page/"})
    (site / "page" / "index.html").write_text('<link rel="canonical" href="http://127.0.0.1:50000/page/">')
    assert record(site, "http://127.0.0.1:50000/").holds()
    (site / "page" / "index.html").write_text('<link rel="canonical" href="http://127.0.0.1:50000/page/"> ')
    assert not record(site, "http://127.0.0.1:50000/").holds()


def test_a_missing_file_is_recorded_and_its_arrival_is_a_change(site):
    record(site).save({"/page/", "/missing.js"})
    assert record(site).holds()
    (site / "missing.js").write_text("console.log(1)")
    assert not record(site).holds()


def test_other_checking_code_the_switch_and_screenshots_check_again(site, monkeypatch):
    record(site).save({"/page/"})
    assert record(site).holds()
    monkeypatch.setattr(page_records, "checking_code_digest", lambda browser: "code-2")
    assert not record(site).holds()
    monkeypatch.setattr(page_records, "checking_code_digest", lambda browser: "code-1")
    monkeypatch.setenv(page_records.RECHECK, "1")
    assert not record(site).holds()
    monkeypatch.delenv(page_records.RECHECK)
    monkeypatch.setenv("SCREENSHOT_DIR", str(site.parent / "shots"))
    assert not record(site).holds()


def test_nothing_fetched_vouches_for_nothing(site):
    record(site).save(set())
    assert not record(site).path.exists() and not record(site).holds()
    record(site).save({"/../outside.txt"})  # outside the site: the server answers 404
    assert not record(site).path.exists() and not record(site).holds()


def test_the_checking_code_digest_changes_with_each_file_of_the_checks_and_the_package(tmp_path, monkeypatch):
    monkeypatch.setattr(page_records, "browser_version", lambda browser: "Chromium 1.0")
    root = tmp_path / "repo"
    for name in page_records.CHECKING_CODE:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(f"# {name}\n")
    for folder in page_records.CHECKING_FOLDERS:
        (root / folder / "deep").mkdir(parents=True)
        (root / folder / "deep" / "module.py").write_text("x = 1\n")
    digest = page_records.checking_code_digest.__wrapped__
    first = digest("chromium", root)
    assert digest("chromium", root) == first
    (root / "README.md").write_text("not checking code")
    assert digest("chromium", root) == first
    changed = set()
    for path in [root / name for name in page_records.CHECKING_CODE] + [
            root / folder / "deep" / "module.py" for folder in page_records.CHECKING_FOLDERS]:
        before = path.read_text()
        path.write_text(before + " ")
        changed.add(digest("chromium", root) != first)
        path.write_text(before)
    assert changed == {True}
    fake = tmp_path / "on-sys-path" / "planted-1.0.dist-info"  # a test's own folder on sys.path
    fake.mkdir(parents=True)
    (fake / "METADATA").write_text("Metadata-Version: 2.1\nName: planted\nVersion: 1.0\n")
    monkeypatch.syspath_prepend(str(fake.parent))
    assert digest("chromium", root) == first  # the same in every worker, whatever ran before
    monkeypatch.setattr(page_records, "browser_version", lambda browser: "Chromium 2.0")
    assert digest("chromium", root) != first
    assert {"tests/test_site_browser.py", "tests/axe_checks.py", "tests/figure_checks.py",
            "tests/figure_rules.py", "pyproject.toml"} <= set(page_records.CHECKING_CODE)
    assert all((page_records.ROOT / name).is_file() for name in page_records.CHECKING_CODE)
    if CHROMIUM:  # the browser's own name and version
        assert "Chrom" in page_records.browser_version(CHROMIUM)


def test_only_the_home_page_s_record_holds_the_search_index():
    from tests.test_site_browser import SEARCH_INDEX, without_the_index

    fetched = {"/", "/assets/stylesheets/main.css", SEARCH_INDEX}
    assert without_the_index("", fetched) == fetched
    assert without_the_index("modern/rotary/", fetched) == fetched - {SEARCH_INDEX}
    assert without_the_index("modern/rotary/", {"/modern/rotary/"}) == {"/modern/rotary/"}


def test_a_visit_s_record_holds_its_page_styles_workers_requests_and_downloads(built_site, browser):
    """What the server logs for one visit: the page, its stylesheets and scripts, a figure
    loaded on scrolling, the search worker's index, the checks' own requests, a download."""
    from tests import axe_checks
    from tests.test_site_browser import fetched_by, visit

    page, *_ = visit(browser, built_site.url + "notebooks/toy_heatmap/")
    page.locator(".md-search__input").first.click()  # the worker fetches the index now
    page.wait_for_function("() => performance.getEntriesByType('resource').some("
                           "e => e.name.endsWith('/search/search_index.json'))")
    page.request.get(built_site.url + "sitemap.xml")
    axe_checks.check_keyboard(page)  # Enter on the first download button
    page.close()
    fetched = fetched_by(page, built_site)
    assert "/notebooks/toy_heatmap/" in fetched
    assert any(p.startswith("/assets/stylesheets/main.") for p in fetched), fetched
    assert any(p.startswith("/assets/javascripts/bundle.") for p in fetched), fetched
    assert any(p.startswith("/assets/figures/") for p in fetched), fetched
    assert {"/search/search_index.json", "/sitemap.xml", "/notebooks/toy_heatmap/toy_heatmap.ipynb"} <= fetched
