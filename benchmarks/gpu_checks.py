"""Every GPU measurement and check of the package in one run, written to one results file:

1. the device's copy bandwidth (a copy and a sum over a large buffer, best of several);
2. one decoding step of a Llama-3-8B-width layer (32 query heads, 8 key/value heads of 128)
   over a ``KVCache``, on the explicit path and the fast path, beside a bare
   ``scaled_dot_product_attention`` with ``enable_gqa`` on the same cache: at batch 8 with
   32,768 tokens held, batch 1 with 32,768 and batch 32 with 8,192. For each: the time
   (median and quartiles of CUDA-event timings), the bytes a step must read (the cache and
   the weights), the share of the copy bandwidth that makes, the kernels one step launches,
   and the same step captured in a CUDA graph (a capture fails if the step reads anything
   back to the host);
3. the chunked gated delta rule (one decay per head) against transformers'
   ``torch_chunk_gated_delta_rule`` at 4,096 and 16,384 tokens, 16 heads of 128, float32,
   and the per-channel rule against ``chunk_kimi_delta_attention`` at 4,096: times and the
   largest difference (skipped, and said so, where transformers is not installed);
4. every layer kind of the package, float32 (TF32 off), on the device and on the CPU from
   the same weights: a left-padded prefill, then decoding token by token with its cache; the
   largest difference relative to the largest output.

    python benchmarks/gpu_checks.py --device cuda --out gpu_checks.json
    python benchmarks/gpu_checks.py --quick --device cpu --out /tmp/checks.json  # tiny sizes

``--quick`` shrinks every size so that the script runs anywhere in seconds: it checks the
script, and its numbers mean nothing.
"""

from __future__ import annotations

import argparse
import copy
import json
import pathlib
import statistics
import sys
import time
import traceback

import torch
import torch.nn.functional as F

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))
from common import machine_info, measure_bandwidth  # noqa: E402

from llm_attention.block_sparse import BlockSparseAttention  # noqa: E402
from llm_attention.compressed_attention import CompressedAttention  # noqa: E402
from llm_attention.delta_rule import chunked  # noqa: E402
from llm_attention.grouped_query import GroupedQueryAttention  # noqa: E402
from llm_attention.kv_cache import KVCache  # noqa: E402
from llm_attention.latent import LatentAttention  # noqa: E402
from llm_attention.linear_attention import GatedDeltaNet, KimiDeltaAttention  # noqa: E402
from llm_attention.mamba2 import Mamba2  # noqa: E402
from llm_attention.modern import ModernAttention  # noqa: E402
from llm_attention.multihead import MultiHeadAttention  # noqa: E402
from llm_attention.sparse_latent import SparseLatentAttention  # noqa: E402


# --- timing ---------------------------------------------------------------------------------

def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def timed(fn, device: str, repeats: int, warmup: int = 3) -> dict:
    """Median and quartiles of ``repeats`` calls (CUDA events on a GPU)."""
    for _ in range(warmup):
        fn()
    sync(device)
    times = []
    for _ in range(repeats):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    q1, median, q3 = statistics.quantiles(times, n=4) if len(times) > 1 else times * 3
    return {"median_s": median, "q1_s": q1, "q3_s": q3, "repeats": repeats}


def kernels_per_call(fn, device: str) -> int | None:
    """Kernels one call launches on the GPU (None on the CPU)."""
    if device != "cuda":
        return None
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    fn()
    sync(device)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        sync(device)
    return sum(e.count for e in prof.key_averages() if e.device_type == DeviceType.CUDA)


def graphed(step, rewind, device: str):
    """``step`` captured in a CUDA graph (``rewind`` before each replay): a callable, or the
    reason the capture failed (a read back to the host fails it)."""
    if device != "cuda":
        return None, "not a GPU"
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                rewind()
                step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        rewind()
        with torch.cuda.graph(graph):
            step()
        return graph.replay, None
    except Exception as error:  # noqa: BLE001: recorded, not raised
        return None, f"{type(error).__name__}: {error}"


