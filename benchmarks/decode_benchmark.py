"""Decoding with multi-head, grouped-query, multi-query and sliding-window attention: the time
to decode one token and the memory of the KV cache, against the number of tokens held.

The layer: one ``ModernAttention`` at a 2026-typical width, that of Llama 3 8B (model width
4,096, 32 query heads of width 128, rotary positions), float32, eval mode, batch 1, the fast
path. Four settings of the same layer:

- ``mha``: 32 key/value heads (multi-head attention), a ``KVCache``;
- ``gqa``: 4 key/value heads, 8 query heads per key/value head (Llama 3 8B has 8), a ``KVCache``;
- ``mqa``: 1 key/value head (multi-query attention), a ``KVCache``;
- ``window``: ``gqa`` with a sliding window of 1,024 tokens, a ``RollingKVCache``.

For each number of tokens already held (512 to 4,096), the cache is filled with random keys and
values (what they hold does not change the time), then one new token is decoded: its
projections, its rotation, attention over every held key, the output projection. The four
settings are timed in turns (``common.time_in_turns``) and the median kept. After each timed call
the cache is put back to the same length, so every call decodes at the same position.

One thread by default: decoding one token of one sequence is a string of small operations, and
on a small shared machine a second thread mostly waits for a core that someone else is using
(measured here: a tiny decoding step took 0.2 ms on one thread and 4 to 8 ms on two).

Cache memory is the bytes of the key and value tensors of the cache: a ``KVCache``
preallocated for exactly the held tokens and the new one, a ``RollingKVCache`` for its window.
It is reported for one layer; a model multiplies it by its number of layers.

Goals: the GQA cache at most 1/8 of the MHA cache; the window's cache flat beyond 1,024 tokens;
decoding a token with GQA no slower than with MHA (at 4,096 tokens held).

Writes ``benchmarks/decode_results.json`` (machine, threads, versions) and
``benchmarks/decode_benchmark.svg`` (the page draws the same plot at build, from the
results file), and prints a table and the ratios against the goals.

    python benchmarks/decode_benchmark.py            # full run, about a minute on 2 cores
    python benchmarks/decode_benchmark.py --quick    # tiny sizes, seconds: checks the script
    python benchmarks/decode_benchmark.py --replot   # redraw the plot from the results file
"""

from __future__ import annotations

import json
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from common import (  # noqa: E402
    decode_parser, machine_info, save_site_figure, set_threads, time_in_turns,
)

from llm_attention.modern import ModernAttention  # noqa: E402

SETTINGS = ("mha", "gqa", "mqa", "window")
LABELS = {
    "mha": "multi-head (32 kv heads)",
    "gqa": "grouped-query (4 kv heads)",
    "mqa": "multi-query (1 kv head)",
    "window": "grouped-query + window 1,024",
}
FULL = dict(d_model=4096, num_heads=32, head_dim=128, window=1024,
            held=[512, 1024, 2048, 4096], rounds=5, min_run_time=0.2)
QUICK = dict(d_model=256, num_heads=16, head_dim=16, window=64,
             held=[32, 64, 128], rounds=2, min_run_time=0.001)


