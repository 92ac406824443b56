"""The site as the Pages workflow builds it links only inside itself and its repository.

``.ci/run`` builds the site with ``SITE_URL`` and ``REPO_URL`` set as the Pages job sets them
(``https://example.github.io/llm-attention/``, ``https://github.com/example/llm-attention``),
then runs this file with ``LLM_ATTENTION_HOSTED_SITE`` naming the built folder. Every
download (notebooks, copy-set zips, single modules) must resolve to a file of that site, the
notebooks' fetch cells must name the site's address, the header must link the repository,
and no link may point at a developer's machine (127.0.0.1, localhost).
"""

from __future__ import annotations

import html.parser
import os
import pathlib
import re
from urllib.parse import urljoin, urlparse

import pytest

pytestmark = pytest.mark.hosted

SITE_DIR = os.environ.get("LLM_ATTENTION_HOSTED_SITE")
SITE_URL = os.environ.get("SITE_URL", "")
REPO_URL = os.environ.get("REPO_URL", "")
DOWNLOADS = (".zip", ".ipynb", ".py")
LOCAL_HOSTS = ("127.0.0.1", "localhost")
# The home page tells a contributor where `mkdocs serve` shows the site: prose, not a link
# into the published site.
DEV_SERVER = "http://127.0.0.1:8000"


class Links(html.parser.HTMLParser):
    """Every (tag, attributes) that carries an href or a src."""

    def __init__(self):
        super().__init__()
        self.found: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if "href" in attributes or "src" in attributes:
            self.found.append((tag, attributes))


@pytest.fixture(scope="module")
def site() -> pathlib.Path:
    if not SITE_DIR:
        pytest.skip("set LLM_ATTENTION_HOSTED_SITE to a site built with SITE_URL and REPO_URL")
    assert SITE_URL.startswith("https://") and SITE_URL.endswith("/"), SITE_URL
    assert REPO_URL.startswith("https://"), REPO_URL
    return pathlib.Path(SITE_DIR)


def pages(site: pathlib.Path) -> list[pathlib.Path]:
    return sorted(site.rglob("*.html"))


def page_url(site: pathlib.Path, path: pathlib.Path) -> str:
    relative = path.relative_to(site).as_posix()
    return SITE_URL + (relative[: -len("index.html")] if relative.endswith("index.html") else relative)


def links_of(path: pathlib.Path) -> list[tuple[str, dict]]:
    parser = Links()
    parser.feed(path.read_text(encoding="utf8"))
    return parser.found


def test_every_download_is_a_file_of_the_hosted_site(site):
    checked = 0
    for path in pages(site):
        base = page_url(site, path)
        for tag, attributes in links_of(path):
            target = attributes.get("href") or attributes.get("src") or ""
            url = urljoin(base, target)
            ours = url.startswith(SITE_URL)  # else a citation: the book's notebook, say
            if tag != "a" or not (
                "download" in attributes or (ours and urlparse(url).path.endswith(DOWNLOADS))
            ):
                continue
            assert ours, f"{path}: download {target!r} leaves the site"
            file = site / urlparse(url).path[len(urlparse(SITE_URL).path):]
            assert file.is_file(), f"{path}: download {target!r} -> {url}: no such file"
            checked += 1
    assert checked >= 50  # the copy sets, the modules and the notebooks


def test_no_link_points_at_a_developers_machine(site):
    for path in pages(site):
        for tag, attributes in links_of(path):
            target = attributes.get("href") or attributes.get("src") or ""
            if urlparse(target).hostname in LOCAL_HOSTS:
                assert tag == "a" and target == DEV_SERVER, f"{path}: {tag} -> {target}"


def test_the_canonical_address_and_the_repository_link(site):
    home = site / "index.html"
    links = links_of(home)
    canonical = [a["href"] for tag, a in links if tag == "link" and a.get("rel") == "canonical"]
    assert canonical == [SITE_URL]
    sources = {a["href"] for tag, a in links if tag == "a" and "md-source" in a.get("class", "")}
    assert sources == {REPO_URL}  # the header's link, and the menu's on a phone


def test_downloaded_notebooks_fetch_from_the_hosted_site(site):
    site_line = re.compile(r'SITE_URL = \\?"([^"\\]*)\\?"')
    notebooks = sorted(site.glob("notebooks/*/*.ipynb")) + sorted(site.glob("notebooks/*/*.py"))
    assert len(notebooks) >= 16  # each notebook as .ipynb and as .py
    shown = sorted(site.glob("notebooks/*/index.html"))  # the pages show the same cell
    for page in shown:
        text = page.read_text(encoding="utf8")
        assert SITE_URL in text and not any(host in text for host in LOCAL_HOSTS), page
    for notebook in notebooks:
        text = notebook.read_text(encoding="utf8")
        assert site_line.findall(text) == [SITE_URL], notebook
        assert not any(host in text for host in LOCAL_HOSTS), notebook