# --- 2. the decoding step -------------------------------------------------------------------

def llama3_8b_layer(width: int, heads: int, kv_heads: int, head_dim: int, context: int):
    """The attention of a Llama 3 8B layer (rotary base 500,000, no biases)."""
    return ModernAttention(width, width, context, 0.0, heads, kv_heads, head_dim=head_dim,
                           rope_base=500000.0)


def decode_step(sizes: dict, batch: int, held: int, device: str, dtype, repeats: int,
                bandwidth: float) -> dict:
    torch.manual_seed(0)
    layer = llama3_8b_layer(**sizes, context=held + 1).to(device, dtype).eval()
    cache = KVCache(batch, sizes["kv_heads"], sizes["head_dim"], held + 1,
                    dtype=dtype, device=device)
    cache.keys.normal_()
    cache.values.normal_()
    cache.length = held  # what the tokens held are does not change the time
    x = torch.randn(batch, 1, sizes["width"], device=device, dtype=dtype)
    queries = torch.randn(batch, sizes["heads"], 1, sizes["head_dim"], device=device,
                          dtype=dtype)
    weights = sum(p.numel() * p.element_size() for p in layer.parameters())
    cache_read = 2 * batch * sizes["kv_heads"] * (held + 1) * sizes["head_dim"] * (
        cache.keys.element_size())
    bytes_read = cache_read + weights

    def rewind():
        cache.length = held

    def step(fast_path):
        def run():
            rewind()
            layer.fast_path = fast_path
            return layer(x, cache=cache)
        return run

    def bare_sdpa():
        return F.scaled_dot_product_attention(
            queries, cache.keys[:, :, : held + 1], cache.values[:, :, : held + 1],
            enable_gqa=True)

    row = {"batch": batch, "held": held, "bytes_read": bytes_read, "cache_bytes": cache_read,
           "weight_bytes": weights}
    with torch.no_grad():
        for name, fn in (("explicit", step(False)), ("fast", step(True)),
                         ("bare_sdpa", bare_sdpa)):
            result = timed(fn, device, repeats)
            result["share_of_copy_bandwidth"] = (
                (cache_read if name == "bare_sdpa" else bytes_read)
                / result["median_s"] / bandwidth)
            result["kernels"] = kernels_per_call(fn, device)
            if name != "bare_sdpa":
                replay, error = graphed(fn, rewind, device)
                result["cuda_graph"] = (timed(replay, device, repeats) if replay
                                        else {"error": error})
            row[name] = result
    row["fast_over_bare_sdpa"] = row["fast"]["median_s"] / row["bare_sdpa"]["median_s"]
    row["explicit_over_fast"] = row["explicit"]["median_s"] / row["fast"]["median_s"]
    del layer, cache
    if device == "cuda":
        torch.cuda.empty_cache()
    return row


# --- 3. the chunked delta rule against transformers' torch path ------------------------------

