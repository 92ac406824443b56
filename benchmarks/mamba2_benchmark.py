"""Mamba-2 at Nemotron-H's width: decoding one token flat in the context, beside Gated DeltaNet
and grouped-query attention; its state's bytes beside theirs; its chunked prefill against the
token loop; and the chunked forms of this package (Gated DeltaNet, Kimi Delta Attention,
Mamba-2) against transformers' own pure-torch paths on the same inputs.

Decoding (through the driver, ``decode.py``; float32, eval mode, batch 1, one thread). The
layers, from the family table's Nemotron-H config (``hidden_size`` 2,688; a Nemotron 3
Nano-shaped config.json) by ``layer_from_hf``:

- ``mamba2``: its Mamba-2 layer (layer 0): 64 heads of 64, a state of 128 per head, 8 groups
  of keys and queries, a convolution of 4: a ``DeltaStateCache`` of 64 x 128 x 64 numbers of
  state and a window of 3 x 6,144, whatever the tokens held;
- ``gdn``: Gated DeltaNet at the same model width, with Qwen3-Next's linear heads (16 key
  heads, 32 value heads of 128: the same 4,096 value channels and the same 524,288 numbers of
  state as the Mamba-2 layer), its window of 3 x 8,192;
- ``gqa``: Nemotron-H's attention layer (layer 5: 32 query heads, 2 key/value heads of 128,
  no rotary positions, the fast path), a ``KVCache`` of 2 x 2 x 128 numbers per token held.

For each number of tokens held (1,024 to 32,768) the driver fills the caches with random
numbers (a state's contents do not change the time) and times every setting at every length
in turns; the state of a step is kept, only the length is put back. Bytes a step reads: every
weight once, and the state and window, or every cached key and value. Goal: Mamba-2's step
flat in the context, at 32,768 held at most 1.2 times its time at 1,024.

Prefill: Mamba-2's rule alone at the layer's head shapes, 4,096 tokens: ``ssd.chunked``
(chunks of 128, the config's) against ``ssd.recurrent`` (the token loop), in turns; the max
difference of their outputs is printed. Goal: chunked faster, the two timings separated.

Against transformers (``transformers`` 5.23, its pure-torch functions, the same inputs and
thread count, in turns with each other): Gated DeltaNet, ``delta_rule.chunked`` against
``torch_chunk_gated_delta_rule`` (qwen3_next), and Kimi Delta Attention, ``delta_rule.chunked``
with one decay per key channel against ``chunk_kimi_delta_attention`` (kimi_linear), both on
4,096 tokens, 4 heads of 128, chunks of 64; Mamba-2, ``ssd.chunked`` with what ``Mamba2``
does around it (step sizes through softplus and clamped, keys and queries repeated for their
groups, the skip term) against ``mamba2_chunk_scan`` (nemotron_h), the function
``NemotronHMamba2Mixer`` calls for a prompt, called with the arguments it passes, at the
layer's shapes on 4,096 tokens. Our side takes the same tensors, in transformers' layout, and
its time includes laying them out. Each pair's outputs and final states are compared (max
difference printed); goal: ours no slower (the two separated, or tied).

Memory and time: single calls at these sizes took 0.1 to 3.4 s here (transformers' Kimi Delta
Attention builds ``(B, H, chunks, 64, 64, 128)`` tensors, about 0.5 GB each); one call of every
prompt function peaked at 3.5 GB. Counted from them, the whole run takes about four minutes.

Times are medians and interquartile ranges over blocks (``common.time_in_turns``); "faster"
means separated by more than both spreads (``llm_attention_site.timings``).

The driver writes ``benchmarks/mamba2_results.json`` and the figure the page draws from it,
``benchmarks/mamba2_benchmark.svg``; ``--quick`` checks the script in seconds.
"""

from __future__ import annotations

import copy
import math
import pathlib
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from common import time_in_turns  # noqa: E402
from decode import Setting, run_script  # noqa: E402
from linear_decode_benchmark import cache_bytes, fill, layer_config  # noqa: E402

