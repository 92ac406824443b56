"""Decoding one token with Gated DeltaNet against grouped-query attention at Qwen3-Next's
width, and the gated delta rule's chunked form against its token loop, against the memory
bandwidth of the machine, measured in the same run.

The layers (float32, eval mode, batch 1, one thread), built from Qwen3-Next-80B-A3B's
published config (``llm_attention_site.families.HYBRIDS``) by ``layer_from_hf``:

- ``gdn``: its linear layer, ``GatedDeltaNet`` (model width 2,048; 16 key heads and 32
  value heads of 128), a ``DeltaStateCache``: 32 x 128 x 128 numbers of state and a
  convolution window of 3 x 8,192, whatever the tokens held;
- ``gqa``: its full layer, ``ModernAttention`` (16 query heads, 2 key/value heads of 256,
  output gate, the fast path), a ``KVCache``: 2 x 2 x 256 numbers per token held.

For each number of tokens held (1,024 to 32,768) one new token is decoded; the driver
(``decode.py``) fills the KV cache with random numbers (what they hold does not change the
time) and the state likewise, times every setting at every length in turns, so that a burst
of other work slows all of them alike (median and interquartile range kept), and puts the
caches back as they were after each call.

Bytes a step must read: every weight once, and every cached number once (the KV cache) or the
state and window once. Divided by the time, the bandwidth the step achieved; the run measures
the machine's own on one thread (a copy and a sum over 1 GiB; the larger is the limit).

Prefill: the gated delta rule alone at Qwen3-Next's 32 heads of 128 x 128, on 4,096 tokens:
``delta_rule.chunked`` (chunks of 64) against the token loop, the decoding step
(``delta_rule.step_in_place``, no allocation per token) once per token; the layer's
projections, the same for both, are left out. In turns with them: how fast one thread
multiplies matrices of the chunked form's shapes (32 products of a ``64 x 128`` by a
``128 x 128`` matrix, its products with the state); and a profile of one chunked call (the
share of its time in matrix products). The page divides the chunked form's arithmetic by
that speed: about the most it could gain over the loop on this machine.

Goals: Gated DeltaNet's decode time flat in the context (at 32,768 tokens at most 1.2 times
that at 1,024); faster than grouped-query decoding at every length from the one where the
grouped-query step reads more bytes than the Gated DeltaNet step (printed, with the length
where the KV cache alone outweighs the state); the chunked form at least 10 times the token
loop at 4,096 tokens.

The driver (``decode.py``) writes ``benchmarks/linear_decode_results.json`` and the figure the page
draws from it, ``benchmarks/linear_decode_benchmark.svg``; ``--quick`` checks the script in seconds.
"""

from __future__ import annotations

import copy
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from common import profile_step, time_in_turns  # noqa: E402
from decode import Setting, run_script, shares_of_bandwidth  # noqa: E402

from llm_attention.delta_rule import chunked, step_in_place  # noqa: E402
from llm_attention.hf_layers import layer_from_hf  # noqa: E402
from llm_attention.kv_cache import KVCache  # noqa: E402
from llm_attention_site.benchmark_plots import LINEAR_SETTINGS  # noqa: E402
from llm_attention_site.families import HYBRIDS  # noqa: E402

LABELS = {setting: spec[0] for setting, spec in LINEAR_SETTINGS.items()}  # the figure's
SETTINGS = tuple(LABELS)
MODEL = "Qwen3-Next 80B-A3B"
FULL = dict(held=[1024, 2048, 4096, 8192, 16384, 32768], prefill_tokens=4096, chunk_size=64,
            rounds=9, min_run_time=0.3, prefill_rounds=5, bandwidth_mib=1024, shrink=1)
# --quick: the same layers with every width divided by 16, a few short lengths
QUICK = dict(held=[64, 128], prefill_tokens=96, chunk_size=16, rounds=1, min_run_time=0.001,
             prefill_rounds=1, bandwidth_mib=16, shrink=16)
BYTES = 4  # float32
MATMUL_OPS = ("aten::bmm", "aten::mm", "aten::addmm", "aten::baddbmm")  # in a profile


