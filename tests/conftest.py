"""Fixtures shared by the test files: one strict site build for the whole run, served on
localhost, and one headless Chromium per process.

``built_site`` builds the site once per run, even with several pytest-xdist workers: the first
process to ask takes a file lock in a folder every worker shares and starts the build; the others
wait for its ``status.json``. When the run includes tests/test_site_browser.py, the build starts in
the background as the run begins, so it overlaps the other tests instead of following them.
"""

from __future__ import annotations

import atexit
import functools
import http.server
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import NamedTuple

import pytest
from filelock import FileLock  # a dependency of torch

from tests import page_records

ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED_ENV = "LLM_ATTENTION_TEST_SHARED"  # the folder the workers share, set by the controller
URL_ENV = "LLM_ATTENTION_TEST_SITE_URL"  # where the controller serves that folder's site
BROWSER_TESTS = ROOT / "tests" / "test_site_browser.py"


def find_chromium() -> str | None:
    """``chromium-headless-shell`` (Debian's package), else ``chromium``; else the Chromium that
    ``python -m playwright install chromium`` keeps in playwright's own folder (GitHub's Ubuntu
    runners, whose ``chromium`` is a snap shim that does not run headless in CI); else None.

    The headless shell is the same Blink without the browser's own interface: the browser
    checks take about 15 % less CPU time with it than with ``chromium --headless``."""
    for name in ("chromium-headless-shell", "chromium"):
        found = shutil.which(name)
        if found:
            return found
    try:
        from playwright.sync_api import sync_playwright

        with sync_playwright() as playwright:
            path = playwright.chromium.executable_path
    except Exception:  # no playwright, or its driver cannot start here
        return None
    return path if os.path.exists(path) else None


CHROMIUM = find_chromium()
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
    # With ``chromium --headless`` (no headless shell here), Chromium 156 builds the address
    # bar's popup (a page of its own, in a renderer of its own) for every new page: about as
    # much work as the page under test. Nobody sees it here; the headless shell has no address
    # bar. (Chromium merges this list with the one the browser driver passes.)
    "--disable-features=WebUIOmniboxPopup,WebUIOmniboxAimPopup,WebUIOmniboxFullPopup",
]
BUILD_TIMEOUT_S = 900

_builds: list[subprocess.Popen] = []


class Site(NamedTuple):
    url: str  # ends with "/"
    site_dir: pathlib.Path
    visits: pathlib.Path  # where the server logs what each browser visit asked for (tests/page_records.py)


def start_build(shared: pathlib.Path) -> pathlib.Path:
    """Start the one build of this run unless a process already did; return its folder."""
    out = shared / "build"
    with FileLock(str(shared / "build.lock")):
        if not out.exists():
            out.mkdir(parents=True)
            env = dict(os.environ)
            if os.environ.get(URL_ENV):  # the site is built for the address it is served at
                env["SITE_URL"] = os.environ[URL_ENV]
            process = subprocess.Popen(
                [sys.executable, str(ROOT / "tests" / "build_site.py"), str(out)],
                cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            )
            (out / "pid").write_text(str(process.pid))
            _builds.append(process)
    return out


def wait_for_build(out: pathlib.Path) -> dict:
    status = out / "status.json"
    deadline = time.monotonic() + BUILD_TIMEOUT_S
    while not status.exists():
        for process in _builds:
            process.poll()  # reap our own child, so that a dead build is seen as dead
        pid_file = out / "pid"
        if pid_file.exists() and not _alive(int(pid_file.read_text())) and not status.exists():
            pytest.fail("the site build stopped without writing its status")
        if time.monotonic() > deadline:
            pytest.fail(f"the site build took longer than {BUILD_TIMEOUT_S} s")
        time.sleep(0.2)
    return json.loads(status.read_text())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _run_includes(config, target: pathlib.Path) -> bool:
    for arg in config.args:
        path = (config.invocation_params.dir / arg.split("::")[0]).resolve()
        if path == target or path in target.parents:
            return True
    return False


def _exit_at_once() -> None:
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(0)


def pytest_configure(config):
    if hasattr(config, "workerinput"):
        # A worker has sent every result, and "finished", before it exits; tearing down its
        # interpreter (torch, transformers, matplotlib, the compiled graphs' helpers) then took
        # 1 to 2 s at the end of every run, and the run waits for it. Registered before torch
        # is imported, this runs after the exit handlers of what the tests import.
        atexit.register(_exit_at_once)
    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    if workers > 1:
        # Several workers share the cores: one thread each for torch (measured here: 62 s
        # for the whole run against 81 s with torch's default threads).
        import torch

        torch.set_num_threads(1)
        os.environ["OMP_NUM_THREADS"] = "1"  # and for the scripts the tests start
        # The site build (started by the controller, before the workers) is what the browser
        # tests wait for: the workers give it the cores first.
        os.nice(5)
    if hasattr(config, "workerinput") or os.environ.get(SHARED_ENV):
        return  # an xdist worker, or a pytest run inside a test: the folder is set already
    shared = tempfile.mkdtemp(prefix="llm-attention-tests-")
    os.environ[SHARED_ENV] = shared  # workers start later and inherit it
    config._llm_attention_shared = shared
    # One server for the run, in this process, so the build can know its address in advance.
    handler = functools.partial(_QuietHandler, directory=str(pathlib.Path(shared) / "build" / "site"),
                                visits=page_records.visits_folder(pathlib.Path(shared)))
    server = _QuietServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    config._llm_attention_server = server
    os.environ[URL_ENV] = f"http://127.0.0.1:{server.server_address[1]}/"
    if CHROMIUM and _run_includes(config, BROWSER_TESTS) and not config.option.collectonly:
        start_build(pathlib.Path(shared))