def delta_rule(num_tokens: int, heads: int, head_dim: int, per_channel: bool, device: str,
               repeats: int) -> dict:
    row = {"tokens": num_tokens, "heads": heads, "head_dim": head_dim,
           "decay": "per channel" if per_channel else "per head", "dtype": "float32"}
    try:
        if per_channel:
            from transformers.models.kimi_linear.modeling_kimi_linear import (
                chunk_kimi_delta_attention as theirs,
            )
        else:
            from transformers.models.qwen3_next.modeling_qwen3_next import (
                torch_chunk_gated_delta_rule as theirs,
            )
    except ImportError as error:
        row["skipped"] = f"transformers not importable: {error}"
        theirs = None
    gen = torch.Generator().manual_seed(0)
    shape = (1, num_tokens, heads)  # transformers' layout: (B, T, H, d)
    q = torch.randn(*shape, head_dim, generator=gen)
    k = F.normalize(torch.randn(*shape, head_dim, generator=gen), dim=-1)
    v = torch.randn(*shape, head_dim, generator=gen)
    g = -torch.rand(*shape, *((head_dim,) if per_channel else ()), generator=gen) * 0.5
    beta = torch.rand(*shape, generator=gen)
    q, k, v, g, beta = (t.to(device) for t in (q, k, v, g, beta))
    ours_in = [t.transpose(1, 2).contiguous() for t in (q * head_dim**-0.5, k, v, g, beta)]
    with torch.no_grad():
        row["ours"] = timed(lambda: chunked(*ours_in), device, repeats)
        row["ours"]["kernels"] = kernels_per_call(lambda: chunked(*ours_in), device)
        if theirs is not None:
            def run():
                return theirs(q, k, v, g, beta, output_final_state=True)
            row["transformers"] = timed(run, device, repeats)
            row["transformers"]["kernels"] = kernels_per_call(run, device)
            out, state = chunked(*ours_in)
            their_out, their_state = run()
            row["max_difference"] = max(
                (out - their_out.transpose(1, 2)).abs().max().item(),
                (state - their_state).abs().max().item())
            row["ours_over_transformers"] = (row["ours"]["median_s"]
                                             / row["transformers"]["median_s"])
    if device == "cuda":
        torch.cuda.empty_cache()
    return row


# --- 4. every layer kind, on the device and on the CPU ---------------------------------------

def _settle(module: torch.nn.Module) -> torch.nn.Module:
    """Weights off their starting values (norms around 1, the rest N(0, 0.3)), so that every
    part of the layer shows in its output."""
    with torch.no_grad():
        for name, parameter in module.named_parameters():
            if "norm" in name:
                parameter.uniform_(0.5, 1.5)
            elif name == "A_log":
                parameter.uniform_(-2.0, 0.0)
            elif name == "dt_bias":
                parameter.uniform_(-3.0, -1.0)
            else:
                parameter.normal_(0.0, 0.3)
    return module.eval()


def layer_kinds() -> dict:
    """name -> a function that builds the layer (width 32)."""
    d = 32
    modern = dict(d_in=d, d_out=d, context_length=64, dropout=0.0, num_heads=8, num_kv_heads=2)
    latent = dict(kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=8,
                  q_lora_rank=12)
    compressed = dict(head_dim=12, q_lora_rank=10, o_groups=2, o_lora_rank=6, window=4,
                      rope_head_dim=6)
    kinds = {
        **{f"MultiHeadAttention fast={f}": (lambda f=f: MultiHeadAttention(
            d, d, 64, 0.0, 4, fast_path=f)) for f in (False, True)},
        **{f"GroupedQueryAttention fast={f}": (lambda f=f: GroupedQueryAttention(
            d, d, 64, 0.0, 8, 2, fast_path=f)) for f in (False, True)},
    }
    variants = {"plain": dict(qk_norm=True), "window": dict(window=4),
                "chunked": dict(chunk_size=4), "output gate": dict(output_gate=True),
                "narrow values": dict(value_head_dim=2, value_scale=0.7, window=4),
                "sinks+softcap": dict(sinks=True, softcap=20.0)}
    for name, options in variants.items():
        for fast in (False, True):
            if fast and name == "sinks+softcap":
                continue  # the fused kernel cannot: refused
            kinds[f"ModernAttention {name} fast={fast}"] = (
                lambda o=options, f=fast: ModernAttention(**modern, fast_path=f, **o))
    for absorb in (False, True):
        for fast in (False, True):
            kinds[f"LatentAttention absorb={absorb} fast={fast}"] = (
                lambda a=absorb, f=fast: LatentAttention(d, d, 64, 0.0, 4, absorb=a,
                                                         fast_path=f, **latent))
    for gathered in (False, True):
        kinds[f"SparseLatentAttention gathered={gathered}"] = (
            lambda g=gathered: SparseLatentAttention(
                d, d, 64, 0.0, 4, index_topk=5, index_n_heads=3, index_head_dim=8,
                gathered=g, absorb=not g, fast_path=True, **latent))
    for form in ({}, {"fast_path": True}, {"gathered": True}):
        kinds[f"BlockSparseAttention {form or 'masked'}"] = (
            lambda o=form: BlockSparseAttention(
                d, d, 64, 0.0, 4, 2, head_dim=8, index_n_heads=2, index_head_dim=8,
                block_size=3, top_k=2, **o))
    for kind, extra in (("sliding_attention", {}),
                        ("compressed_sparse_attention",
                         dict(compress_rate=3, index_n_heads=4, index_head_dim=8,
                              index_topk=2)),
                        ("heavily_compressed_attention", dict(compress_rate=5))):
        kinds[f"CompressedAttention {kind}"] = (
            lambda e=extra, k=kind: CompressedAttention(d, d, 64, 0.0, 4, layer_type=k,
                                                        **compressed, **e))
    for form in ("chunked", "recurrent"):
        kinds[f"GatedDeltaNet {form}"] = (lambda f=form: GatedDeltaNet(
            d, d, 4, num_key_heads=2, key_head_dim=8, value_head_dim=8, chunk_size=4,
            form=f))
        kinds[f"KimiDeltaAttention {form}"] = (lambda f=form: KimiDeltaAttention(
            d, d, 4, head_dim=8, chunk_size=4, form=f))
        kinds[f"Mamba2 {form}"] = (lambda f=form: Mamba2(
            d, d, 4, head_dim=8, state_size=8, num_groups=2, chunk_size=4, form=f))
    return kinds


