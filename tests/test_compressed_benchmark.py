"""The compressed decode benchmark still runs: a --quick smoke run into a temporary directory,
whose bytes follow from the layers' shapes, whose caches hold what the counts say a step
reads, and whose ratios follow from its rows; its figure fits both columns. The committed
results, once a full run at DeepSeek-V4-Flash's and V3.2's published sizes exists, are checked
the same way (their bytes, lines, crossings, verdicts and goals recomputed from their rows)."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import pathlib
import re
import sys

import pytest

from tests.scripts import quick_run, run_main

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "compressed_decode_benchmark.py"
COMMITTED = ROOT / "benchmarks" / "compressed_decode_results.json"
SETTINGS = ("mla", "dsa", "csa", "hca")
PAIRS = ("dsa_vs_mla", "csa_vs_mla", "csa_vs_dsa", "hca_vs_csa")


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """One quick run for the whole module: its report, its printed output, its plot."""
    return quick_run(SCRIPT, tmp_path_factory.mktemp("compressed"))


def script_module():
    """The script as a module, to reach its fill and count functions."""
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        spec = importlib.util.spec_from_file_location("_compressed_script", SCRIPT)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(SCRIPT.parent))


def quick_cache_bytes(setting: str, h: int) -> int:
    """What a step reads of its cache at the quick sizes, by hand: V3.2's widths / 8
    (rows of 64 + 8, indexer keys of 16, top 16), V4-Flash's / 8 (entries of 64, window of
    16, indexer entries of 16, top 16, rates 4 and 128 / 8 = 16), 4 bytes a number."""
    numbers = {
        "mla": h * 72,
        "dsa": h * 16 + 16 * 72,
        # window 15 keys, h/4 indexer entries, 16 chosen entries, 7 unpooled tokens of
        # 4 x 64 (values and gates, two series) and of 4 x 16 (the indexer's)
        "csa": 15 * 64 + h // 4 * 16 + 16 * 64 + 7 * 4 * 64 + 7 * 4 * 16,
        # window, every entry, 15 unpooled tokens of 2 x 64
        "hca": 15 * 64 + h // 16 * 64 + 15 * 2 * 64,
    }[setting]
    return numbers * 4


def check_rows_follow(report: dict, cache_bytes, weights: dict) -> dict:
    """Each row's bytes, and the ratios, recomputed from the rows; returns the rows."""
    from llm_attention_site.timings import FASTER, first_separated, verdict

    held = report["config"]["held"]
    rows = {(r["setting"], r["held"]): r for r in report["results"]}
    assert set(rows) == {(s, h) for s in SETTINGS for h in held}
    for (setting, h), row in rows.items():
        assert row["cache_bytes"] == cache_bytes(setting, h), (setting, h)
        assert row["weight_bytes"] == weights[setting]
        assert row["bytes_read"] == row["weight_bytes"] + row["cache_bytes"]
        assert row["median_s"] > 0 and row["iqr_s"] >= 0
    r = report["ratios"]
    limit = max(report["bandwidth"]["copy_bytes_per_s"], report["bandwidth"]["read_bytes_per_s"])
    assert r["bandwidth_limit_bytes_per_s"] == limit
    for (setting, h), row in rows.items():
        assert r["fraction_of_bandwidth"][f"{setting}@{h}"] == pytest.approx(
            row["bytes_read"] / row["median_s"] / limit, rel=1e-12)
    assert set(r["crossings"]) == set(PAIRS)
    goals = {}
    for name, c in r["crossings"].items():
        a, b = name.split("_vs_")
        pairs = {h: (rows[a, h], rows[b, h]) for h in held}
        for h in held:
            assert c["speedup"][str(h)] == pytest.approx(
                rows[b, h]["median_s"] / rows[a, h]["median_s"], rel=1e-12)
            assert c["verdicts"][str(h)] == verdict(*pairs[h])
        assert c["measured_faster_from_held"] == first_separated(pairs, FASTER)
        for key in ("bytes", "multiply_adds"):  # the lines, and the grid's prediction
            line_a, line_b = (report["counts"][s]["lines"][key] for s in (a, b))
            slope = line_b["per_token"] - line_a["per_token"]
            assert c[key]["lines_meet_at"] == (None if slope == 0 else pytest.approx(
                (line_a["fixed"] - line_b["fixed"]) / slope))
            assert c[key]["a_grows_slower"] == (slope > 0)
            at = {s: {int(h): v[key] for h, v in report["counts"][s]["at_held"].items()}
                  for s in (a, b)}
            from_ = None
            for h in sorted(held):
                from_ = (from_ or h) if at[a][h] < at[b][h] else None
            assert c[key]["predicted_from_held"] == from_
        predicted = [c[key]["predicted_from_held"] for key in ("bytes", "multiply_adds")]
        if None in predicted:  # a count never predicts it: no goal
            assert "both_predict_from_held" not in c
            continue
        start = max(predicted)
        assert c["both_predict_from_held"] == start
        goals[f"{a}_faster_than_{b}_where_both_counts_predict"] = all(
            verdict(*pairs[h]) == FASTER for h in held if h >= start)
    assert r["goals"] == goals
    for setting in SETTINGS:  # the counts at the run's lengths: the rows' bytes
        for h in held:
            assert report["counts"][setting]["at_held"][str(h)]["bytes"] == rows[
                setting, h]["bytes_read"]
    return rows


