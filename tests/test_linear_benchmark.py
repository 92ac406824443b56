"""The linear decode benchmark still runs: a --quick smoke run into a temporary directory; the
committed results come from a full run at Qwen3-Next's width, and every ratio, crossing and
verdict in them follows from their rows, recomputed here (docs/modern/linear-attention.md
prints them)."""

from __future__ import annotations

import json
import pathlib

import pytest

from tests.scripts import check_bandwidth_shares, run_main

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "linear_decode_benchmark.py"
COMMITTED = ROOT / "benchmarks" / "linear_decode_results.json"
SETTINGS = ("gdn", "gqa")


def test_quick_run_writes_results_and_plot(tmp_path, capsys):
    results, plot = tmp_path / "results.json", tmp_path / "plot.svg"
    run_main(SCRIPT, "--quick", "--results", str(results), "--plot", str(plot))
    done = capsys.readouterr()
    assert "[2/2]" in done.err and "prefill" in done.out
    report = json.loads(results.read_text())
    assert report["machine"]["quick"] is True and report["machine"]["threads"] == 1
    assert {r["setting"] for r in report["results"]} == set(SETTINGS)
    assert all(r["median_s"] > 0 for r in report["results"])
    assert report["prefill"]["max_difference"] < 1e-4  # the two forms agree
    assert report["prefill"]["matmul"]["flops_per_s"] > 0
    assert 0 <= report["ratios"]["chunked_share_in_matrix_products"] <= 1
    # the state does not grow: the same bytes at every length
    assert len({r["cache_bytes"] for r in report["results"] if r["setting"] == "gdn"}) == 1
    assert "<svg" in plot.read_text() and "bandwidth" in done.out


def test_committed_results_are_a_full_run_and_their_ratios_follow_from_the_rows():
    report = json.loads(COMMITTED.read_text())
    config, model = report["config"], report["layer_config"]
    rows = {(r["setting"], r["held"]): r for r in report["results"]}
    assert report["machine"]["quick"] is False and report["machine"]["threads"] == 1
    assert config["shrink"] == 1 and model["hidden_size"] == 2048  # Qwen3-Next as published
    held = config["held"]
    assert (min(held), max(held)) == (1024, 32768) and set(rows) == {
        (s, h) for s in SETTINGS for h in held}
    state = 32 * 128 * 128 * 4 + 3 * (2 * 16 * 128 + 32 * 128) * 4  # float32, window of 3
    for (setting, h), row in rows.items():  # bytes follow from the shapes
        per_token = 2 * 2 * 256 * 4  # K and V, 2 heads of 256, float32
        assert row["cache_bytes"] == (state if setting == "gdn" else h * per_token)
        assert row["bytes_read"] == row["weight_bytes"] + row["cache_bytes"]
    ratios = report["ratios"]
    check_bandwidth_shares(report)
    flat = rows["gdn", 32768]["median_s"] / rows["gdn", 1024]["median_s"]
    assert ratios["gdn_last_over_first"] == pytest.approx(flat, rel=1e-12)
    assert ratios["goals"]["gdn_decode_flat_within_1.2"] == (flat <= 1.2)
    speedups = {h: rows["gqa", h]["median_s"] / rows["gdn", h]["median_s"] for h in held}
    for h in held:
        assert ratios["gdn_speedup_over_gqa"][str(h)] == pytest.approx(speedups[h], rel=1e-12)
    # crossings, from the bytes alone
    assert ratios["kv_cache_outweighs_state_from"] == pytest.approx(state / 4096)
    crossing = (rows["gdn", 1024]["bytes_read"] - rows["gqa", 1024]["weight_bytes"]) / 4096
    assert ratios["gqa_step_reads_more_from"] == pytest.approx(crossing)
    beyond = [h for h in held if h >= crossing]
    assert ratios["measured_lengths_beyond_crossing"] == beyond
    assert ratios["goals"]["gdn_faster_beyond_crossing"] == (
        bool(beyond) and all(speedups[h] > 1 for h in beyond))
    prefill = report["prefill"]
    assert (prefill["tokens"], prefill["chunk_size"], prefill["heads"]) == (4096, 64, 32)
    assert prefill["max_difference"] < 1e-3
    gain = prefill["recurrent"]["median_s"] / prefill["chunked"]["median_s"]
    assert ratios["chunked_speedup_over_token_loop"] == pytest.approx(gain, rel=1e-12)
    assert ratios["goals"]["chunked_at_least_10x_token_loop"] == (gain >= 10)
    # the matrix-product speed at the chunk's shapes, and the chunked form's profile
    matmul = prefill["matmul"]
    assert matmul["shape"] == [32, 64, 128, 128]
    assert matmul["flops_per_s"] == pytest.approx(2 * 32 * 64 * 128 * 128 / matmul["median_s"])
    in_products = sum(op["share"] for op in prefill["chunked_profile"]
                      if op["op"] in ("aten::bmm", "aten::mm", "aten::addmm", "aten::baddbmm"))
    assert 0 < in_products < 1
    assert ratios["chunked_share_in_matrix_products"] == pytest.approx(in_products)
