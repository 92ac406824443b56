"""Decoding one token with sparse latent attention (DeepSeek-V3.2's indexer and top-k) against
dense latent attention, one layer at DeepSeek-V3.2's widths, against the memory bandwidth of the
machine measured in the same run.

One ``SparseLatentAttention`` (float32, eval mode, batch 1, the fast path, model width 7,168,
128 heads, latent 512 + 64, 64 indexer heads of 128, top-k 2,048) and one cache serve the three
settings:

- ``dense``: ``LatentAttention``'s own forward on the same weights and the same latent cache
  (absorbed: the way latent attention decodes), every held token attended to;
- ``sparse_masked``: the indexer picks 2,048 tokens, then attention runs over all held tokens
  with the others masked (the reference's form; absorbed);
- ``sparse_gathered``: the indexer picks 2,048 tokens and attention runs over those alone.

For each number of tokens held (4,096 to 65,536) the cache is filled with random numbers, then
one new token is decoded; the settings are timed in turns (``common.time_in_turns``: median and
spread over blocks), and the cache is put back to the same length after each call.

Bytes a step must read: every weight it uses once (the indexer's too, for the sparse settings),
and the cache numbers it reads: every latent row (dense, masked), every indexer key (sparse),
the 2,048 chosen rows (gathered). Divided by the time, that is the bandwidth achieved; the run
measures the machine's own on one thread (``common.measure_bandwidth``) before the first length
and after each one, and keeps the best: on a shared machine one measurement can fall far below
what the steps then get.

The byte counts predict where the gathered form starts to win. Per held token it reads an
indexer key of 128 numbers instead of a latent row of 576, but it adds the indexer's weights
and the 2,048 rows it gathers: the totals cross at about 33,800 tokens at batch 1. Goal: the
gathered form faster than the dense one at every held length from that one (the grid's next).
The run also prints the length from which it was faster at every longer length, and where
each step's time goes (a profile at the longest length).

Writes ``benchmarks/sparse_decode_results.json``, ``benchmarks/sparse_decode_benchmark.svg``
(the page draws the same plot at build from the results) and prints the table and the goal.

    python benchmarks/sparse_decode_benchmark.py           # full run, a few minutes, ~2 GB
    python benchmarks/sparse_decode_benchmark.py --quick   # tiny sizes, seconds
    python benchmarks/sparse_decode_benchmark.py --replot  # redraw from the results file
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

from llm_attention.latent import LatentAttention  # noqa: E402
from llm_attention.sparse_latent import SparseLatentAttention  # noqa: E402

SETTINGS = ("dense", "sparse_masked", "sparse_gathered")
LABELS = {
    "dense": "dense latent",
    "sparse_masked": "sparse, masked",
    "sparse_gathered": "sparse, gathered",
}
FULL = dict(d_model=7168, num_heads=128, q_lora_rank=1536, kv_lora_rank=512,
            qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128, index_n_heads=64,
            index_head_dim=128, index_topk=2048, held=[4096, 8192, 16384, 32768, 65536],
            rounds=5, min_run_time=0.4, bandwidth_mib=1024)
QUICK = dict(d_model=128, num_heads=8, q_lora_rank=32, kv_lora_rank=32, qk_nope_head_dim=16,
             qk_rope_head_dim=8, v_head_dim=16, index_n_heads=4, index_head_dim=16,
             index_topk=16, held=[32, 64], rounds=1, min_run_time=0.001, bandwidth_mib=16)
BYTES = 4  # float32


def build(config: dict, context_length: int) -> SparseLatentAttention:
    torch.manual_seed(0)
    sizes = {k: config[k] for k in ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim",
                                    "qk_rope_head_dim", "v_head_dim", "index_n_heads",
                                    "index_head_dim", "index_topk")}
    layer = SparseLatentAttention(config["d_model"], config["d_model"], context_length, 0.0,
                                  config["num_heads"], absorb=True, fast_path=True, **sizes)
    return layer.eval()


def filled_cache(layer, held: int):
    """A cache of ``layer`` holding ``held`` random tokens, with room for one more."""
    cache = layer.make_cache(1)
    cache.append(torch.randn(1, held, layer.kv_lora_rank),
                 torch.randn(1, held, layer.qk_rope_head_dim),
                 torch.randn(1, held, layer.indexer.head_dim))
    return cache


def weight_bytes(module) -> int:
    return sum(p.numel() * p.element_size() for p in module.parameters())


def bytes_read(layer, setting: str, held: int) -> int:
    """Weights used once, and the cache numbers the step reads (float32)."""
    indexer = weight_bytes(layer.indexer)
    latent = weight_bytes(layer) - indexer  # the weights of LatentAttention
    row = (layer.kv_lora_rank + layer.qk_rope_head_dim) * BYTES  # one latent row
    key = layer.indexer.head_dim * BYTES  # one indexer key
    if setting == "dense":
        return latent + held * row
    if setting == "sparse_masked":
        return latent + indexer + held * (row + key)
    return latent + indexer + held * key + min(layer.index_topk, held) * row


def crossovers(layer) -> dict:
    """Held lengths at which the gathered form reads as many bytes as the dense one: with
    every byte counted (batch 1), and with the cache alone (weights shared by a batch)."""
    row = (layer.kv_lora_rank + layer.qk_rope_head_dim) * BYTES
    saved_per_token = row - layer.indexer.head_dim * BYTES  # latent row -> indexer key
    fixed = weight_bytes(layer.indexer) + layer.index_topk * row
    return {"total_bytes": fixed / saved_per_token,
            "cache_bytes": layer.index_topk * row / saved_per_token}


def decode_step(layer, cache, x, held, setting):
    def step():
        with torch.no_grad():
            if setting == "dense":  # the same layer's latent attention, every token
                LatentAttention.forward(layer, x, cache=cache.latent)
            else:
                layer.gathered = setting == "sparse_gathered"
                layer(x, cache=cache)
        cache.latent.length = held  # back to the same position for the next call

    return step


def run(config: dict, between=lambda: None) -> dict:
    """Time the settings at each length; ``between()`` runs after each length."""
    layer = build(config, max(config["held"]) + 1)
    x = torch.randn(1, 1, config["d_model"])  # (B, T, d_in): the new token
    rows, profiles = [], {}
    for i, held in enumerate(config["held"], 1):
        print(f"[{i}/{len(config['held'])}] {held} tokens held", file=sys.stderr, flush=True)
        cache = filled_cache(layer, held)
        steps = {s: decode_step(layer, cache, x, held, s) for s in SETTINGS}
        timings = time_in_turns(steps, config["rounds"], config["min_run_time"])
        for s in SETTINGS:
            rows.append({"setting": s, "held": held, "bytes_read": bytes_read(layer, s, held),
                         **timings[s]})
        if held == max(config["held"]):
            profiles = {s: profile_step(steps[s]) for s in SETTINGS}
        del cache, steps
        between()
    return {"rows": rows, "profiles": profiles, "crossover": crossovers(layer),
            "weight_bytes": {"latent": weight_bytes(layer) - weight_bytes(layer.indexer),
                             "indexer": weight_bytes(layer.indexer)}}


def ratios(report: dict) -> dict:
    """Speed-ups, shares of the bandwidth and the goal, from the rows alone."""
    rows = {(r["setting"], r["held"]): r for r in report["results"]}
    held = report["config"]["held"]
    limit = max(report["bandwidth"]["copy_bytes_per_s"], report["bandwidth"]["read_bytes_per_s"])
    fractions = {f"{s}@{h}": rows[s, h]["bytes_read"] / rows[s, h]["median_s"] / limit
                 for s in SETTINGS for h in held}
    speedup = {str(h): rows["dense", h]["median_s"] / rows["sparse_gathered", h]["median_s"]
               for h in held}
    predicted = report["crossover"]["total_bytes"]
    predicted_from = min((h for h in held if h >= predicted), default=None)
    faster_from = None  # the shortest length from which gathered wins at every longer one
    for h in sorted(held, reverse=True):
        if speedup[str(h)] <= 1:
            break
        faster_from = h
    checked = [h for h in held if predicted_from is not None and h >= predicted_from]
    return {
        "bandwidth_limit_bytes_per_s": limit,
        "fraction_of_bandwidth": fractions,
        "gathered_speedup_over_dense": speedup,
        "predicted_crossover_held": predicted,
        "predicted_from_held": predicted_from,
        "gathered_faster_from_held": faster_from,
        "goals": {
            "gathered_faster_from_predicted": bool(checked)
            and all(speedup[str(h)] > 1 for h in checked),
        },
    }


def plot(report: dict, path: pathlib.Path) -> None:
    """Save the wide figure the page draws at build (``benchmark_plots.sparse_decode_figure``)."""
    save_site_figure(report, path, "sparse_decode_figure")


def main(argv=None) -> None:
    parser = decode_parser(__doc__, "sparse_decode")
    args = parser.parse_args(argv)
    if args.replot:
        plot(json.loads(args.results.read_text()), args.plot)
        return
    set_threads(parser, args.threads)
    config = QUICK if args.quick else FULL
    samples = [measure_bandwidth(config["bandwidth_mib"])]
    measured = run(config, lambda: samples.append(measure_bandwidth(config["bandwidth_mib"])))
    bandwidth = {key: max(sample[key] for sample in samples) for key in samples[0]}
    report = {"machine": machine_info(quick=args.quick), "config": config,
              "bandwidth": bandwidth, "bandwidth_samples": samples, "results": measured["rows"],
              "profiles": measured["profiles"], "crossover": measured["crossover"],
              "weight_bytes": measured["weight_bytes"]}
    report["ratios"] = ratios(report)
    args.results.write_text(json.dumps(report, indent=1) + "\n")
    plot(report, args.plot)
    r, limit = report["ratios"], report["ratios"]["bandwidth_limit_bytes_per_s"]
    print(f"bandwidth: copy {bandwidth['copy_bytes_per_s'] / 1e9:.1f} GB/s, "
          f"read {bandwidth['read_bytes_per_s'] / 1e9:.1f} GB/s")
    print(f"{'setting':<18}{'held':>7}{'ms/token':>10}{'spread':>8}{'MB read':>9}{'of limit':>9}")
    for row in report["results"]:
        achieved = row["bytes_read"] / row["median_s"]
        print(f"{LABELS[row['setting']]:<18}{row['held']:>7}{row['median_s'] * 1e3:>10.1f}"
              f"{row['iqr_s'] * 1e3:>8.1f}{row['bytes_read'] / 1e6:>9.0f}"
              f"{achieved / limit:>9.2f}")
    for s, ops in report["profiles"].items():
        print(s, ", ".join(f"{o['op']} {o['share']:.0%}" for o in ops))
    print(f"bytes predict the gathered form faster from {r['predicted_crossover_held']:,.0f} "
          f"held (cache alone: {report['crossover']['cache_bytes']:,.0f}); measured: faster "
          f"from {r['gathered_faster_from_held']} on")
    print(json.dumps({k: v for k, v in r.items() if k != "fraction_of_bandwidth"}, indent=1))


if __name__ == "__main__":
    main()
