"""The decoding benchmark still runs: a --quick smoke run into a temporary directory; the
committed results come from a full run, and they meet the goals they claim, recomputed here from
their rows (docs/modern/combined.md prints them)."""

from __future__ import annotations

import json
import pathlib

import pytest

from tests.scripts import run_main

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "decode_benchmark.py"
COMMITTED = ROOT / "benchmarks" / "decode_results.json"
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
    report = json.loads(COMMITTED.read_text())
    assert report["machine"]["quick"] is False
    assert max(report["config"]["held"]) == 4096 and report["config"]["window"] == 1024
    rows = {(r["setting"], r["held"]): r for r in report["results"]}
    assert set(rows) == {(s, h) for s in SETTINGS for h in report["config"]["held"]}
    # the memory figures follow from the shapes: check them against the formula
    for (setting, held), row in rows.items():
        kv_heads = {"mha": 32, "gqa": 4, "mqa": 1, "window": 4}[setting]
        # a KVCache holds the held tokens and the new one; a rolling cache its window
        tokens = 1024 if setting == "window" else held + 1
        assert row["cache_bytes"] == 2 * kv_heads * tokens * 128 * 4


def test_committed_results_meet_their_goals():
    """The three goals, from the rows at the longest length held; then the ratios and verdicts
    that the file records (and the page prints) against the same rows."""
    report = json.loads(COMMITTED.read_text())
    rows = {(r["setting"], r["held"]): r for r in report["results"]}
    held, window = report["config"]["held"], report["config"]["window"]
    cache = {s: rows[(s, max(held))]["cache_bytes"] for s in SETTINGS}
    time = {s: rows[(s, max(held))]["median_s"] for s in SETTINGS}
    beyond = {rows[("window", h)]["cache_bytes"] for h in held if h >= window}

    assert cache["gqa"] <= cache["mha"] / 8  # grouped-query: an eighth of the cache at most
    assert len(beyond) == 1  # the window's cache is flat from the window on
    assert time["gqa"] <= time["mha"]  # grouped-query: no slower than multi-head

    ratios = report["ratios"]
    assert ratios["goals"] == {
        "gqa_cache_at_most_1/8_of_mha": True,
        "window_cache_flat_beyond_window": True,
        "gqa_no_slower_than_mha": True,
    }
    assert ratios["window_cache_bytes_beyond_window"] == sorted(beyond)
    for name, (a, b, measured) in {
        "gqa_cache_vs_mha": ("gqa", "mha", cache),
        "mqa_cache_vs_mha": ("mqa", "mha", cache),
        "gqa_time_vs_mha": ("gqa", "mha", time),
        "mqa_time_vs_mha": ("mqa", "mha", time),
        "window_time_vs_gqa": ("window", "gqa", time),
    }.items():
        assert ratios[name] == pytest.approx(measured[a] / measured[b], rel=1e-12), name