def test_quick_run_writes_results_and_plot(quick):
    report, svg, printed = quick
    assert "[2/2]" in printed and "bandwidth" in printed
    assert all(f"{a} against {b}: bytes predict" in printed
               for a, b in (pair.split("_vs_") for pair in PAIRS))
    config = report["config"]
    assert report["machine"]["quick"] is True and report["machine"]["threads"] == 1
    assert set(report["profiles"]) == set(SETTINGS)
    # the quick sizes: V3.2's / 8 and V4-Flash's / 8, top-k 16 biting at both lengths
    assert (config["d_model"], config["kv_lora_rank"], config["index_topk"]) == (896, 64, 16)
    csa, hca = config["v4"]["csa"], config["v4"]["hca"]
    assert (csa["d_in"], csa["head_dim"], csa["window"], csa["compress_rate"],
            csa["index_head_dim"], csa["index_topk"]) == (512, 64, 16, 4, 16, 16)
    assert (hca["compress_rate"], hca["layer_type"]) == (16, "heavily_compressed_attention")
    assert config["held"] == [128, 256] and 128 // 4 > 16  # more entries than top-k
    weights = {s: next(r["weight_bytes"] for r in report["results"] if r["setting"] == s)
               for s in SETTINGS}
    check_rows_follow(report, quick_cache_bytes, weights)
    lines = {s: report["counts"][s]["lines"] for s in SETTINGS}
    # bytes per held token: a latent row; an indexer key; an indexer entry per 4 tokens;
    # an entry per 16 tokens
    assert {s: lines[s]["bytes"]["per_token"] for s in SETTINGS} == {
        "mla": 72 * 4, "dsa": 16 * 4, "csa": 16 * 4 / 4, "hca": 64 * 4 / 16}
    # multiply-adds per held token: 16 heads x (72 + 64) absorbed; 8 indexer heads x 17;
    # a quarter of that; 8 heads x (64 + 64) per entry, one entry per 16 tokens
    assert {s: lines[s]["multiply_adds"]["per_token"] for s in SETTINGS} == {
        "mla": 16 * 136, "dsa": 8 * 17, "csa": 8 * 17 / 4, "hca": 8 * 128 / 16}
    assert "<svg" in svg