@pytest.hookimpl(tryfirst=True)
def pytest_terminal_summary(terminalreporter, config):
    """When the site did not build, say why before the list of failures: the tests that
    needed it were skipped for that one cause."""
    shared = getattr(config, "_llm_attention_shared", None)
    status = pathlib.Path(shared or "/nonexistent") / "build" / "status.json"
    if not status.exists():
        return
    result = json.loads(status.read_text())
    if result["returncode"] != 0:
        terminalreporter.section("the site did not build", sep="=", red=True, bold=True)
        terminalreporter.line(result["cause"], red=True)
        terminalreporter.line("Every test that needs the built site was skipped for this one cause.")


def pytest_unconfigure(config):
    shared = getattr(config, "_llm_attention_shared", None)
    if shared is None:
        return
    for process in _builds:
        if process.poll() is None:  # the run ended early: stop the build we started, and the
            try:  # mkdocs it runs (its own process group)
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:  # it ended since poll() looked
                pass
            process.wait()
    config._llm_attention_server.shutdown()
    os.environ.pop(SHARED_ENV, None)
    os.environ.pop(URL_ENV, None)
    shutil.rmtree(shared, ignore_errors=True)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Serves the built site without logging to the terminal; logs the path of each request
    that names a browser visit (tests/page_records.py) before answering it."""

    def __init__(self, *args, visits: pathlib.Path, **kwargs):
        self.visits = visits
        super().__init__(*args, **kwargs)

    def send_head(self):
        visit = self.headers.get(page_records.VISIT_HEADER)
        if visit:
            page_records.log_request(self.visits, visit, self.path)
        return super().send_head()

    def log_message(self, *args):
        pass


class _QuietServer(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        # A page closed while its images were still arriving: the browser's doing, not the site's.
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)


def _shared(tmp_path_factory) -> pathlib.Path:
    return pathlib.Path(os.environ.get(SHARED_ENV) or tmp_path_factory.getbasetemp())


@pytest.fixture(scope="session")
def site_build(tmp_path_factory) -> dict:
    """The status of the run's one strict build (``tests/build_site.py``): its return
    code, seconds, the tail of its log and, when it failed, the cause by page and line."""
    return wait_for_build(start_build(_shared(tmp_path_factory)))


@pytest.fixture(scope="session")
def built_site(site_build, tmp_path_factory) -> Site:
    """The site built once with ``mkdocs build --strict`` and served on localhost, with
    ``SITE_URL`` set to the address it is served at. When the build failed, every test
    that needs it is skipped with the one cause (tests/test_site_build.py fails on it)."""
    if site_build["returncode"] != 0:
        pytest.skip(f"the site did not build: {site_build['cause']}")
    shared = _shared(tmp_path_factory)
    site_dir = shared / "build" / "site"
    visits = page_records.visits_folder(shared)
    if os.environ.get(URL_ENV):  # served by the controller, at the address the site was built for
        yield Site(os.environ[URL_ENV], site_dir, visits)
        return
    handler = functools.partial(_QuietHandler, directory=str(site_dir), visits=visits)
    server = _QuietServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield Site(f"http://127.0.0.1:{server.server_address[1]}/", site_dir, visits)
    server.shutdown()


@pytest.fixture(scope="session")
def browser():
    """Headless Chromium (``find_chromium``) under playwright; skips, saying why, without it."""
    if CHROMIUM is None:
        pytest.skip(
            "no Chromium on this machine (Debian: apt-get install chromium-headless-shell; elsewhere: "
            "python -m playwright install --with-deps chromium)"
        )
    playwright_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
    with playwright_api.sync_playwright() as p:
        try:
            instance = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        except Exception as error:  # the driver could not start this browser
            pytest.skip(f"Chromium at {CHROMIUM} did not start under playwright: {error}")
        yield instance
        instance.close()


@pytest.fixture(scope="session")
def across_devices():
    """Two CPU processes started once for every multi-process test (tests marked with
    the xdist group "across devices" share one worker, so they share this run)."""
    from llm_attention_site.devices import run_all

    return run_all(2)
