"""Decoding with multi-head, grouped-query, multi-query and sliding-window attention: the time
to decode one token and the memory of the KV cache, against the number of tokens held.

The layer: one ``ModernAttention`` at a 2026-typical width, Llama 3.1 8B's as published (the
family table: model width 4,096, 32 query heads of width 128, rotary positions), float32, eval
mode, batch 1, the fast path. Four settings of the same layer:

- ``mha``: 32 key/value heads (multi-head attention), a ``KVCache``;
- ``gqa``: 4 key/value heads, 8 query heads per key/value head (Llama 3 8B has 8), a ``KVCache``;
- ``mqa``: 1 key/value head (multi-query attention), a ``KVCache``;
- ``window``: ``gqa`` with a sliding window of 1,024 tokens, a ``RollingKVCache``.

For each number of tokens already held (512 to 4,096), one new token is decoded: its
projections, its rotation, attention over every held key, the output projection. The driver
(``decode.py``) fills the caches with random keys and values, times the four settings in turns,
one length at a time, puts each cache back to the same length after each call, and measures
the machine's bandwidth in the same run.

One thread by default: decoding one token of one sequence is a string of small operations, and
on a small shared machine a second thread mostly waits for a core that someone else is using
(measured here: a tiny decoding step took 0.2 ms on one thread and 4 to 8 ms on two).

Cache memory is the bytes of the key and value tensors of the cache: a ``KVCache``
preallocated for exactly the held tokens and the new one, a ``RollingKVCache`` for its window.
It is reported for one layer; a model multiplies it by its number of layers.

Goals: the GQA cache at most 1/8 of the MHA cache; the window's cache flat beyond 1,024 tokens;
decoding a token with GQA no slower than with MHA (at 4,096 tokens held).

The driver (``decode.py``) writes ``benchmarks/decode_results.json`` and the figure the page
draws from it, ``benchmarks/decode_benchmark.svg``; ``--quick`` checks the script in seconds.
"""

from __future__ import annotations

import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from decode import Setting, run_script, widths  # noqa: E402

from llm_attention.kv_cache import KVCache  # noqa: E402
from llm_attention.modern import ModernAttention  # noqa: E402
from llm_attention_site.benchmark_plots import DECODE_SETTINGS  # noqa: E402
from llm_attention_site.families import PUBLISHED  # noqa: E402

LABELS = {setting: spec[0] for setting, spec in DECODE_SETTINGS.items()}  # the figure's
SETTINGS = tuple(LABELS)
LLAMA = PUBLISHED["Llama 3.1 8B"][1]


def sizes(shrink: int) -> dict:
    """Llama 3.1 8B's width and heads as published, widths divided by ``shrink``."""
    heads = LLAMA["num_attention_heads"]
    return dict(widths(LLAMA, shrink, dict(d_model="hidden_size")), num_heads=heads,
                head_dim=LLAMA["hidden_size"] // heads // shrink)


FULL = dict(sizes(1), window=1024, held=[512, 1024, 2048, 4096], rounds=5, min_run_time=0.2,
            bandwidth_mib=1024)
QUICK = dict(sizes(8), window=64, held=[32, 64, 128], rounds=2, min_run_time=0.001,
             bandwidth_mib=16)


def layer(config: dict, setting: str):
    heads = config["num_heads"]
    kv_heads = {"mha": heads, "gqa": heads // 8, "mqa": 1, "window": heads // 8}[setting]
    return lambda context_length: ModernAttention(
        config["d_model"], config["d_model"], context_length, 0.0, heads, kv_heads,
        head_dim=config["head_dim"], rope_base=LLAMA["rope_theta"], fast_path=True,
        window=config["window"] if setting == "window" else None,
    )


def fill(layer: ModernAttention, held: int):
    """A cache of ``layer`` holding ``held`` random tokens (``KVCache`` preallocated for
    ``held + 1``, or the layer's ``RollingKVCache``)."""
    if layer.window is None:
        cache = KVCache(1, layer.num_kv_heads, layer.head_dim, held + 1)
    else:
        cache = layer.make_cache(1)
    shape = (1, layer.num_kv_heads, held, layer.head_dim)
    cache.append(torch.randn(shape), torch.randn(shape))
    return cache


def memory(layer, cache, held: int) -> int:
    """The bytes of the cache's key and value tensors: preallocated for the held tokens and
    the new one, or a rolling cache's window."""
    return cache.keys.nbytes + cache.values.nbytes


def rewind(cache, held: int) -> None:
    cache.length = held  # back to the same position for the next call
    if hasattr(cache, "held"):
        cache.held = min(held, cache.window)


def settings(config: dict) -> dict:
    return {s: Setting(LABELS[s], layer(config, s), fill, memory, rewind=rewind)
            for s in SETTINGS}


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


def main(argv=None) -> dict:
    return run_script(argv, doc=__doc__, stem="decode", full=FULL, quick=QUICK,
                      settings=settings, ratios=ratios, figure="decode_figure", labels=LABELS,
                      by_length=True,
                      threads_help="torch threads (default 1: see the module docstring)")


if __name__ == "__main__":
    main()