from llm_attention import delta_rule, ssd  # noqa: E402
from llm_attention.hf_layers import layer_from_hf  # noqa: E402
from llm_attention_site.benchmark_plots import MAMBA2_SETTINGS  # noqa: E402
from llm_attention_site.families import FAMILIES  # noqa: E402
from llm_attention_site.timings import FASTER, SLOWER, first_separated, verdict  # noqa: E402

LABELS = {setting: spec[0] for setting, spec in MAMBA2_SETTINGS.items()}  # the figure's
SETTINGS = tuple(LABELS)
MODEL = "Nemotron 3 Nano (as a test fixture copies it)"
MAMBA_LAYER, ATTENTION_LAYER = 0, 5  # hybrid_override_pattern "MEMEM*...": M, then *
FULL = dict(held=[1024, 2048, 4096, 8192, 16384, 32768], rounds=9, min_run_time=0.3,
            bandwidth_mib=1024, shrink=1, prefill_tokens=4096, prefill_rounds=3,
            versus_tokens=4096, versus_heads=4, versus_head_dim=128, versus_chunk=64,
            versus_rounds=5)
# --quick: widths divided by 16, a few short lengths
QUICK = dict(held=[64, 128], rounds=1, min_run_time=0.001, bandwidth_mib=16, shrink=16,
             prefill_tokens=96, prefill_rounds=1, versus_tokens=96, versus_heads=2,
             versus_head_dim=16, versus_chunk=16, versus_rounds=1)
VERSUS = ("gdn", "kda", "mamba2")  # ours against transformers'


def nemotron(shrink: int) -> dict:
    """Nemotron-H's published config, widths (and the chunk) divided by ``shrink``."""
    config = copy.deepcopy(FAMILIES["nemotron_h"].published[MODEL][1])
    for name in ("hidden_size", "mamba_head_dim", "ssm_state_size", "attention_head_dim",
                 "chunk_size"):
        config[name] //= shrink
    if shrink > 1:  # transformers reads head_dim (default 128), not attention_head_dim
        config["head_dim"] = config["attention_head_dim"]
    return config


def gdn_config(shrink: int) -> dict:
    """Qwen3-Next's linear heads on Nemotron-H's model width."""
    return dict(layer_config(shrink), hidden_size=nemotron(shrink)["hidden_size"])


def build(setting: str, shrink: int):
    def make(context_length: int):
        if setting == "mamba2":
            return layer_from_hf(nemotron(shrink), MAMBA_LAYER)
        if setting == "gdn":
            return layer_from_hf(gdn_config(shrink), 0)  # a linear layer of Qwen3-Next's
        layer = layer_from_hf(nemotron(shrink), ATTENTION_LAYER,
                              context_length=context_length)
        layer.fast_path = True
        return layer

    return make


def settings(config: dict) -> dict:
    return {s: Setting(LABELS[s], build(s, config["shrink"]), fill, cache_bytes)
            for s in SETTINGS}


def record(config: dict, layers: dict) -> dict:
    """The bytes each layer keeps: the two states (state and window), a KV cache per token."""
    states = {}
    for name in ("mamba2", "gdn"):
        cache = layers[name].make_cache(1)
        states[name] = {"state": cache.state.nbytes, "conv_window": cache.conv_window.nbytes}
    attention = layers["gqa"]
    per_token = 2 * attention.num_kv_heads * attention.head_dim * 4  # K and V, float32
    return {"model": MODEL, "layer_config": nemotron(config["shrink"]),
            "gdn_config": gdn_config(config["shrink"]),
            "state_bytes": states, "kv_bytes_per_token": per_token}


def timed(runs: dict, rounds: int, min_run_time: float) -> dict:
    """``runs`` (name -> callable) timed in turns, without gradients."""
    def quiet(run):
        def call():
            with torch.no_grad():
                run()
        return call

    return time_in_turns({name: quiet(run) for name, run in runs.items()}, rounds,
                         min_run_time)


