"""The Mamba-2 benchmark still runs: a --quick smoke run into a temporary directory, whose
state and cache bytes follow from the layers' shapes, whose chunked forms equal the token loop
and transformers' pure-torch functions, and whose ratios and verdicts follow from its rows; its
figure fits both columns. The committed results, once a full run at Nemotron-H's published
width exists, are checked the same way."""

from __future__ import annotations

import contextlib
import io
import json
import pathlib
import re

import pytest

from tests.scripts import quick_run, run_main

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "mamba2_benchmark.py"
COMMITTED = ROOT / "benchmarks" / "mamba2_results.json"
SETTINGS = ("mamba2", "gdn", "gqa")
VERSUS = ("gdn", "kda", "mamba2")


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """One quick run for the whole module: its report, its plot, what it printed."""
    return quick_run(SCRIPT, tmp_path_factory.mktemp("mamba2"))


def check_follows_from_rows(report: dict, states: dict, kv_per_token: int,
                            weights: dict) -> None:
    """Bytes from the shapes; every ratio, verdict and goal recomputed from the rows."""
    from llm_attention_site.timings import FASTER, SLOWER, first_separated, verdict

    held = report["config"]["held"]
    rows = {(r["setting"], r["held"]): r for r in report["results"]}
    assert set(rows) == {(s, h) for s in SETTINGS for h in held}
    assert {name: sum(parts.values()) for name, parts in report["state_bytes"].items()} == states
    assert report["kv_bytes_per_token"] == kv_per_token
    for (setting, h), row in rows.items():
        expected = h * kv_per_token if setting == "gqa" else states[setting]  # no growth
        assert row["cache_bytes"] == expected, (setting, h)
        assert row["weight_bytes"] == weights[setting]
        assert row["bytes_read"] == row["weight_bytes"] + row["cache_bytes"]
        assert row["median_s"] > 0 and row["iqr_s"] >= 0
    r = report["ratios"]
    first, last = min(held), max(held)
    for name in ("mamba2", "gdn"):
        assert r["last_over_first"][name] == pytest.approx(
            rows[name, last]["median_s"] / rows[name, first]["median_s"], rel=1e-12)
        assert r["kv_cache_outweighs_state_from"][name] == pytest.approx(
            states[name] / kv_per_token)
    assert r["gqa_step_reads_more_than_mamba2_from"] == pytest.approx(
        (weights["mamba2"] + states["mamba2"] - weights["gqa"]) / kv_per_token)
    pairs = {h: (rows["mamba2", h], rows["gqa", h]) for h in held}
    assert r["mamba2_against_gqa"] == {str(h): verdict(*pairs[h]) for h in held}
    assert r["mamba2_faster_than_gqa_from"] == first_separated(pairs, FASTER)
    prefill = report["prefill"]
    assert r["chunked_speedup_over_token_loop"] == pytest.approx(
        prefill["recurrent"]["median_s"] / prefill["chunked"]["median_s"], rel=1e-12)
    loop = verdict(prefill["chunked"], prefill["recurrent"])
    assert r["chunked_against_token_loop"] == loop
    goals = {"mamba2_decode_flat_within_1.2": r["last_over_first"]["mamba2"] <= 1.2,
             "chunked_faster_than_token_loop": loop == FASTER}
    assert set(report["versus"]["pairs"]) == set(VERSUS)
    for name, pair in report["versus"]["pairs"].items():
        v = r["versus_transformers"][name]
        assert v["transformers_over_ours"] == pytest.approx(
            pair["transformers"]["median_s"] / pair["ours"]["median_s"], rel=1e-12)
        assert v["ours"] == verdict(pair["ours"], pair["transformers"])
        goals[f"ours_no_slower_than_transformers_{name}"] = v["ours"] != SLOWER
    assert r["goals"] == goals


def test_quick_run_writes_results_and_plot(quick):
    report, svg, printed = quick
    assert "[2/2]" in printed and "prefill of 96 tokens" in printed
    assert all(f"{name}: ours" in printed for name in VERSUS)
    assert report["machine"]["quick"] is True and report["machine"]["threads"] == 1
    assert set(report["profiles"]) == set(SETTINGS) and report["config"]["held"] == [64, 128]
    # widths / 16: Mamba-2's 64 heads of 4 with a state of 8, 8 groups, convolution of 4;
    # Gated DeltaNet's 32 value and 16 key heads of 8; attention's 2 key/value heads of 8
    mamba_state, mamba_window = 64 * 8 * 4 * 4, (64 * 4 + 2 * 8 * 8) * 3 * 4
    gdn_state, gdn_window = 32 * 8 * 8 * 4, (2 * 16 * 8 + 32 * 8) * 3 * 4
    assert report["state_bytes"] == {
        "mamba2": {"state": mamba_state, "conv_window": mamba_window},
        "gdn": {"state": gdn_state, "conv_window": gdn_window}}
    weights = {s: next(r["weight_bytes"] for r in report["results"] if r["setting"] == s)
               for s in SETTINGS}
    check_follows_from_rows(report, {"mamba2": mamba_state + mamba_window,
                                     "gdn": gdn_state + gdn_window}, 2 * 2 * 8 * 4, weights)
    prefill = report["prefill"]
    assert (prefill["tokens"], prefill["chunk_size"], prefill["heads"]) == (96, 8, 64)
    assert prefill["max_difference"] < 1e-5  # chunked equals the token loop
    versus = report["versus"]
    assert (versus["tokens"], versus["heads"], versus["head_dim"]) == (96, 2, 16)
    for name, pair in versus["pairs"].items():  # ours equals transformers'
        assert pair["max_difference"] < 1e-5, name
    assert "<svg" in svg