def layer_config(shrink: int) -> dict:
    """Qwen3-Next's published fields, widths divided by ``shrink`` (1: as published)."""
    config = copy.deepcopy(HYBRIDS[MODEL][1])
    for name in ("hidden_size", "head_dim", "linear_key_head_dim", "linear_value_head_dim"):
        config[name] //= shrink
    return config


def build(setting: str, model: dict):
    def make(context_length: int):
        if setting == "gdn":
            return layer_from_hf(model, 0)  # layers 0-2 of each four are linear
        layer = layer_from_hf(model, 3, context_length=context_length)  # the full one
        layer.fast_path = True
        return layer

    return make


def fill(layer, held: int):
    """``layer``'s cache holding ``held`` random tokens (a KV cache, with room for one
    more), or a state of random numbers (any number of tokens gives the same)."""
    if isinstance(layer.make_cache(1), KVCache):
        cache = KVCache(1, layer.num_kv_heads, layer.head_dim, held + 1)
        shape = (1, layer.num_kv_heads, held, layer.head_dim)
        cache.append(torch.randn(shape), torch.randn(shape))
        return cache
    cache = layer.make_cache(1)
    cache.state = torch.randn_like(cache.state) * 0.1
    cache.conv_window = torch.randn_like(cache.conv_window)
    cache.started[:] = True
    cache.length = held
    return cache


def cache_bytes(layer, cache, held: int) -> int:
    """Bytes of the cache a step reads: the held keys and values, or state and window.
    (The state is updated in place and stays where the delta rule keeps it, about the
    size of the values written: nothing to put back after a step.)"""
    if isinstance(cache, KVCache):
        return 2 * held * layer.num_kv_heads * layer.head_dim * BYTES
    return cache.nbytes


def settings(config: dict) -> dict:
    model = layer_config(config["shrink"])
    return {s: Setting(LABELS[s], build(s, model), fill, cache_bytes) for s in SETTINGS}


def run_prefill(config: dict, model: dict) -> dict:
    """The rule on ``prefill_tokens`` tokens at the linear layer's head sizes."""
    heads, d_k = model["linear_num_value_heads"], model["linear_key_head_dim"]
    d_v, n = model["linear_value_head_dim"], config["prefill_tokens"]
    gen = torch.Generator().manual_seed(0)
    q = torch.nn.functional.normalize(torch.randn(1, heads, n, d_k, generator=gen), dim=-1)
    k = torch.nn.functional.normalize(torch.randn(1, heads, n, d_k, generator=gen), dim=-1)
    v = torch.randn(1, heads, n, d_v, generator=gen)
    g = -torch.rand(1, heads, n, generator=gen) * 0.1
    beta = torch.rand(1, heads, n, generator=gen)
    args = (q * d_k**-0.5, k, v, g, beta)

    def token_loop():
        state = q.new_zeros(1, heads, d_k, d_v)  # (B, H, d_k, d_v)
        outputs = [step_in_place(*(x[:, :, t] for x in args), state) for t in range(n)]
        return torch.stack(outputs, dim=2), state  # (B, H, T, d_v), (B, H, d_k, d_v)

    size = config["chunk_size"]
    gen = torch.Generator().manual_seed(1)
    rows = torch.randn(heads, size, d_k, generator=gen)  # (H, C, d_k)
    state = torch.randn(heads, d_k, d_v, generator=gen)  # (H, d_k, d_v)
    with torch.no_grad():
        gap = (chunked(*args, chunk_size=size)[0] - token_loop()[0])
        runs = {"chunked": lambda: chunked(*args, chunk_size=size),
                "recurrent": token_loop,
                # the chunked form's products with the state, at its shapes
                "matmul": lambda: torch.bmm(rows, state)}  # (H, C, d_v)

        def timed(run):
            def call():
                with torch.no_grad():
                    run()
            return call

        # in turns: a burst of other work on a shared machine slows all three alike
        timings = time_in_turns({name: timed(run) for name, run in runs.items()},
                                config["prefill_rounds"], config["min_run_time"])
        profile = profile_step(runs["chunked"], top=8)
    matmul = timings.pop("matmul")
    flops = 2 * heads * size * d_k * d_v  # one multiply and one add per product term
    return {"tokens": n, "chunk_size": size, "heads": heads,
            "max_difference": gap.abs().max().item(), **timings,
            "chunked_profile": profile,
            "matmul": {"shape": [heads, size, d_k, d_v], **matmul,
                       "flops_per_s": flops / matmul["median_s"]}}