def gap(ours, theirs) -> float:
    return max((a - b).abs().max().item() for a, b in zip(ours, theirs))


def run_prefill(config: dict) -> dict:
    """Mamba-2's rule on ``prefill_tokens`` tokens at the layer's head shapes: chunked
    against the token loop."""
    model = nemotron(config["shrink"])
    heads, n, p = model["mamba_num_heads"], model["ssm_state_size"], model["mamba_head_dim"]
    tokens, size = config["prefill_tokens"], model["chunk_size"]
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(1, heads, tokens, n, generator=gen) * n**-0.5  # C, (B, H, T, N)
    k = torch.randn(1, heads, tokens, n, generator=gen) * n**-0.5  # B
    v = torch.randn(1, heads, tokens, p, generator=gen)  # x, (B, H, T, P)
    dt = torch.rand(1, heads, tokens, generator=gen) * 0.1 + 0.01  # (B, H, T)
    g = -dt * (torch.rand(1, heads, 1, generator=gen) + 0.5)  # dt * A, A in (-1.5, -0.5)
    args = (q, k, v, g, dt)
    with torch.no_grad():
        difference = gap(ssd.chunked(*args, chunk_size=size), ssd.recurrent(*args))
    timings = timed({"chunked": lambda: ssd.chunked(*args, chunk_size=size),
                     "recurrent": lambda: ssd.recurrent(*args)},
                    config["prefill_rounds"], config["min_run_time"])
    return {"tokens": tokens, "chunk_size": size, "heads": heads, "state_size": n,
            "head_dim": p, "max_difference": difference, **timings}


# --- ours and transformers', on the same tensors in transformers' layout (B, T, H, ...)
def ours_delta(chunk: int):
    """``delta_rule.chunked`` on transformers' inputs: queries scaled as its layers scale
    them (transformers' functions scale inside)."""
    def run(q, k, v, g, beta):
        scale = q.shape[-1] ** -0.5
        q, k, v, g = (t.transpose(1, 2).contiguous() for t in (q, k, v, g))  # (B, H, T, .)
        out, state = delta_rule.chunked(q * scale, k, v, g, beta.transpose(1, 2),
                                        chunk_size=chunk)  # (B, H, T, d_v), (B,H,d_k,d_v)
        return out.transpose(1, 2), state  # (B, T, H, d_v), ..

    return run


def ours_mamba2(chunk: int, limit: tuple):
    """What ``Mamba2.forward`` does between its convolution and its norm."""
    def run(x, dt, A, B, C, D, dt_bias):
        heads, group = x.shape[2], x.shape[2] // B.shape[2]
        dt = F.softplus(dt + dt_bias).clamp(*limit).transpose(1, 2)  # (B, H, T)
        g = A[:, None] * dt  # (B, H, T): dt * A
        keys = B.transpose(1, 2).repeat_interleave(group, dim=1)  # (B, H, T, N)
        queries = C.transpose(1, 2).repeat_interleave(group, dim=1)  # (B, H, T, N)
        values = x.transpose(1, 2)  # (B, H, T, P)
        out, state = ssd.chunked(queries, keys, values, g, dt, chunk_size=chunk)
        out = out + D.view(heads, 1, 1) * values  # (B, H, T, P): the skip
        return out.transpose(1, 2), state  # (B, T, H, P), (B, H, N, P)

    return run