def test_the_quick_figure_fits_both_columns_and_its_legend_covers_no_line(quick):
    from llm_attention_site.benchmark_plots import mamba2_figure
    from llm_attention_site.figures import to_html
    from tests.test_figures import _legend_covers, _svgs

    report = quick[0]
    for narrow, column_px in ((False, 686), (True, 328)):
        fig = mamba2_figure(report, narrow=narrow)
        texts = [t.get_text() for t in fig.axes[1].texts]
        assert texts == ["Mamba-2's rule, 64 heads of 4", "Gated DeltaNet, 2 heads of 16",
                         "Kimi Delta Attention, 2 heads of 16", "Mamba-2 scan, 64 heads of 4"]
        assert len(fig.axes[1].patches) == 8  # two bars a pair
        assert not _legend_covers(fig)
        html = to_html(fig, alt="mamba2")
        width = float(re.search(r'width="([\d.]+)"', html).group(1))
        assert width <= column_px * 1.02, (narrow, width)
        for svg in _svgs(html):
            sizes = [float(v) for v in re.findall(r"font(?:-size)?: ([\d.]+)px", svg)]
            assert min(sizes) * 4 / 3 * min(1.0, column_px / width) >= 9, (narrow, min(sizes))


@pytest.mark.skipif(
    not COMMITTED.exists(),
    reason="no full run committed yet: benchmarks/mamba2_results.json comes from "
           "`python benchmarks/mamba2_benchmark.py` on a quiet machine")
def test_committed_results_are_a_full_run_and_their_ratios_follow_from_the_rows():
    report = json.loads(COMMITTED.read_text())
    config, model = report["config"], report["layer_config"]
    assert report["machine"]["quick"] is False and report["machine"]["threads"] == 1
    assert config["shrink"] == 1 and model["hidden_size"] == 2688  # Nemotron-H as published
    assert config["held"] == [1024, 2048, 4096, 8192, 16384, 32768]
    # float32: Mamba-2's 64 heads x 128 x 64 and a window of 3 x (4,096 + 2 x 8 x 128);
    # Gated DeltaNet's 32 heads x 128 x 128 and 3 x (2 x 16 x 128 + 32 x 128); K and V of
    # 2 heads of 128 a token
    states = {"mamba2": 4 * (64 * 128 * 64 + 3 * 6144),
              "gdn": 4 * (32 * 128 * 128 + 3 * 8192)}
    weights = {
        # in_proj to z, x, B, C, dt; the convolution and its bias; A_log, dt_bias, D; the
        # norm; out_proj (no other biases)
        "mamba2": 4 * (2688 * (2 * 4096 + 2 * 8 * 128 + 64) + 6144 * 5 + 3 * 64 + 4096
                       + 4096 * 2688),
        # queries, keys, values; convolution; A_log, dt_bias; the norm; out_proj; gate,
        # beta and decay projections
        "gdn": 4 * (2688 * 8192 + 8192 * 4 + 2 * 32 + 128 + 4096 * 2688 + 2688 * 4096
                    + 2 * 2688 * 32),
        "gqa": 4 * (2688 * (4096 + 2 * 256) + 4096 * 2688),
    }
    check_follows_from_rows(report, states, 2 * 2 * 128 * 4, weights)
    assert 1000 < report["ratios"]["kv_cache_outweighs_state_from"]["mamba2"] < 1100
    prefill, versus = report["prefill"], report["versus"]
    assert (prefill["tokens"], prefill["chunk_size"], prefill["heads"], prefill["state_size"],
            prefill["head_dim"]) == (4096, 128, 64, 128, 64)
    assert prefill["max_difference"] < 1e-3
    assert (versus["tokens"], versus["heads"], versus["head_dim"], versus["chunk_size"]) == (
        4096, 4, 128, 64)
    assert all(pair["max_difference"] < 1e-3 for pair in versus["pairs"].values())
    assert set(report["profiles"]) == set(SETTINGS)