def prefill(config: dict, layers: dict) -> dict:
    print("prefill: chunked and token loop", file=sys.stderr, flush=True)
    model = layer_config(config["shrink"])
    return {"model": MODEL, "layer_config": model, "prefill": run_prefill(config, model)}


def crossings(report: dict) -> dict:
    """Where the KV cache alone outweighs the state, and where the grouped-query step
    reads more bytes than the Gated DeltaNet step (weights included), in tokens."""
    rows = {(r["setting"], r["held"]): r for r in report["results"]}
    first = min(report["config"]["held"])
    gqa, gdn = rows["gqa", first], rows["gdn", first]
    per_token = gqa["cache_bytes"] / first  # bytes the KV cache grows per token
    cache_over_state = gdn["cache_bytes"] / per_token
    step_over_step = (gdn["bytes_read"] - gqa["weight_bytes"]) / per_token
    return {"kv_bytes_per_token": per_token, "state_bytes": gdn["cache_bytes"],
            "kv_cache_outweighs_state_from": cache_over_state,
            "gqa_step_reads_more_from": step_over_step}


def ratios(report: dict) -> dict:
    rows = {(r["setting"], r["held"]): r for r in report["results"]}
    held = report["config"]["held"]
    flat = rows["gdn", max(held)]["median_s"] / rows["gdn", min(held)]["median_s"]
    speedups = {h: rows["gqa", h]["median_s"] / rows["gdn", h]["median_s"] for h in held}
    cross = crossings(report)
    beyond = [h for h in held if h >= cross["gqa_step_reads_more_from"]]
    faster = [h for h in held if speedups[h] > 1]
    prefill = report["prefill"]
    prefill_speedup = prefill["recurrent"]["median_s"] / prefill["chunked"]["median_s"]
    matmul_share = sum(op["share"] for op in prefill["chunked_profile"]
                       if op["op"] in MATMUL_OPS)
    return {
        "fraction_of_bandwidth": shares_of_bandwidth(report),
        "gdn_last_over_first": flat,
        "gdn_speedup_over_gqa": {str(h): speedups[h] for h in held},
        **cross,
        "measured_lengths_beyond_crossing": beyond,
        "first_measured_length_gdn_faster": min(faster) if faster else None,
        "chunked_speedup_over_token_loop": prefill_speedup,
        "chunked_share_in_matrix_products": matmul_share,
        "goals": {
            "gdn_decode_flat_within_1.2": flat <= 1.2,
            "gdn_faster_beyond_crossing": bool(beyond) and all(speedups[h] > 1
                                                               for h in beyond),
            "chunked_at_least_10x_token_loop": prefill_speedup >= 10,
        },
    }


def main(argv=None) -> dict:
    report = run_script(argv, doc=__doc__, stem="linear_decode", full=FULL, quick=QUICK,
                        settings=settings, ratios=ratios, figure="linear_decode_figure",
                        labels=LABELS, width=lambda config: layer_config(
                            config["shrink"])["hidden_size"], extra=prefill)
    if "prefill" in report and "ratios" in report:
        p, r = report["prefill"], report["ratios"]
        print(f"prefill of {p['tokens']} tokens: chunked {p['chunked']['median_s']:.3f} s, "
              f"token loop {p['recurrent']['median_s']:.3f} s; matrix products of the chunk's "
              f"shapes at {p['matmul']['flops_per_s'] / 1e9:.1f} GFLOP/s, "
              f"{r['chunked_share_in_matrix_products']:.0%} of the chunked form's time")
    return report


if __name__ == "__main__":
    main()
