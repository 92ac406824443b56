"""The cache of executed outputs (hooks/exec_cache.py) can never hand back a stale output.

Each test changes one input that can change what a page prints and checks that the stored output
is no longer used: a file under src/, hooks/ or benchmarks/, mkdocs.yml, an installed package, an
earlier block of the same session, the notebook's source.
"""

from __future__ import annotations

import importlib.util
import pathlib
import shutil

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("exec_cache_under_test", ROOT / "hooks" / "exec_cache.py")
exec_cache = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(exec_cache)

PACKAGES = ["torch==2.13.0", "numpy==2.4.6"]


@pytest.fixture
def project(tmp_path):
    """A copy of the files the fingerprint reads."""
    for folder in exec_cache.FINGERPRINTED:
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for name in exec_cache.FINGERPRINTED_FILES:
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


def test_fingerprint_is_stable_when_nothing_changes(project):
    assert exec_cache.fingerprint(project, PACKAGES) == exec_cache.fingerprint(project, PACKAGES)


@pytest.mark.parametrize(
    "path",
    ["src/llm_attention/causal.py", "hooks/site.py", "benchmarks/results.json", "mkdocs.yml"],
)
def test_a_changed_input_file_changes_the_fingerprint(project, path):
    before = exec_cache.fingerprint(project, PACKAGES)
    target = project / path
    assert target.is_file(), f"{path} is not in the repository any more: update this test"
    target.write_bytes(target.read_bytes() + b"\n")
    assert exec_cache.fingerprint(project, PACKAGES) != before


def test_a_new_file_under_src_changes_the_fingerprint(project):
    before = exec_cache.fingerprint(project, PACKAGES)
    (project / "src" / "llm_attention" / "extra.py").write_text("x = 1\n")
    assert exec_cache.fingerprint(project, PACKAGES) != before


def test_another_package_version_changes_the_fingerprint(project):
    before = exec_cache.fingerprint(project, PACKAGES)
    assert exec_cache.fingerprint(project, ["torch==2.13.1", "numpy==2.4.6"]) != before


def test_the_fingerprint_covers_the_installed_packages():
    installed = exec_cache.installed_packages()
    assert any(p.startswith("torch==") for p in installed) and any(p.startswith("markdown-exec==") for p in installed)


class Runner:
    """Runs blocks the way markdown-exec does: one namespace per session, print output returned."""

    def __init__(self):
        self.sessions: dict[str, dict] = {}
        self.ran: list[str] = []

    def __call__(self, code, session=None, **options):
        self.ran.append(code)
        namespace = self.sessions.setdefault(session, {}) if session else {}
        lines = []
        namespace["print"] = lambda *a: lines.append(" ".join(map(str, a)))
        exec(code, namespace)
        return "\n".join(lines)


def build(directory, fingerprint, blocks):
    """One build of one page: a fresh runner (a fresh process), every block in order."""
    cache, runner = exec_cache.ExecCache(directory, fingerprint), Runner()
    outputs = [cache.run_block("page.md", "s", code, {}, runner) for code in blocks]
    return outputs, runner.ran


PAGE = ["x = 2", "y = x * 10", "print(y + 1)"]


def test_an_unchanged_page_runs_nothing_and_prints_the_same(tmp_path):
    first, ran = build(tmp_path, "f", PAGE)
    assert ran == PAGE and first == ["", "", "21"]
    second, ran = build(tmp_path, "f", PAGE)
    assert ran == [] and second == first


def test_a_changed_block_reruns_it_with_its_session_state_and_every_later_block(tmp_path):
    build(tmp_path, "f", PAGE)
    changed = ["x = 2", "y = x * 100", "print(y + 1)"]
    outputs, ran = build(tmp_path, "f", changed)
    assert ran == changed  # the unchanged first block is replayed so that the second sees x
    reference, _ = build(tmp_path / "fresh", "f", changed)
    assert outputs == reference == ["", "", "201"]


def test_a_changed_first_block_changes_the_last_output(tmp_path):
    build(tmp_path, "f", PAGE)
    outputs, ran = build(tmp_path, "f", ["x = 3", *PAGE[1:]])
    assert outputs[-1] == "31" and len(ran) == 3


def test_a_changed_fingerprint_reruns_every_block(tmp_path):
    build(tmp_path, "f", PAGE)
    _, ran = build(tmp_path, "g", PAGE)
    assert ran == PAGE


def test_the_home_page_s_blocks_run_again_when_another_page_s_text_changes(tmp_path):
    """The home page's map quotes every page; any other page's blocks keep their outputs."""
    docs = tmp_path / "root" / "docs"
    (docs / "chapters").mkdir(parents=True)
    (docs / "chapters" / "one.md").write_text("# One\n\nThe first sentence.\n")
    assert exec_cache.READS_THE_PAGES == {"index.md"}
    before = exec_cache.pages_digest(tmp_path / "root")
    (docs / "chapters" / "one.md").write_text("# One\n\nAnother first sentence.\n")
    after = exec_cache.pages_digest(tmp_path / "root")
    assert before != after
    for page, reruns in (("index.md", True), ("chapters/one.md", False)):
        runner = Runner()
        exec_cache.ExecCache(tmp_path / "cache", "f", before).run_block(page, None, "print(1)", {}, runner)
        runner = Runner()
        exec_cache.ExecCache(tmp_path / "cache", "f", after).run_block(page, None, "print(1)", {}, runner)
        assert runner.ran == (["print(1)"] if reruns else []), page


