"""Decoding one token with multi-head, grouped-query and latent attention at DeepSeek-V3's widths,
against the memory bandwidth of the machine, measured in the same run.

The layers (float32, eval mode, batch 1, the fast path, model width 7,168, 128 query heads):

- ``mha``: ``ModernAttention`` with 128 key/value heads of width 128 (multi-head), a ``KVCache``;
- ``gqa``: the same with 8 key/value heads (Llama 3.1 405B's 8 of 128), a ``KVCache``;
- ``mla_plain``: ``LatentAttention`` at DeepSeek-V3's sizes (``q_lora_rank`` 1,536, latent 512,
  heads of 128 + 64 for scores and 128 for values), rebuilding every head's keys and values from
  the cached latents at each step;
- ``mla_absorbed``: the same layer and cache, attending in latent space (``absorb=True``).

For each number of tokens already held (1,024 to 8,192) the caches are filled with random
numbers (what they hold does not change the time), then one new token is decoded: its
projections, its rotation, attention over every held token, the output projection. The four are
timed in turns (``common.time_in_turns``), median kept; after each call the cache is put back to
the same length.

Bytes that a step must read: every weight of the layer once (each multiplies the new token) and
every cached number once. Divided by the time, that is the bandwidth the step achieved; the run
also measures the machine's own, on one thread: a copy of 1 GiB (read and write counted, as
STREAM does) and a sum over 1 GiB (read only). The larger of the two is the limit. A step far
below it spends its time computing, not reading: one profiled step per layer at the longest
length shows where.

One thread, as the other decode benchmarks (see ``decode_benchmark.py``).

Goals: the latent cache at most 1/10 of multi-head attention's bytes per token at the same head
count; absorbed decoding faster than plain at 8,192 tokens; each cached decode at 4,096 tokens or
more reaching half the measured bandwidth, or the profile says where the time goes.

Writes ``benchmarks/latent_decode_results.json``, ``benchmarks/latent_decode_benchmark.svg``
(the page draws the same plot at build from the results) and prints the table and the goals.

    python benchmarks/latent_decode_benchmark.py           # full run, a few minutes, ~6 GB
    python benchmarks/latent_decode_benchmark.py --quick   # tiny sizes, seconds
    python benchmarks/latent_decode_benchmark.py --replot  # redraw from the results file
"""

from __future__ import annotations

import json
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from common import (  # noqa: E402
    decode_parser, machine_info, measure_bandwidth, profile_step, save_site_figure,
    set_threads, time_in_turns,
)

from llm_attention.kv_cache import KVCache  # noqa: E402
from llm_attention.latent import LatentAttention, LatentCache  # noqa: E402
from llm_attention.modern import ModernAttention  # noqa: E402

SETTINGS = ("mha", "gqa", "mla_plain", "mla_absorbed")
LABELS = {
    "mha": "multi-head (128 kv heads)",
    "gqa": "grouped-query (8 kv heads)",
    "mla_plain": "latent, plain",
    "mla_absorbed": "latent, absorbed",
}
FULL = dict(d_model=7168, num_heads=128, head_dim=128, gqa_kv_heads=8, q_lora_rank=1536,
            kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128,
            held=[1024, 2048, 4096, 8192], rounds=3, min_run_time=0.5, bandwidth_mib=1024)
QUICK = dict(d_model=128, num_heads=8, head_dim=16, gqa_kv_heads=2, q_lora_rank=32,
             kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16,
             held=[32, 64], rounds=1, min_run_time=0.001, bandwidth_mib=16)
BYTES = 4  # float32


def build(setting: str, config: dict, context_length: int):
    torch.manual_seed(0)
    d, heads = config["d_model"], config["num_heads"]
    if setting in ("mha", "gqa"):
        kv_heads = heads if setting == "mha" else config["gqa_kv_heads"]
        layer = ModernAttention(d, d, context_length, 0.0, heads, kv_heads,
                                head_dim=config["head_dim"], fast_path=True)
    else:
        layer = LatentAttention(
            d, d, context_length, 0.0, heads, q_lora_rank=config["q_lora_rank"],
            kv_lora_rank=config["kv_lora_rank"], qk_nope_head_dim=config["qk_nope_head_dim"],
            qk_rope_head_dim=config["qk_rope_head_dim"], v_head_dim=config["v_head_dim"],
            fast_path=True,
        )
    return layer.eval()


def filled_cache(layer, held: int):
    """A cache of ``layer`` holding ``held`` random tokens, with room for one more."""
    if isinstance(layer, LatentAttention):
        cache = LatentCache(1, layer.kv_lora_rank, layer.qk_rope_head_dim, held + 1)
        cache.append(torch.randn(1, held, layer.kv_lora_rank),
                     torch.randn(1, held, layer.qk_rope_head_dim))
        return cache
    cache = KVCache(1, layer.num_kv_heads, layer.head_dim, held + 1)
    shape = (1, layer.num_kv_heads, held, layer.head_dim)
    cache.append(torch.randn(shape), torch.randn(shape))
    return cache


def cache_bytes_per_token(layer) -> int:
    if isinstance(layer, LatentAttention):
        return (layer.kv_lora_rank + layer.qk_rope_head_dim) * BYTES
    return 2 * layer.num_kv_heads * layer.head_dim * BYTES