def versus_inputs(config: dict) -> dict:
    """name -> (ours, theirs, args): the same tensors for both."""
    from transformers.models.kimi_linear.modeling_kimi_linear import (
        chunk_kimi_delta_attention,
    )
    from transformers.models.nemotron_h.modeling_nemotron_h import mamba2_chunk_scan
    from transformers.models.qwen3_next.modeling_qwen3_next import (
        torch_chunk_gated_delta_rule,
    )

    tokens, heads = config["versus_tokens"], config["versus_heads"]
    d, chunk = config["versus_head_dim"], config["versus_chunk"]
    gen = torch.Generator().manual_seed(0)

    def unit(*shape):
        return F.normalize(torch.randn(*shape, generator=gen), dim=-1)

    q, k = unit(1, tokens, heads, d), unit(1, tokens, heads, d)  # (B, T, H, d)
    v = torch.randn(1, tokens, heads, d, generator=gen)
    beta = torch.rand(1, tokens, heads, generator=gen)  # (B, T, H)
    g_head = -torch.rand(1, tokens, heads, generator=gen) * 0.1  # one decay per head
    g_channel = -torch.rand(1, tokens, heads, d, generator=gen) * 0.1  # one per channel

    model = nemotron(config["shrink"])
    h, p = model["mamba_num_heads"], model["mamba_head_dim"]
    groups, n, size = model["n_groups"], model["ssm_state_size"], model["chunk_size"]
    limit = (model.get("time_step_min", 0.001), math.inf)  # the mixer's time_step_limit
    mamba = (torch.randn(1, tokens, h, p, generator=gen),  # x, (B, T, H, P)
             torch.randn(1, tokens, h, generator=gen),  # dt before softplus, (B, T, H)
             -torch.rand(h, generator=gen).mul(2).exp(),  # A = -exp(A_log), (H,)
             torch.randn(1, tokens, groups, n, generator=gen) * n**-0.5,  # B, (B,T,G,N)
             torch.randn(1, tokens, groups, n, generator=gen) * n**-0.5,  # C
             torch.randn(h, generator=gen),  # D, (H,)
             torch.randn(h, generator=gen) - 2)  # dt_bias, (H,)

    def theirs_mamba2(x, dt, A, B, C, D, dt_bias):  # as NemotronHMamba2Mixer calls it
        out, state = mamba2_chunk_scan(x, dt, A, B, C, chunk_size=size, D=D, z=None,
                                       return_final_states=True, dt_bias=dt_bias,
                                       dt_softplus=True, initial_states=None,
                                       dt_limit=limit)
        return out, state.transpose(-1, -2)  # (B, H, P, N) -> (B, H, N, P)

    def delta(function):
        return lambda *args: function(*args, chunk_size=chunk, initial_state=None,
                                      output_final_state=True,
                                      use_qk_l2norm_in_kernel=False)

    return {
        "gdn": (ours_delta(chunk), delta(torch_chunk_gated_delta_rule),
                (q, k, v, g_head, beta)),
        "kda": (ours_delta(chunk), delta(chunk_kimi_delta_attention),
                (q, k, v, g_channel, beta)),
        "mamba2": (ours_mamba2(size, limit), theirs_mamba2, mamba),
    }


def run_versus(config: dict) -> dict:
    pairs = versus_inputs(config)
    runs, out = {}, {}
    for name, (ours, theirs, args) in pairs.items():
        with torch.no_grad():
            out[name] = {"max_difference": gap(ours(*args), theirs(*args))}
        runs[f"{name}:ours"] = lambda ours=ours, args=args: ours(*args)
        runs[f"{name}:transformers"] = lambda theirs=theirs, args=args: theirs(*args)
    timings = timed(runs, config["versus_rounds"], config["min_run_time"])
    for name in pairs:
        out[name] |= {"ours": timings[f"{name}:ours"],
                      "transformers": timings[f"{name}:transformers"]}
    import transformers

    return {"transformers": transformers.__version__, "tokens": config["versus_tokens"],
            "heads": config["versus_heads"], "head_dim": config["versus_head_dim"],
            "chunk_size": config["versus_chunk"], "pairs": out}


def extra(config: dict, layers: dict) -> dict:
    print("prefill: chunked and token loop", file=sys.stderr, flush=True)
    prefill = run_prefill(config)
    print("ours against transformers", file=sys.stderr, flush=True)
    return {"prefill": prefill, "versus": run_versus(config)}


