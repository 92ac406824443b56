"""The KV cache benchmark still runs (a --quick smoke run), and its committed results are a full run."""

from __future__ import annotations

import json
import pathlib

from tests.scripts import run_main

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "kv_cache_benchmark.py"


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
    report = json.loads((ROOT / "benchmarks" / "kv_cache_results.json").read_text())
    assert report["machine"]["quick"] is False
    assert report["config"]["emb_dim"] == 768 and report["config"]["num_heads"] == 12
    n = report["config"]["new_tokens"]
    assert len(report["steps"]["cached"]) == len(report["steps"]["uncached"]) == n == 1024
    assert set(report["goals"]) == {"speedup_at_max", "cached_last_vs_first", "uncached_last_vs_first"}