def test_a_failing_block_is_not_stored(tmp_path):
    cache = exec_cache.ExecCache(tmp_path, "f")
    with pytest.raises(ZeroDivisionError):
        cache.run_block("page.md", None, "1 / 0", {}, Runner())
    assert not list(tmp_path.rglob("*.json"))


def test_a_changed_notebook_is_rendered_again(tmp_path):
    notebook = tmp_path / "nb.py"
    notebook.write_text("# %%\nprint(1)\n")
    renders = []

    def render(path, **options):
        renders.append(path)
        return f"<html>{pathlib.Path(path).read_text()}</html>"

    cache = exec_cache.ExecCache(tmp_path / "cache", "f")
    first = cache.render_notebook(str(notebook), {"execute": True}, render)
    assert cache.render_notebook(str(notebook), {"execute": True}, render) == first and len(renders) == 1
    notebook.write_text("# %%\nprint(2)\n")
    assert "print(2)" in cache.render_notebook(str(notebook), {"execute": True}, render) and len(renders) == 2
    exec_cache.ExecCache(tmp_path / "cache", "g").render_notebook(str(notebook), {"execute": True}, render)
    assert len(renders) == 3


def test_serve_and_build_use_the_cache_unless_told_not_to(monkeypatch):
    for command in ("build", "serve"):
        monkeypatch.setenv(exec_cache.SWITCH, "")  # so that the end of the test restores the variable
        monkeypatch.delenv(exec_cache.SWITCH)
        exec_cache.on_startup(command=command, dirty=False)
        assert exec_cache.enabled(), command
        monkeypatch.setenv(exec_cache.SWITCH, "0")
        exec_cache.on_startup(command=command, dirty=False)
        assert not exec_cache.enabled(), command
    monkeypatch.delenv(exec_cache.SWITCH)
    exec_cache.on_startup(command="gh-deploy", dirty=False)  # anything else publishes: no cache
    assert not exec_cache.enabled()


def test_what_is_checked_or_published_is_built_with_every_block_run():
    """CI's strict build and the Pages build turn the cache off: every command line of their
    scripts that runs ``mkdocs build`` sets LLM_ATTENTION_CACHE=0 on that command."""
    import pathlib
    import re

    ci = pathlib.Path(__file__).resolve().parents[1] / ".ci"
    for script in ("run", "pages"):
        lines = [line.split("#")[0] for line in (ci / script).read_text().splitlines()]
        builds = [line for line in lines if "mkdocs build" in line]
        assert builds, f".ci/{script} builds nothing"
        for line in builds:
            assert re.search(r"\bLLM_ATTENTION_CACHE=0 mkdocs build --strict\b", line), (script, line)


def test_a_chart_is_drawn_once_per_source_and_fingerprint_and_a_failure_is_not_stored(tmp_path):
    drawn = []

    def render(source):
        drawn.append(source)
        if "bad" in source:
            raise ValueError("cannot draw")
        return f"<div>{source}</div>"

    cache = exec_cache.ExecCache(tmp_path, "f")
    first = cache.render_diagram("flowchart TD\n  a --> b", render)
    assert cache.render_diagram("flowchart TD\n  a --> b", render) == first == "<div>flowchart TD\n  a --> b</div>"
    assert len(drawn) == 1
    assert cache.render_diagram("flowchart TD\n  a --> c", render) != first and len(drawn) == 2
    assert exec_cache.ExecCache(tmp_path, "g").render_diagram("flowchart TD\n  a --> b", render) == first
    assert len(drawn) == 3  # another fingerprint (a change under src/, say) draws it again
    with pytest.raises(ValueError):
        cache.render_diagram("bad", render)
    with pytest.raises(ValueError):
        cache.render_diagram("bad", render)
    assert drawn.count("bad") == 2


def test_the_hook_routes_charts_through_the_cache_and_keeps_the_module_s_own_render(tmp_path, monkeypatch):
    """Installed once per build (twice here, as two builds of one serve process do), the hook
    keeps calling the module's own ``render``, with its in-memory cache, never a wrapper of a
    wrapper; with the cache on, a stored chart is not drawn again."""
    from markdown_exec._internal import main as exec_main
    from mkdocs_jupyter import convert

    from llm_attention_site import diagrams

    own = diagrams.render
    assert hasattr(own, "cache_info"), "diagrams.render lost its in-memory cache: update this test"
    for name in ("python", "py"):  # restored after the test, as everything _install patches
        monkeypatch.setitem(exec_main.formatters, name, exec_main.formatters[name])
    monkeypatch.setattr(convert, "nb2html", convert.nb2html)
    monkeypatch.setattr(diagrams, "render", own)
    monkeypatch.setitem(exec_cache._state, "cache", None)
    exec_cache._install()
    exec_cache._install()
    assert diagrams.render is not own and diagrams.render._before_exec_cache is own
    source = "flowchart TD\n    a --> b"
    assert diagrams.render(source) == own(source)  # cache off: the module's render
    cache = exec_cache.ExecCache(tmp_path, "f")
    monkeypatch.setitem(exec_cache._state, "cache", cache)
    first = diagrams.render(source)
    assert diagrams.render(source) == first and (cache.misses, cache.hits) == (1, 1)