def test_the_filled_caches_hold_what_the_counts_say_a_step_reads():
    """The window's W - 1 keys, held / m entries, the unpooled tokens a pool keeps; a step
    on them writes the new token at the held position and rewinding puts them back."""
    import torch

    module = script_module()
    config = module.QUICK
    torch.manual_seed(0)
    for setting in ("csa", "hca"):
        layer = module.build_v4(config["v4"][setting], setting == "csa")(1024).eval()
        held = 256
        cache = module.fill_v4(layer, held)
        m, d = layer.compress_rate, layer.head_dim
        assert tuple(cache.window.shape) == (1, layer.window - 1, d)
        pool = cache.pools["compressor"]
        assert tuple(pool.entries.shape) == (1, held // m, d) and pool.count.tolist() == [held // m]
        read = cache.window.nbytes + pool.stream.nbytes
        if setting == "csa":
            index = cache.pools["indexer"]
            assert tuple(pool.stream.shape) == (1, 2 * m - 1, 4 * d)
            assert tuple(index.entries.shape) == (1, held // m, 16)
            read += index.entries.nbytes + index.stream.nbytes + layer.index_topk * d * 4
        else:
            assert tuple(pool.stream.shape) == (1, m - 1, 2 * d) and "indexer" not in cache.pools
            read += pool.entries.nbytes
        assert module.cache_read(setting, layer, held) == read
        x = torch.randn(1, 1, layer.W_kv.in_features)
        before = cache.filled
        with torch.no_grad():
            out = layer(x, cache=cache)
        assert out.shape == (1, 1, layer.out_proj.out_features) and cache.length == held + 1
        module.rewind_v4(cache, held)
        assert cache.length == held and cache.window is before[0] and cache.pools is before[1]


def test_the_quick_figure_fits_both_columns_and_its_legend_covers_no_line(quick):
    from llm_attention_site.benchmark_plots import compressed_decode_figure
    from llm_attention_site.figures import to_html
    from tests.test_figures import _legend_covers, _svgs

    report = json.loads(json.dumps(quick[0]))
    # a crossing inside the lengths, so that its dotted line and legend entry are drawn
    report["ratios"]["crossings"]["dsa_vs_mla"]["bytes"].update(lines_meet_at=180.0,
                                                                 a_grows_slower=True)
    for narrow, column_px in ((False, 686), (True, 328)):
        fig = compressed_decode_figure(report, narrow=narrow)
        labels = [t.get_text() for legend in fig.legends + [
            ax.get_legend() for ax in fig.axes if ax.get_legend()] for t in legend.get_texts()]
        assert any("fewer bytes" in label for label in labels), labels
        assert not _legend_covers(fig)
        html = to_html(fig, alt="compressed")
        width = float(re.search(r'width="([\d.]+)"', html).group(1))
        assert width <= column_px * 1.02, (narrow, width)
        for svg in _svgs(html):
            sizes = [float(v) for v in re.findall(r"font(?:-size)?: ([\d.]+)px", svg)]
            assert min(sizes) * 4 / 3 * min(1.0, column_px / width) >= 9, (narrow, min(sizes))


needs_full_run = pytest.mark.skipif(
    not COMMITTED.exists(),
    reason="no full run committed yet: benchmarks/compressed_decode_results.json comes from "
           "`python benchmarks/compressed_decode_benchmark.py` on a quiet machine")


def v32_latent_weights() -> int:
    """LatentAttention at DeepSeek-V3.2's widths, no biases, float32."""
    return 4 * (7168 * 1536 + 1536 + 1536 * 128 * 192 + 7168 * 576 + 512
                + 512 * 128 * 256 + 128 * 128 * 7168)


def full_weights() -> dict:
    latent = v32_latent_weights()
    indexer = 4 * (1536 * 64 * 128 + 7168 * 128 + 2 * 128 + 7168 * 64)
    # V4-Flash: query down + norm, query up, the shared head + norm, g = 8 groups of
    # 8 heads x 512 to 1,024 each, 8,192 to the width, 64 sinks
    shared = (4096 * 1024 + 1024 + 1024 * 64 * 512 + 4096 * 512 + 512
              + 4096 * 8 * 1024 + 8 * 1024 * 4096 + 64)
    csa = shared + (2 * 4096 * 2 * 512 + 4 * 2 * 512 + 512  # two series: values, gates
                    + 2 * 4096 * 2 * 128 + 4 * 2 * 128 + 128  # the indexer's entries
                    + 1024 * 64 * 128 + 4096 * 64)  # its queries and head weights
    hca = shared + 2 * 4096 * 512 + 128 * 512 + 512
    return {"mla": latent, "dsa": latent + indexer, "csa": 4 * csa, "hca": 4 * hca}


def full_cache_bytes(setting: str, h: int) -> int:
    numbers = {
        "mla": h * 576,
        "dsa": h * 128 + min(2048, h) * 576,
        "csa": 127 * 512 + h // 4 * 128 + min(512, h // 4) * 512 + 7 * 4 * (512 + 128),
        "hca": 127 * 512 + h // 128 * 512 + 127 * 2 * 512,
    }[setting]
    return numbers * 4


@needs_full_run
def test_committed_results_are_a_full_run_and_their_ratios_follow_from_the_rows():
    report = json.loads(COMMITTED.read_text())
    config, held = report["config"], report["config"]["held"]
    assert report["machine"]["quick"] is False and report["machine"]["threads"] == 1
    assert (config["d_model"], config["num_heads"], config["kv_lora_rank"],
            config["index_n_heads"], config["index_head_dim"], config["index_topk"]) == (
        7168, 128, 512, 64, 128, 2048)
    csa, hca = config["v4"]["csa"], config["v4"]["hca"]
    assert (csa["d_in"], csa["num_heads"], csa["head_dim"], csa["window"],
            csa["compress_rate"], csa["index_n_heads"], csa["index_head_dim"],
            csa["index_topk"], hca["compress_rate"]) == (4096, 64, 512, 128, 4, 64, 128, 512, 128)
    assert min(held) == 4096 and max(held) >= 262144
    rows = check_rows_follow(report, full_cache_bytes, full_weights())
    samples = report["bandwidth_samples"]  # before the first length and after each one
    assert len(samples) == len(held) + 1 and set(report["profiles"]) == set(SETTINGS)
    lines = {s: report["counts"][s]["lines"] for s in SETTINGS}
    assert {s: lines[s]["bytes"]["per_token"] for s in SETTINGS} == {
        "mla": 2304, "dsa": 512, "csa": 128, "hca": 16}
    assert {s: lines[s]["multiply_adds"]["per_token"] for s in SETTINGS} == {
        "mla": 128 * (576 + 512), "dsa": 64 * 129, "csa": 64 * 129 / 4, "hca": 64 * 1024 / 128}
    weights = full_weights()
    crossing = report["ratios"]["crossings"]["dsa_vs_mla"]["bytes"]["lines_meet_at"]
    assert crossing == pytest.approx(
        (weights["dsa"] - weights["mla"] + 2048 * 576 * 4) / ((576 - 128) * 4))
    assert 33_000 < crossing < 34_000  # the sparse decode benchmark's, the same layer
    assert rows  # every row checked above
