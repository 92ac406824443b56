"""The KV cache benchmark still runs (a --quick smoke run); its committed results are a full run,
and they meet their goals, recomputed here from the timed steps (the page prints the file's
verdicts and asserts them)."""

from __future__ import annotations

import json
import pathlib

import pytest

from tests.scripts import run_main

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "kv_cache_benchmark.py"
COMMITTED = ROOT / "benchmarks" / "kv_cache_results.json"


def test_quick_run_writes_results_and_plot(tmp_path, capsys):
    results, plot = tmp_path / "results.json", tmp_path / "plot.svg"
    run_main(SCRIPT, "--quick", "--threads", "1", "--results", str(results), "--plot", str(plot))
    done = capsys.readouterr()
    assert "uncached: 64/64 tokens" in done.err  # progress lines
    report = json.loads(results.read_text())
    assert report["machine"]["quick"] is True and report["machine"]["threads"] == 1
    for key in ("cpu_model", "torch", "python", "date"):
        assert report["machine"][key]
    steps = report["steps"]
    assert len(steps["cached"]) == len(steps["uncached"]) == report["config"]["new_tokens"]
    assert all(s > 0 for s in steps["cached"] + steps["uncached"])
    assert [row["new_tokens"] for row in report["table"]] == report["config"]["lengths"]
    assert set(report["goals"]) == {"speedup_at_max", "cached_last_vs_first", "uncached_last_vs_first"}
    assert "<svg" in plot.read_text()
    assert "speedup_at_max" in done.out  # the ratios are printed


def test_the_committed_results_are_a_full_run():
    """The page reads this file; a quick run or a stale format must not land there."""
    report = json.loads(COMMITTED.read_text())
    assert report["machine"]["quick"] is False
    assert report["config"]["emb_dim"] == 768 and report["config"]["num_heads"] == 12
    n = report["config"]["new_tokens"]
    assert len(report["steps"]["cached"]) == len(report["steps"]["uncached"]) == n == 1024
    assert set(report["goals"]) == {"speedup_at_max", "cached_last_vs_first", "uncached_last_vs_first"}


def test_the_committed_results_meet_their_goals():
    """From the per-step times: the speedup over all the tokens, and the last steps against the
    first ones (step 0 runs the prompt, so the first steps start at 1)."""
    report = json.loads(COMMITTED.read_text())
    cached, uncached = report["steps"]["cached"], report["steps"]["uncached"]
    n, window = report["config"]["new_tokens"], report["config"]["window"]
    first, last = slice(1, 1 + window), slice(n - window, n)
    found = {
        "speedup_at_max": sum(uncached) / sum(cached),
        "cached_last_vs_first": sum(cached[last]) / sum(cached[first]),
        "uncached_last_vs_first": sum(uncached[last]) / sum(uncached[first]),
    }
    assert found["speedup_at_max"] >= 10  # cached: at least ten times faster in all
    assert found["cached_last_vs_first"] <= 1.5  # cached: nearly flat per token
    assert found["uncached_last_vs_first"] > 1  # uncached: each step costs more
    goals = report["goals"]
    assert {name: g["goal"] for name, g in goals.items()} == {
        "speedup_at_max": ">= 10",
        "cached_last_vs_first": "<= 1.5",
        "uncached_last_vs_first": "> 1",
    }
    for name, value in found.items():
        assert goals[name]["value"] == pytest.approx(value, rel=1e-12), name
        assert goals[name]["met"] is True, name
    # the table the page prints: the time of the first N steps, each way
    for row in report["table"]:
        k = row["new_tokens"]
        assert row["cached_s"] == pytest.approx(sum(cached[:k]), rel=1e-12)
        assert row["uncached_s"] == pytest.approx(sum(uncached[:k]), rel=1e-12)
        assert row["speedup"] == pytest.approx(row["uncached_s"] / row["cached_s"], rel=1e-12)