def ratios(report: dict) -> dict:
    rows = {(r["setting"], r["held"]): r for r in report["results"]}
    held = report["config"]["held"]
    first, last = min(held), max(held)
    flat = {s: rows[s, last]["median_s"] / rows[s, first]["median_s"] for s in ("mamba2", "gdn")}
    per_token = report["kv_bytes_per_token"]
    outweighs = {s: sum(b.values()) / per_token for s, b in report["state_bytes"].items()}
    reads_more = (rows["mamba2", first]["bytes_read"] - rows["gqa", first]["weight_bytes"]) / (
        per_token)
    pairs = {h: (rows["mamba2", h], rows["gqa", h]) for h in held}
    prefill = report["prefill"]
    versus = {}
    for name, pair in report["versus"]["pairs"].items():
        versus[name] = {"transformers_over_ours": pair["transformers"]["median_s"]
                        / pair["ours"]["median_s"],
                        "ours": verdict(pair["ours"], pair["transformers"])}
    return {
        "last_over_first": flat,
        "kv_cache_outweighs_state_from": outweighs,
        "gqa_step_reads_more_than_mamba2_from": reads_more,
        "mamba2_against_gqa": {str(h): verdict(*pairs[h]) for h in held},
        "mamba2_faster_than_gqa_from": first_separated(pairs, FASTER),
        "chunked_speedup_over_token_loop": prefill["recurrent"]["median_s"]
        / prefill["chunked"]["median_s"],
        "chunked_against_token_loop": verdict(prefill["chunked"], prefill["recurrent"]),
        "versus_transformers": versus,
        "goals": {
            "mamba2_decode_flat_within_1.2": flat["mamba2"] <= 1.2,
            "chunked_faster_than_token_loop":
                verdict(prefill["chunked"], prefill["recurrent"]) == FASTER,
            **{f"ours_no_slower_than_transformers_{name}": v["ours"] != SLOWER
               for name, v in versus.items()},
        },
    }


def show(report: dict) -> None:
    r, prefill = report["ratios"], report["prefill"]
    states = ", ".join(f"{name} {sum(b.values()) / 2**20:.2f} MiB"
                       for name, b in report["state_bytes"].items())
    print(f"state and window: {states}; KV cache {report['kv_bytes_per_token']:,} B a "
          f"token, more than Mamba-2's state from "
          f"{r['kv_cache_outweighs_state_from']['mamba2']:,.0f} tokens")
    print(f"Mamba-2 decode, {max(report['config']['held'])} over "
          f"{min(report['config']['held'])} held: {r['last_over_first']['mamba2']:.2f}")
    print(f"prefill of {prefill['tokens']} tokens: chunked {prefill['chunked']['median_s']:.3f}"
          f" s, token loop {prefill['recurrent']['median_s']:.3f} s "
          f"({r['chunked_against_token_loop']}); max difference {prefill['max_difference']:.1e}")
    for name, pair in report["versus"]["pairs"].items():
        v = r["versus_transformers"][name]
        print(f"{name}: ours {pair['ours']['median_s'] * 1e3:.1f} ms "
              f"(spread {pair['ours']['iqr_s'] * 1e3:.1f}), transformers "
              f"{pair['transformers']['median_s'] * 1e3:.1f} ms "
              f"(spread {pair['transformers']['iqr_s'] * 1e3:.1f}): "
              f"{v['transformers_over_ours']:.2f}x, ours {v['ours']}; "
              f"max difference {pair['max_difference']:.1e}")


def main(argv=None) -> dict:
    report = run_script(argv, doc=__doc__, stem="mamba2", full=FULL, quick=QUICK,
                        settings=settings, ratios=ratios, figure="mamba2_figure",
                        labels=LABELS, record=record, extra=extra,
                        width=lambda config: nemotron(config["shrink"])["hidden_size"])
    if "versus" in report and "ratios" in report:
        show(report)
    return report


if __name__ == "__main__":
    main()
