"""The latent decode benchmark still runs: a --quick smoke run into a temporary directory; the
committed results come from a full run at DeepSeek-V3's widths, and their ratios and verdicts are
those of their rows, recomputed here (docs/modern/latent-attention.md prints them)."""

from __future__ import annotations

import json
import pathlib

import pytest

from tests.scripts import check_bandwidth_shares, quick_run, run_main

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "latent_decode_benchmark.py"
COMMITTED = ROOT / "benchmarks" / "latent_decode_results.json"
SETTINGS = ("mha", "gqa", "mla_plain", "mla_absorbed")


def test_quick_run_writes_results_and_plot(tmp_path):
    report, svg, printed = quick_run(SCRIPT, tmp_path)
    assert "[2/2]" in printed
    assert report["machine"]["quick"] is True and report["machine"]["threads"] == 1
    assert {r["setting"] for r in report["results"]} == set(SETTINGS)
    assert all(r["median_s"] > 0 for r in report["results"])
    assert set(report["profiles"]) == set(SETTINGS)
    # latent: (32 + 8) numbers per token against 2 x 8 heads x 16 for multi-head
    c = report["config"]  # DeepSeek-V3's widths divided by 8: latent 64 + 8, 16 heads of 16
    assert (c["kv_lora_rank"], c["qk_rope_head_dim"], c["num_heads"], c["head_dim"]) == (
        64, 8, 16, 16)
    assert report["ratios"]["mla_cache_vs_mha"] == (64 + 8) / (2 * 16 * 16)
    assert "<svg" in svg and "bandwidth" in printed


def test_committed_results_are_a_full_run_and_their_ratios_follow_from_the_rows():
    report = json.loads(COMMITTED.read_text())
    config, rows = report["config"], {(r["setting"], r["held"]): r for r in report["results"]}
    assert report["machine"]["quick"] is False and report["machine"]["threads"] == 1
    assert (config["d_model"], config["num_heads"], config["kv_lora_rank"],
            config["qk_rope_head_dim"]) == (7168, 128, 512, 64)
    assert max(config["held"]) == 8192 and set(rows) == {
        (s, h) for s in SETTINGS for h in config["held"]}
    for (setting, held), row in rows.items():  # bytes follow from the shapes
        per_token = 576 * 4 if setting.startswith("mla") else 2 * (128 if setting == "mha" else 8) * 128 * 4
        assert row["cache_bytes_per_token"] == per_token
        assert row["bytes_read"] == row["weight_bytes"] + held * per_token
    ratios = report["ratios"]
    check_bandwidth_shares(report)
    speedup = rows["mla_plain", 8192]["median_s"] / rows["mla_absorbed", 8192]["median_s"]
    assert ratios["absorbed_speedup_over_plain"] == pytest.approx(speedup, rel=1e-12)
    assert ratios["mla_cache_vs_mha"] == 576 / (2 * 128 * 128) <= 0.1
    assert ratios["goals"]["mla_cache_at_most_1/10_of_mha"] and speedup > 1
    below = sorted({s for s in SETTINGS for h in (4096, 8192)
                    if ratios["fraction_of_bandwidth"][f"{s}@{h}"] < 0.5})
    assert ratios["below_half_bandwidth_at_4096_or_more"] == below
    assert ratios["goals"]["every_variant_at_least_half_bandwidth"] == (not below)
