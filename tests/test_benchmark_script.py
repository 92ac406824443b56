"""The benchmark script still runs: a --quick smoke run into a temporary directory (its ``main``,
called in this process: tests/scripts.py)."""

from __future__ import annotations

import json
import pathlib

from tests.scripts import run_main

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "attention_benchmark.py"
IMPLEMENTATIONS = {"wrapper", "obvious", "explicit", "fast", "torch_mha", "bare"}


def test_quick_run_writes_results_and_plot(tmp_path, capsys):
    results, plot = tmp_path / "results.json", tmp_path / "benchmark.svg"
    run_main(SCRIPT, "--quick", "--threads", "1", "--results", str(results), "--plot", str(plot))
    done = capsys.readouterr()
    assert "[" in done.err and "/36]" in done.err  # progress lines
    report = json.loads(results.read_text())
    assert report["machine"]["quick"] is True
    assert report["machine"]["threads"] == 1
    for key in ("cpu_model", "torch", "python", "date"):
        assert report["machine"][key]
    rows = report["results"]
    assert {r["impl"] for r in rows} == IMPLEMENTATIONS
    assert len(rows) == len(IMPLEMENTATIONS) * 2 * len(report["config"]["sizes"])
    assert all(r["median_s"] > 0 for r in rows)
    assert set(report["ratios"]["goals"]) >= {"fast_vs_explicit", "fast_vs_torch_mha", "fast_vs_bare"}
    assert report["flops"]["matmul_gflops"] > 0
    assert plot.read_text().lstrip().startswith("<?xml") and "<svg" in plot.read_text()
    assert "fast_vs_explicit" in done.out  # the ratios are printed


def test_replot_redraws_from_the_results_file(tmp_path):
    committed = ROOT / "benchmarks" / "results.json"
    plot = tmp_path / "again.svg"
    run_main(SCRIPT, "--replot", "--results", str(committed), "--plot", str(plot))
    assert "<svg" in plot.read_text()
