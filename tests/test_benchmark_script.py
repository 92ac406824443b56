"""The benchmark script still runs: a --quick smoke run into a temporary directory (its ``main``,
called in this process: tests/scripts.py). The committed results come from a full run, and the
ratios and verdicts they record, which docs/beyond/fast-attention.md prints, follow from their
rows. Which goals the run meets, and which it misses, the page says and asserts."""

from __future__ import annotations

import json
import operator
import pathlib

import pytest

from tests.scripts import run_main

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "attention_benchmark.py"
COMMITTED = ROOT / "benchmarks" / "results.json"
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
    rounds = report["config"]["rounds"]
    assert all(len(r["rounds_s"]) == rounds and r["spread"] >= 1 for r in rows)  # repeats
    assert report["noisy"]["threshold"] > 1 and "slowest round" in done.out
    assert set(report["ratios"]["goals"]) >= {"fast_vs_explicit", "fast_vs_torch_mha", "fast_vs_bare"}
    assert report["flops"]["matmul_gflops"] > 0
    assert plot.read_text().lstrip().startswith("<?xml") and "<svg" in plot.read_text()
    assert "fast_vs_explicit" in done.out  # the ratios are printed


def test_replot_redraws_from_the_results_file(tmp_path):
    plot = tmp_path / "again.svg"
    run_main(SCRIPT, "--replot", "--results", str(COMMITTED), "--plot", str(plot))
    assert "<svg" in plot.read_text()


def test_the_committed_ratios_and_verdicts_follow_from_the_rows():
    """Time at the longest batch-8 length (forward), memory at the longest length (forward and
    backward); a verdict is the goal applied to the ratio."""
    report = json.loads(COMMITTED.read_text())
    assert report["machine"]["quick"] is False
    rows = {(r["impl"], r["batch"], r["tokens"], r["mode"]): r for r in report["results"]}
    sizes = [tuple(size) for size in report["config"]["sizes"]]
    at_time = max(size for size in sizes if size[0] == 8)  # (8, the most tokens)
    at_memory = max(sizes, key=lambda size: size[1])
    assert report["ratios"]["time_at"] == dict(zip(("batch", "tokens"), at_time), mode="forward")
    assert report["ratios"]["memory_at"]["tokens"] == at_memory[1]

    def time(impl):
        return rows[(impl, *at_time, "forward")]["median_s"]

    def memory(impl):
        return rows[(impl, *at_memory, "forward+backward")]["peak_bytes"]

    expected = {  # name: (ratio, goal)
        "fast_vs_explicit": (time("explicit") / time("fast"), ">= 3"),
        "fast_vs_torch_mha": (time("torch_mha") / time("fast"), ">= 2.5"),
        "fast_vs_bare": (time("fast") / time("bare"), "<= 1.05"),
        "fast_vs_wrapper": (time("wrapper") / time("fast"), None),
        "explicit_vs_wrapper": (time("explicit") / time("wrapper"), "<= 1"),
        "memory_fast_vs_explicit": (memory("fast") / memory("explicit"), "<= 0.05"),
    }
    goals = report["ratios"]["goals"]
    assert set(goals) == set(expected)
    compare = {">=": operator.ge, "<=": operator.le}
    for name, (ratio, goal) in expected.items():
        assert goals[name]["value"] == pytest.approx(ratio, rel=1e-12), name
        assert goals[name]["goal"] == goal, name
        if goal is None:
            assert goals[name]["met"] is None, name
        else:
            sign, bound = goal.split()
            assert goals[name]["met"] is compare[sign](ratio, float(bound)), name

    for row in report["results"]:  # each cell's repeats and their spread
        assert len(row["rounds_s"]) == report["config"]["rounds"] >= 5
        assert row["spread"] == pytest.approx(max(row["rounds_s"]) / min(row["rounds_s"]))
    noisy = report["noisy"]
    assert noisy["cells"] == [f"{r['impl']} {r['batch']} {r['tokens']} {r['mode']}"
                              for r in report["results"] if r["spread"] > noisy["threshold"]]

    flops = report["flops"]  # the fast path's rate, against a plain matrix product
    (batch, tokens), d = at_time, report["config"]["d_model"]
    work = 8 * batch * tokens * d * d + 2 * batch * tokens * tokens * d  # projections, attention
    assert flops["fast_path_gflops"] == pytest.approx(work / time("fast") / 1e9, rel=1e-12)
    ratio = flops["fast_path_gflops"] / flops["matmul_gflops"]
    assert flops["fraction_of_matmul"] == pytest.approx(ratio, rel=1e-12)
