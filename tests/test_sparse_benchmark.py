"""The sparse decode benchmark still runs: a --quick smoke run into a temporary directory; the
committed results come from a full run at DeepSeek-V3.2's widths, their bytes follow from the
layer's shapes, and their speed-ups, predicted crossing and goal are those of their rows,
recomputed here (docs/modern/sparse-attention.md prints them)."""

from __future__ import annotations

import json
import pathlib

import pytest

from tests.scripts import quick_run, run_main

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "sparse_decode_benchmark.py"
COMMITTED = ROOT / "benchmarks" / "sparse_decode_results.json"
SETTINGS = ("dense", "sparse_masked", "sparse_gathered")


def test_quick_run_writes_results_and_plot(tmp_path):
    report, svg, printed = quick_run(SCRIPT, tmp_path)
    assert "[2/2]" in printed
    assert report["machine"]["quick"] is True and report["machine"]["threads"] == 1
    assert {r["setting"] for r in report["results"]} == set(SETTINGS)
    assert all(r["median_s"] > 0 and r["iqr_s"] >= 0 for r in report["results"])
    assert set(report["profiles"]) == set(SETTINGS)
    # quick sizes, DeepSeek-V3.2's divided by 8: rows of 64 + 8, indexer keys of 16, top-k 16
    c = report["config"]
    assert (c["kv_lora_rank"], c["qk_rope_head_dim"], c["index_head_dim"], c["index_topk"]) == (
        64, 8, 16, 16)
    assert report["crossover"]["cache_bytes"] == pytest.approx(16 * 72 / (72 - 16))
    assert "<svg" in svg and "bytes predict" in printed


def test_committed_results_are_a_full_run_and_the_goal_follows_from_the_rows():
    report = json.loads(COMMITTED.read_text())
    config, rows = report["config"], {(r["setting"], r["held"]): r for r in report["results"]}
    assert report["machine"]["quick"] is False and report["machine"]["threads"] == 1
    assert (config["d_model"], config["num_heads"], config["kv_lora_rank"],
            config["index_n_heads"], config["index_head_dim"], config["index_topk"]) == (
        7168, 128, 512, 64, 128, 2048)
    held = config["held"]
    assert min(held) == 4096 and 32768 in held and set(rows) == {
        (s, h) for s in SETTINGS for h in held}
    weights = report["weight_bytes"]
    latent = 4 * (7168 * 1536 + 1536 + 1536 * 128 * 192 + 7168 * 576 + 512
                  + 512 * 128 * 256 + 128 * 128 * 7168)  # LatentAttention, no biases, float32
    indexer = 4 * (1536 * 64 * 128 + 7168 * 128 + 2 * 128 + 7168 * 64)
    assert (weights["latent"], weights["indexer"]) == (latent, indexer)
    for (setting, h), row in rows.items():  # bytes follow from the shapes
        cache = {"dense": h * 576, "sparse_masked": h * (576 + 128),
                 "sparse_gathered": h * 128 + min(2048, h) * 576}[setting] * 4
        assert row["bytes_read"] == latent + (setting != "dense") * indexer + cache
    crossing = report["crossover"]
    assert crossing["total_bytes"] == pytest.approx((indexer + 2048 * 576 * 4) / (448 * 4))
    assert crossing["cache_bytes"] == pytest.approx(2048 * 576 / 448)
    r = report["ratios"]
    samples = report["bandwidth_samples"]  # before the first length and after each one
    assert len(samples) == len(held) + 1
    for key in ("copy_bytes_per_s", "read_bytes_per_s"):
        assert report["bandwidth"][key] == max(sample[key] for sample in samples)
    limit = max(report["bandwidth"]["copy_bytes_per_s"], report["bandwidth"]["read_bytes_per_s"])
    assert r["bandwidth_limit_bytes_per_s"] == limit
    for (setting, h), row in rows.items():
        assert r["fraction_of_bandwidth"][f"{setting}@{h}"] == pytest.approx(
            row["bytes_read"] / row["median_s"] / limit, rel=1e-12)
    speedup = {h: rows["dense", h]["median_s"] / rows["sparse_gathered", h]["median_s"]
               for h in held}
    for h in held:
        assert r["gathered_speedup_over_dense"][str(h)] == pytest.approx(speedup[h], rel=1e-12)
    predicted_from = min(h for h in held if h >= crossing["total_bytes"])
    assert r["predicted_from_held"] == predicted_from == 65536  # the grid reaches past it
    goal = all(speedup[h] > 1 for h in held if h >= predicted_from)
    assert r["goals"]["gathered_faster_from_predicted"] == goal
    faster_from = None
    for h in sorted(held, reverse=True):
        if speedup[h] <= 1:
            break
        faster_from = h
    assert r["gathered_faster_from_held"] == faster_from