def build(setting: str, config: dict, context_length: int) -> ModernAttention:
    heads = config["num_heads"]
    kv_heads = {"mha": heads, "gqa": heads // 8, "mqa": 1, "window": heads // 8}[setting]
    torch.manual_seed(0)
    layer = ModernAttention(
        config["d_model"], config["d_model"], context_length, 0.0, heads, kv_heads,
        head_dim=config["head_dim"], rope_base=500_000.0, fast_path=True,
        window=config["window"] if setting == "window" else None,
    )
    return layer.eval()


def filled_cache(layer: ModernAttention, held: int):
    """A cache of ``layer`` holding ``held`` random tokens (``KVCache`` preallocated for
    ``held + 1``, or the layer's ``RollingKVCache``)."""
    if layer.window is None:
        from llm_attention.kv_cache import KVCache

        cache = KVCache(1, layer.num_kv_heads, layer.head_dim, held + 1)
    else:
        cache = layer.make_cache(1)
    shape = (1, layer.num_kv_heads, held, layer.head_dim)
    cache.append(torch.randn(shape), torch.randn(shape))
    return cache


def run(config: dict) -> dict:
    context_length = max(config["held"]) + 1
    layers = {s: build(s, config, context_length) for s in SETTINGS}
    x = torch.randn(1, 1, config["d_model"])  # (B, T, d_in): the new token
    rows = []
    total = len(config["held"])
    for i, held in enumerate(config["held"], 1):
        print(f"[{i}/{total}] {held} tokens held", file=sys.stderr, flush=True)
        caches = {s: filled_cache(layers[s], held) for s in SETTINGS}
        memory = {s: caches[s].keys.nbytes + caches[s].values.nbytes for s in SETTINGS}

        def decode(setting):
            layer, cache = layers[setting], caches[setting]

            def step():
                with torch.no_grad():
                    layer(x, cache=cache)
                cache.length = held  # back to the same position for the next call
                if hasattr(cache, "held"):
                    cache.held = min(held, cache.window)

            return step

        timings = time_in_turns({s: decode(s) for s in SETTINGS}, config["rounds"],
                                config["min_run_time"])
        for s in SETTINGS:
            rows.append({"setting": s, "held": held, "cache_bytes": memory[s],
                         **timings[s]})
    return {"rows": rows}


def ratios(report: dict) -> dict:
    rows = {(r["setting"], r["held"]): r for r in report["results"]}
    held = report["config"]["held"]
    last, window = max(held), report["config"]["window"]
    beyond = [h for h in held if h >= window]
    flat = {rows[("window", h)]["cache_bytes"] for h in beyond}
    gqa_memory = rows[("gqa", last)]["cache_bytes"] / rows[("mha", last)]["cache_bytes"]
    gqa_time = rows[("gqa", last)]["median_s"] / rows[("mha", last)]["median_s"]
    return {
        "gqa_cache_vs_mha": gqa_memory,
        "mqa_cache_vs_mha": rows[("mqa", last)]["cache_bytes"]
        / rows[("mha", last)]["cache_bytes"],
        "window_cache_bytes_beyond_window": sorted(flat),
        "gqa_time_vs_mha": gqa_time,
        "mqa_time_vs_mha": rows[("mqa", last)]["median_s"] / rows[("mha", last)]["median_s"],
        "window_time_vs_gqa": rows[("window", last)]["median_s"]
        / rows[("gqa", last)]["median_s"],
        "goals": {
            "gqa_cache_at_most_1/8_of_mha": gqa_memory <= 1 / 8,
            "window_cache_flat_beyond_window": len(flat) == 1,
            "gqa_no_slower_than_mha": gqa_time <= 1.0,
        },
    }


def plot(report: dict, path: pathlib.Path) -> None:
    """Save the wide figure the page draws at build (``benchmark_plots.decode_figure``)."""
    save_site_figure(report, path, "decode_figure")


def main(argv=None) -> None:
    parser = decode_parser(
        __doc__, "decode", threads_help="torch threads (default 1: see the module docstring)"
    )
    args = parser.parse_args(argv)
    if args.replot:
        plot(json.loads(args.results.read_text()), args.plot)
        return
    set_threads(parser, args.threads)
    config = QUICK if args.quick else FULL
    report = {"machine": machine_info(quick=args.quick), "config": config,
              "results": run(config)["rows"]}
    report["ratios"] = ratios(report)
    args.results.write_text(json.dumps(report, indent=1) + "\n")
    plot(report, args.plot)
    print(f"{'setting':<32}{'held':>6}{'ms/token':>10}{'cache MiB':>11}")
    for r in report["results"]:
        print(f"{LABELS[r['setting']]:<32}{r['held']:>6}{r['median_s'] * 1e3:>10.3f}"
              f"{r['cache_bytes'] / 2**20:>11.2f}")
    print(json.dumps(report["ratios"], indent=1))


if __name__ == "__main__":
    main()