def weight_bytes(layer) -> int:
    return sum(p.numel() * p.element_size() for p in layer.parameters())


def decode_step(layer, cache, x, held, absorb=None):
    def step():
        if absorb is not None:
            layer.absorb = absorb
        with torch.no_grad():
            layer(x, cache=cache)
        cache.length = held  # back to the same position for the next call

    return step


def run(config: dict) -> dict:
    context_length = max(config["held"]) + 1
    mla = build("mla_plain", config, context_length)
    layers = {"mha": build("mha", config, context_length),
              "gqa": build("gqa", config, context_length),
              "mla_plain": mla, "mla_absorbed": mla}
    x = torch.randn(1, 1, config["d_model"])  # (B, T, d_in): the new token
    rows, profiles = [], {}
    for i, held in enumerate(config["held"], 1):
        print(f"[{i}/{len(config['held'])}] {held} tokens held", file=sys.stderr, flush=True)
        caches = {"mha": filled_cache(layers["mha"], held),
                  "gqa": filled_cache(layers["gqa"], held)}
        caches["mla_plain"] = caches["mla_absorbed"] = filled_cache(mla, held)
        steps = {
            s: decode_step(layers[s], caches[s], x, held,
                           absorb=None if s in ("mha", "gqa") else s == "mla_absorbed")
            for s in SETTINGS
        }
        timings = time_in_turns(steps, config["rounds"], config["min_run_time"])
        for s in SETTINGS:
            per_token = cache_bytes_per_token(layers[s])
            read = weight_bytes(layers[s]) + held * per_token
            rows.append({"setting": s, "held": held, "cache_bytes_per_token": per_token,
                         "weight_bytes": weight_bytes(layers[s]), "bytes_read": read,
                         **timings[s]})
        if held == max(config["held"]):
            profiles = {s: profile_step(steps[s]) for s in SETTINGS}
        del caches, steps
    return {"rows": rows, "profiles": profiles}


def ratios(report: dict) -> dict:
    rows = {(r["setting"], r["held"]): r for r in report["results"]}
    held = report["config"]["held"]
    last = max(held)
    limit = max(report["bandwidth"]["copy_bytes_per_s"], report["bandwidth"]["read_bytes_per_s"])
    fractions = {
        f"{s}@{h}": rows[s, h]["bytes_read"] / rows[s, h]["median_s"] / limit
        for s in SETTINGS for h in held
    }
    cache_ratio = (rows["mla_absorbed", last]["cache_bytes_per_token"]
                   / rows["mha", last]["cache_bytes_per_token"])
    speedup = rows["mla_plain", last]["median_s"] / rows["mla_absorbed", last]["median_s"]
    long = [h for h in held if h >= 4096] or [last]
    below_half = sorted({s for s in SETTINGS for h in long if fractions[f"{s}@{h}"] < 0.5})
    return {
        "bandwidth_limit_bytes_per_s": limit,
        "fraction_of_bandwidth": fractions,
        "mla_cache_vs_mha": cache_ratio,
        "absorbed_speedup_over_plain": speedup,
        "below_half_bandwidth_at_4096_or_more": below_half,
        "goals": {
            "mla_cache_at_most_1/10_of_mha": cache_ratio <= 0.1,
            "absorbed_faster_than_plain_at_longest": speedup > 1,
            "every_variant_at_least_half_bandwidth": not below_half,
        },
    }


def plot(report: dict, path: pathlib.Path) -> None:
    """Save the wide figure the page draws at build (``benchmark_plots.latent_decode_figure``)."""
    save_site_figure(report, path, "latent_decode_figure")


def main(argv=None) -> None:
    parser = decode_parser(__doc__, "latent_decode")
    args = parser.parse_args(argv)
    if args.replot:
        plot(json.loads(args.results.read_text()), args.plot)
        return
    set_threads(parser, args.threads)
    config = QUICK if args.quick else FULL
    bandwidth = measure_bandwidth(config["bandwidth_mib"])
    measured = run(config)
    report = {"machine": machine_info(quick=args.quick), "config": config,
              "bandwidth": bandwidth, "results": measured["rows"],
              "profiles": measured["profiles"]}
    report["ratios"] = ratios(report)
    args.results.write_text(json.dumps(report, indent=1) + "\n")
    plot(report, args.plot)
    limit = report["ratios"]["bandwidth_limit_bytes_per_s"]
    print(f"bandwidth: copy {bandwidth['copy_bytes_per_s'] / 1e9:.1f} GB/s, "
          f"read {bandwidth['read_bytes_per_s'] / 1e9:.1f} GB/s")
    print(f"{'setting':<28}{'held':>6}{'ms/token':>10}{'MB read':>9}{'of limit':>9}")
    for r in report["results"]:
        achieved = r["bytes_read"] / r["median_s"]
        print(f"{LABELS[r['setting']]:<28}{r['held']:>6}{r['median_s'] * 1e3:>10.1f}"
              f"{r['bytes_read'] / 1e6:>9.0f}{achieved / limit:>9.2f}")
    for s, ops in report["profiles"].items():
        print(s, ", ".join(f"{o['op']} {o['share']:.0%}" for o in ops))
    print(json.dumps({k: v for k, v in report["ratios"].items()
                      if k != "fraction_of_bandwidth"}, indent=1))


if __name__ == "__main__":
    main()
