"""What the pages say about the trained tiny GPT holds for any training run, not only this
machine's.

The model trains with the same seed and data everywhere, but another CPU rounds differently
and training amplifies the difference: the same code gives final losses from about 0.002 to
0.02 on different machines. A nudged run stands in for another machine: every initial
weight multiplied by ``1 + 1e-6 * noise`` (``InductionConfig.nudge``, a generator of its
own per nudge). For each nudge, every page that uses the trained model runs all its blocks,
as the build does, with ``InductionConfig()`` giving the nudged config; every assertion on
those pages must pass.

Marked ``nudged``: each run trains for about 6 s, so the README's test command leaves these
out and ``.ci/run`` runs them (``pytest -m nudged``). Runs are kept on disk like the build's
(``llm_attention.induction``), so a second session only runs the pages.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import pathlib
import runpy

import pytest

from llm_attention import induction
from tests.fences import parse_fences

ROOT = pathlib.Path(__file__).resolve().parents[1]
# 12 and 16 are the weakest of the first sixteen runs (one induction head all but idle on
# some inputs): every page passed on all sixteen when these were chosen
NUDGES = (1, 2, 3, 4, 12, 16)
PAGES = (  # every page and notebook that uses a model trained at build
    "docs/at-work/watching-attention-learn.md",
    "docs/at-work/generating-with-a-kv-cache.md",
    "docs/chapters/multi-head-attention.md",
    "docs/notebooks/attention_at_work.py",
)

pytestmark = pytest.mark.nudged


def nudged_config(seed: int) -> type:
    """``InductionConfig`` with ``nudge=seed`` as its default: what the pages build."""

    @dataclasses.dataclass(frozen=True)
    class NudgedConfig(induction.InductionConfig):
        nudge: int | None = seed

    return NudgedConfig


def run_page(path: pathlib.Path) -> None:
    """Every block the build executes, in page order, one namespace per session."""
    if path.suffix == ".py":  # a notebook script
        with contextlib.redirect_stdout(io.StringIO()):
            runpy.run_path(str(path), run_name="__main__")
        return
    sessions: dict[str | None, dict] = {}
    for fence in parse_fences(path.read_text(encoding="utf8")):
        if not fence.executed_at_build:
            continue
        namespace = sessions.setdefault(fence.session, {"__name__": "__main__"})
        code = compile("\n" * fence.start_line + fence.code, str(path), "exec")
        with contextlib.redirect_stdout(io.StringIO()):
            exec(code, namespace)  # a failed assertion names the page and its line
        if fence.session is None:
            sessions.pop(None)


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("nudge", NUDGES)
def test_the_page_holds_for_a_nudged_run(nudge, page, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    monkeypatch.chdir(ROOT)  # pages read benchmarks/ relative to the repository
    monkeypatch.setattr(induction, "InductionConfig", nudged_config(nudge))
    run_page(ROOT / page)
