"""Decoding one token with multi-head, grouped-query and latent attention at DeepSeek-V3's widths,
against the memory bandwidth of the machine, measured in the same run.

The layers (float32, eval mode, batch 1, the fast path, at DeepSeek-V3's published widths read
from the family table: model width 7,168, 128 query heads):

- ``mha``: ``ModernAttention`` with 128 key/value heads of width 128 (multi-head), a ``KVCache``;
- ``gqa``: the same with 8 key/value heads (Llama 3.1 405B's 8 of 128), a ``KVCache``;
- ``mla_plain``: ``LatentAttention`` at DeepSeek-V3's sizes (``q_lora_rank`` 1,536, latent 512,
  heads of 128 + 64 for scores and 128 for values), rebuilding every head's keys and values from
  the cached latents at each step;
- ``mla_absorbed``: the same layer and cache, attending in latent space (``absorb=True``).

For each number of tokens already held (1,024 to 8,192) one new token is decoded: its
projections, its rotation, attention over every held token, the output projection. The driver
(``decode.py``) fills the caches, times the four in turns, one length at a time, measures the
machine's bandwidth and profiles one step per layer at the longest length.

Bytes that a step must read: every weight of the layer once (each multiplies the new token) and
every cached number once. Divided by the time, that is the bandwidth the step achieved; the
limit is the larger of a copy of 1 GiB (read and write counted, as STREAM does) and a sum over
1 GiB (read only), on one thread. A step far below it spends its time computing, not reading:
the profile shows where.

One thread, as the other decode benchmarks (see ``decode_benchmark.py``).

Goals: the latent cache at most 1/10 of multi-head attention's bytes per token at the same head
count; absorbed decoding faster than plain at 8,192 tokens; each cached decode at 4,096 tokens or
more reaching half the measured bandwidth, or the profile says where the time goes.

The driver (``decode.py``) writes ``benchmarks/latent_decode_results.json`` and the figure the page
draws from it, ``benchmarks/latent_decode_benchmark.svg``; ``--quick`` checks the script in seconds.
"""

from __future__ import annotations

import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from decode import Setting, run_script, shares_of_bandwidth, widths  # noqa: E402

from llm_attention.kv_cache import KVCache  # noqa: E402
from llm_attention.latent import LatentAttention, LatentCache  # noqa: E402
from llm_attention.modern import ModernAttention  # noqa: E402
from llm_attention_site.benchmark_plots import LATENT_SETTINGS  # noqa: E402
from llm_attention_site.families import DEEPSEEK_V3, PUBLISHED  # noqa: E402

LABELS = {setting: spec[0] for setting, spec in LATENT_SETTINGS.items()}  # the figure's
SETTINGS = tuple(LABELS)
BYTES = 4  # float32


def sizes(shrink: int) -> dict:
    """DeepSeek-V3's published widths (the family table), divided by ``shrink``; grouped-query
    attention with Llama 3.1 405B's 8 key/value heads of 128 query heads."""
    same = ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
    found = widths(DEEPSEEK_V3[1], shrink, dict(
        d_model="hidden_size", num_heads="num_attention_heads", head_dim="v_head_dim",
        **{name: name for name in same}))
    found["gqa_kv_heads"] = max(1, PUBLISHED["Llama 3.1 405B"][1]["num_key_value_heads"]
                                // shrink)
    return found


FULL = dict(sizes(1), held=[1024, 2048, 4096, 8192], rounds=3, min_run_time=0.5,
            bandwidth_mib=1024)
QUICK = dict(sizes(8), held=[32, 64], rounds=1, min_run_time=0.001, bandwidth_mib=16)


def grouped(config: dict, kv_heads: int):
    d = config["d_model"]
    return lambda context_length: ModernAttention(
        d, d, context_length, 0.0, config["num_heads"], kv_heads, head_dim=config["head_dim"],
        fast_path=True)


def latent(config: dict):
    keys = ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
    return lambda context_length: LatentAttention(
        config["d_model"], config["d_model"], context_length, 0.0, config["num_heads"],
        fast_path=True, **{k: config[k] for k in keys})


def fill_kv(layer, held: int) -> KVCache:
    cache = KVCache(1, layer.num_kv_heads, layer.head_dim, held + 1)
    shape = (1, layer.num_kv_heads, held, layer.head_dim)
    cache.append(torch.randn(shape), torch.randn(shape))
    return cache


def fill_latent(layer, held: int) -> LatentCache:
    cache = LatentCache(1, layer.kv_lora_rank, layer.qk_rope_head_dim, held + 1)
    cache.append(torch.randn(1, held, layer.kv_lora_rank),
                 torch.randn(1, held, layer.qk_rope_head_dim))
    return cache


def cache_bytes_per_token(layer) -> int:
    if isinstance(layer, LatentAttention):
        return (layer.kv_lora_rank + layer.qk_rope_head_dim) * BYTES
    return 2 * layer.num_kv_heads * layer.head_dim * BYTES


def held_bytes(layer, cache, held: int) -> int:
    return held * cache_bytes_per_token(layer)


def latent_step(absorb: bool):
    def step(layer, x, cache):
        layer.absorb = absorb
        layer(x, cache=cache)

    return step


def settings(config: dict) -> dict:
    def per_token(layer) -> dict:
        return {"cache_bytes_per_token": cache_bytes_per_token(layer)}

    mha, gqa = grouped(config, config["num_heads"]), grouped(config, config["gqa_kv_heads"])
    return {
        "mha": Setting(LABELS["mha"], mha, fill_kv, held_bytes, fields=per_token),
        "gqa": Setting(LABELS["gqa"], gqa, fill_kv, held_bytes, fields=per_token),
        "mla_plain": Setting(LABELS["mla_plain"], latent(config), fill_latent, held_bytes,
                             step=latent_step(False), fields=per_token),
        "mla_absorbed": Setting(LABELS["mla_absorbed"], latent(config), fill_latent,
                                held_bytes, step=latent_step(True), shares_layer="mla_plain",
                                fields=per_token),
    }


def ratios(report: dict) -> dict:
    rows = {(r["setting"], r["held"]): r for r in report["results"]}
    held = report["config"]["held"]
    last = max(held)
    fractions = shares_of_bandwidth(report)
    cache_ratio = (rows["mla_absorbed", last]["cache_bytes_per_token"]
                   / rows["mha", last]["cache_bytes_per_token"])
    speedup = rows["mla_plain", last]["median_s"] / rows["mla_absorbed", last]["median_s"]
    long = [h for h in held if h >= 4096] or [last]
    below_half = sorted({s for s in SETTINGS for h in long if fractions[f"{s}@{h}"] < 0.5})
    return {
        "mla_cache_vs_mha": cache_ratio,
        "absorbed_speedup_over_plain": speedup,
        "below_half_bandwidth_at_4096_or_more": below_half,
        "goals": {
            "mla_cache_at_most_1/10_of_mha": cache_ratio <= 0.1,
            "absorbed_faster_than_plain_at_longest": speedup > 1,
            "every_variant_at_least_half_bandwidth": not below_half,
        },
    }


def main(argv=None) -> dict:
    return run_script(argv, doc=__doc__, stem="latent_decode", full=FULL, quick=QUICK,
                      settings=settings, ratios=ratios, figure="latent_decode_figure",
                      labels=LABELS, by_length=True)


if __name__ == "__main__":
    main()