def run_layer(layer, x, padding, prompt: int) -> torch.Tensor:
    """One padded prefill without a cache, then the same tokens through the cache: a prompt,
    then one token at a time; both outputs side by side ``(B, 2 T, d)``."""
    whole = layer(x, padding)
    cache = layer.make_cache(x.shape[0]) if hasattr(layer, "make_cache") else KVCache(
        x.shape[0], getattr(layer, "num_kv_heads", layer.num_heads), layer.head_dim,
        x.shape[1], device=x.device)
    steps = [layer(x[:, :prompt], padding[:, :prompt], cache=cache)]
    for t in range(prompt, x.shape[1]):
        steps.append(layer(x[:, t:t + 1], padding[:, t:t + 1], cache=cache))
    return torch.cat([whole, *steps], dim=1)


def device_equality(device: str, prompt: int = 8) -> dict:
    """Float32 as float32: no TF32 in the GPU's matrix products or convolutions."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    x = torch.randn(3, 12, 32, generator=torch.Generator().manual_seed(1))
    padding = torch.ones(3, 12, dtype=torch.bool)
    padding[1, :3] = False  # left padding
    padding[2, :7] = False
    rows = {}
    for name, build in layer_kinds().items():
        torch.manual_seed(0)
        try:
            cpu_layer = _settle(build())
            here = copy.deepcopy(cpu_layer).to(device)
            with torch.no_grad():
                want = run_layer(cpu_layer, x, padding, prompt)
                got = run_layer(here, x.to(device), padding.to(device), prompt).cpu()
            scale = want.abs().max().item()
            rows[name] = {"relative_difference": (got - want).abs().max().item() / scale,
                          "largest_output": scale}
        except Exception as error:  # noqa: BLE001: recorded, not raised
            rows[name] = {"error": f"{type(error).__name__}: {error}",
                          "traceback": traceback.format_exc(limit=3)}
    return rows


# --- the run --------------------------------------------------------------------------------

def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", choices=("cpu", "cuda"))
    parser.add_argument("--quick", action="store_true", help="tiny sizes: checks the script")
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "benchmarks" /
                        "gpu_checks_results.json")
    parser.add_argument("--repeats", type=int, default=None)
    args = parser.parse_args(argv)
    device = args.device
    if device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda, but torch sees no CUDA device")
    quick = args.quick
    if quick and device == "cpu":
        torch.set_num_threads(1)  # tiny sizes: a second thread only waits
    repeats = args.repeats or (3 if quick else 30)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    sizes = (dict(width=64, heads=4, kv_heads=2, head_dim=16) if quick
             else dict(width=4096, heads=32, kv_heads=8, head_dim=128))
    settings = [(2, 64), (1, 64)] if quick else [(8, 32768), (1, 32768), (32, 8192)]
    report = {"machine": machine_info(device=device), "quick": quick,
              "decode_dtype": str(dtype).removeprefix("torch.")}
    started = time.perf_counter()
    bandwidth = measure_bandwidth(16 if quick else 2048, device=device)
    report["bandwidth"] = bandwidth
    copy_rate = bandwidth["copy_bytes_per_s"]
    report["decode"] = [decode_step(sizes, b, h, device, dtype, repeats, copy_rate)
                        for b, h in settings]
    print(f"decode done after {time.perf_counter() - started:.0f} s", flush=True)
    tokens = (64, 128) if quick else (4096, 16384)
    heads, width = (2, 16) if quick else (16, 128)
    report["delta_rule"] = [delta_rule(t, heads, width, False, device, repeats)
                            for t in tokens]
    report["delta_rule"].append(delta_rule(tokens[0], heads, width, True, device, repeats))
    print(f"delta rule done after {time.perf_counter() - started:.0f} s", flush=True)
    report["equal_on_device_and_cpu"] = device_equality(device, 10 if quick else 8)
    big = next(r for r in report["decode"] if (r["batch"], r["held"]) == settings[0])
    worst = max((r.get("relative_difference", float("inf"))
                 for r in report["equal_on_device_and_cpu"].values()), default=0.0)
    report["goals"] = {
        "fast_step_within_1.25x_bare_sdpa": big["fast_over_bare_sdpa"] <= 1.25,
        "fast_step_at_least_80pc_of_copy_bandwidth":
            big["fast"]["share_of_copy_bandwidth"] >= 0.8,
        "explicit_step_within_2x_fast": big["explicit_over_fast"] <= 2.0,
        "delta_rule_no_slower_than_transformers": all(
            r["ours_over_transformers"] <= 1.0 for r in report["delta_rule"]
            if "ours_over_transformers" in r and r["decay"] == "per head"),
        "every_layer_kind_equal_in_float32_within_1e-5": worst <= 1e-5,
    }
    report["seconds"] = time.perf_counter() - started
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    summarise(report)
    return report


def summarise(report: dict) -> None:
    print(f"device: {report['machine'].get('gpu', report['machine']['cpu_model'])}, "
          f"torch {report['machine']['torch']}, copy "
          f"{report['bandwidth']['copy_bytes_per_s'] / 1e9:.0f} GB/s")
    for row in report["decode"]:
        cells = [f"{name} {row[name]['median_s'] * 1e3:.3f} ms "
                 f"({row[name]['share_of_copy_bandwidth']:.0%})"
                 for name in ("explicit", "fast", "bare_sdpa")]
        print(f"decode B={row['batch']} held={row['held']}: " + ", ".join(cells))
    for row in report["delta_rule"]:
        theirs = row.get("transformers", {}).get("median_s")
        print(f"delta rule {row['decay']} T={row['tokens']}: ours "
              f"{row['ours']['median_s'] * 1e3:.1f} ms"
              + (f", transformers {theirs * 1e3:.1f} ms, difference "
                 f"{row['max_difference']:.1e}" if theirs else f" ({row.get('skipped')})"))
    failed = {n: r["error"] for n, r in report["equal_on_device_and_cpu"].items()
              if "error" in r}
    worst = max(report["equal_on_device_and_cpu"].items(),
                key=lambda item: item[1].get("relative_difference", float("inf")))
    print(f"layer kinds: {len(report['equal_on_device_and_cpu'])}, worst {worst[0]} "
          f"{worst[1].get('relative_difference', 'error')}, errors: {failed or 'none'}")
    print("goals:", json.dumps(report["goals"]))


if __name__ == "__main__":
    main()
