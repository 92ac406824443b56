"""Records of browser checks that passed, so that a warm run does not check the same bytes again.

A browser check of a built page (tests/test_site_browser.py) is a function of two things: the
bytes the browser and the check fetched from the site, and the code that checks them (the test
files, the package they import, the vendored axe-core, the browser itself). When a check passes,
``Record.save`` keeps a digest of each file it fetched and of that code. The next run, if every
one of those files and the code digest to the same, ``Record.holds`` says so and the test skips,
naming the record; a file added, removed or changed, or any change to the checking code, and the
check runs again. A failure is never recorded.

What was fetched is known from the server's side: each visit's browser context sends a header
naming the visit (``VISIT_HEADER``), and the test server logs the path of every request that
carries one (tests/conftest.py), from the page, its scripts and workers, and the checks' own
requests; downloads, which the browser starts without the header, are added from the page's
download events. A request never made cannot have changed a result, and a file that was asked
for and missing is recorded as missing.

A downloaded notebook's run (tests/test_notebook_download.py) is recorded the same way: what it
fetches is its ``.ipynb`` and, through the site's fetch_packages.py, files under ``code/`` (a
test holds the notebooks to that), so its record holds those files.

The site is built for the address it is served at, a new port each run: that address is replaced
by a placeholder before a file is digested. ``LLM_ATTENTION_RECHECK=1`` runs every check, as
``.ci/run`` does (CI also starts from a clean clone, with no record), and so does
``SCREENSHOT_DIR``.

A record vouches for a check that gives the same verdict on the same bytes. The checks are written
so (no timing, no unseeded randomness); one that was not could keep a lucky pass until its files
change, which CI, checking every page, would still catch.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import os
import pathlib
import site
import subprocess
import sys
from urllib.parse import unquote, urlparse

ROOT = pathlib.Path(__file__).resolve().parents[1]
RECORDS = ROOT / ".cache" / "browser-checks"
VISIT_HEADER = "x-llm-attention-visit"
RECHECK = "LLM_ATTENTION_RECHECK"
# What checks a page: these files, every module of the package they import, the vendored
# axe-core, pytest's settings, and (below) the browser's version, the Python's and that of every
# installed package (torch computes what the live explorer is compared with).
CHECKING_CODE = ("tests/test_site_browser.py", "tests/axe_checks.py", "tests/figure_checks.py",
                 "tests/figure_rules.py", "tests/conftest.py", "tests/page_records.py",
                 "tests/test_notebook_download.py", "tests/notebook_checks.py", "tests/clean_python.py",
                 "tests/preloaded_python.py", "conftest.py", "pyproject.toml", "mkdocs.yml")
CHECKING_FOLDERS = ("tests/vendor", "src")


def visits_folder(shared: pathlib.Path) -> pathlib.Path:
    """Where the test server logs the paths each visit asked for, a file per visit."""
    return shared / "visits"


def log_request(folder: pathlib.Path, visit: str, path: str) -> None:
    """Append one requested path to the visit's log (called by the server, before it answers)."""
    if not visit.isalnum():  # the header names a file: nothing but letters and digits
        return
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / visit, "a", encoding="utf8") as log:
        log.write(path + "\n")


def requested(folder: pathlib.Path, visit: str) -> set[str]:
    """The paths a visit asked the server for (a line still being written is left out)."""
    log = folder / visit
    if not log.exists():
        return set()
    text = log.read_text(encoding="utf8")
    return {line for line in text.split("\n")[:-1] if line}


@functools.cache
def browser_version(executable: str) -> str:
    done = subprocess.run([executable, "--version"], capture_output=True, text=True, timeout=60)
    return done.stdout.strip() or done.stderr.strip()


@functools.cache
def checking_code_digest(browser: str, root: pathlib.Path = ROOT) -> str:
    """One digest of the code that checks a page, of the browser that runs it, and of the Python
    and the packages installed."""
    digest = hashlib.sha256()
    files = [root / name for name in CHECKING_CODE]
    for folder in CHECKING_FOLDERS:
        files += [p for p in (root / folder).rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    for path in sorted(files):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    shown_by = browser_version(browser) if browser else "no browser"
    digest.update(shown_by.encode() + b"\0" + sys.version.encode() + b"\0")
    # Read from the environment's site-packages, not sys.path: tests add folders of their own to
    # sys.path, and the digest must not depend on which ran first in this process.
    installed = importlib.metadata.distributions(path=site.getsitepackages())
    for package in sorted({f"{d.metadata['Name']}=={d.version}" for d in installed}):
        digest.update(package.encode() + b"\0")
    return digest.hexdigest()


def site_file(site_dir: pathlib.Path, url_path: str) -> pathlib.Path:
    """The file the test server answers ``url_path`` with (a folder: its index.html)."""
    path = site_dir / unquote(urlparse(url_path).path).lstrip("/")
    return path / "index.html" if path.is_dir() else path


def file_digest(path: pathlib.Path, site_url: str) -> str:
    """The file's digest with the run's own address replaced; "missing" for no file."""
    if not path.is_file():
        return "missing"
    return hashlib.sha256(path.read_bytes().replace(site_url.encode(), b"{site_url}")).hexdigest()


class Record:
    """The record of one check (``name``) of the site in ``site_dir``, served at ``site_url``."""

    def __init__(self, name: str, site_url: str, site_dir: pathlib.Path, browser: str,
                 records: pathlib.Path = RECORDS):
        self.name, self.site_url, self.site_dir = name, site_url, pathlib.Path(site_dir)
        self.code = checking_code_digest(browser)
        self.path = records / (hashlib.sha256(name.encode()).hexdigest()[:24] + ".json")

    def holds(self) -> bool:
        """Whether the check passed before on exactly the bytes and code it would meet now."""
        if os.environ.get(RECHECK) == "1" or os.environ.get("SCREENSHOT_DIR") or not self.path.exists():
            return False
        saved = json.loads(self.path.read_text(encoding="utf8"))
        if saved.get("name") != self.name or saved.get("code") != self.code or not saved.get("files"):
            return False
        return all(file_digest(self.site_dir / rel, self.site_url) == digest
                   for rel, digest in saved["files"].items())

    def save(self, url_paths: set[str]) -> None:
        """Keep the digests of the files behind ``url_paths`` (what the passing check fetched)."""
        site = self.site_dir.resolve()
        files = {}
        for url_path in url_paths:
            path = site_file(self.site_dir, url_path).resolve()
            if site in path.parents:  # a path outside the site is answered 404 by the server
                files[path.relative_to(site).as_posix()] = file_digest(path, self.site_url)
        if not files:
            return  # nothing known to have been fetched: nothing to vouch for
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_suffix(f".{os.getpid()}.part")  # two runs may save at once
        partial.write_text(json.dumps({"name": self.name, "code": self.code, "files": files}, sort_keys=True),
                           encoding="utf8")
        partial.replace(self.path)

    @property
    def reason(self) -> str:
        return (f"{self.name}: passed before on the same files and checking code "
                f"({RECHECK}=1 checks again)")


def record_of(built_site, name: str) -> Record:
    """The record of the check ``name`` of the site the tests built (tests/conftest.py)."""
    from tests.conftest import CHROMIUM  # imported here: conftest imports this module

    return Record(name, built_site.url, built_site.site_dir, CHROMIUM or "")
