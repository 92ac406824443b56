"""The decoding benchmark still runs: a --quick smoke run into a temporary directory, and the
committed results meet the goals they claim."""

from __future__ import annotations

import json
import pathlib

from tests.scripts import run_main

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "decode_benchmark.py"
SETTINGS = {"mha", "gqa", "mqa", "window"}


def test_quick_run_writes_results_and_plot(tmp_path, capsys):
    results, plot = tmp_path / "results.json", tmp_path / "plot.svg"
    run_main(SCRIPT, "--quick", "--results", str(results), "--plot", str(plot))
    done = capsys.readouterr()
    assert "[1/3]" in done.err  # progress lines
    report = json.loads(results.read_text())
    assert report["machine"]["quick"] is True and report["machine"]["threads"] == 1
    rows = report["results"]
    assert {r["setting"] for r in rows} == SETTINGS
    assert len(rows) == len(SETTINGS) * len(report["config"]["held"])
    assert all(r["median_s"] > 0 for r in rows)
    assert report["ratios"]["gqa_cache_vs_mha"] == 1 / 8  # bytes are exact, not timed
    assert "<svg" in plot.read_text()
    assert "gqa_time_vs_mha" in done.out


def test_committed_results_come_from_a_full_run():
    report = json.loads((ROOT / "benchmarks" / "decode_results.json").read_text())
    assert report["machine"]["quick"] is False
    assert max(report["config"]["held"]) == 4096 and report["config"]["window"] == 1024
    rows = {(r["setting"], r["held"]): r for r in report["results"]}
    # the memory figures follow from the shapes: check them against the formula
    for (setting, held), row in rows.items():
        kv_heads = {"mha": 32, "gqa": 4, "mqa": 1, "window": 4}[setting]
        # a KVCache holds the held tokens and the new one; a rolling cache its window
        tokens = 1024 if setting == "window" else held + 1
        assert row["cache_bytes"] == 2 * kv_heads * tokens * 128 * 4
