"""Time and memory of six ways to compute causal multi-head attention, measured in one run.

The six, all at model width ``d = 768`` with 12 heads (GPT-2 small), float32, eval mode (no dropout):

- ``wrapper``: ``MultiHeadAttentionWrapper``, 12 ``CausalAttention`` heads of width 64 run one after
  the other, outputs concatenated (it has no output projection);
- ``obvious``: the explicit path as it is first written (``obvious_explicit_attention``): a new
  table for the scaled scores, and the fully-masked rows zeroed on every call;
- ``explicit``: ``MultiHeadAttention``, mask + softmax spelled out, all heads at once;
- ``fast``: the same module with ``fast_path=True`` (``scaled_dot_product_attention``);
- ``torch_mha``: ``torch.nn.MultiheadAttention`` given a boolean causal ``attn_mask`` (the usual way
  to call it), ``need_weights=False``. In eval mode under ``torch.no_grad`` it runs its own inference
  kernel (``_native_multi_head_attention``, which forms the masked softmax); with gradients on, it
  calls ``scaled_dot_product_attention`` with the mask;
- ``bare``: the fast module's own four ``nn.Linear`` layers around a bare call of
  ``scaled_dot_product_attention(is_causal=True)``: the floor the fast path should sit on.

Each is timed forward (under ``torch.no_grad``) and forward + backward (the sum of the output,
backpropagated to the parameters) with ``torch.utils.benchmark.Timer``, at sequence lengths 128 to
1024 at batch 8, and 4096 at batch 1. The machines this runs on are often shared, and a burst of
someone else's work slows whichever implementation happens to be running. So the six are timed in
turns, over several rounds: in each round, every implementation gets one ``blocked_autorange``
block (in a rotating order). Each result keeps the median over all blocks (``median_s``), their
interquartile range (``iqr_s``) and the time of every round (``rounds_s``); ``spread`` in the
results is each cell's slowest round over its fastest, and the report lists the cells whose
rounds disagree by more than ``NOISY`` (their medians are not to be trusted). For timings to
publish, run it on a quiet machine.

Peak memory, on a CPU: there is no allocator counter like ``torch.cuda.max_memory_allocated``, so
we measure what the operating system sees. On Linux, writing ``5`` to ``/proc/self/clear_refs``
resets the process's peak resident set size (``VmHWM``) to its current size; we do that, run the
step once (after a warm-up call), and report ``VmHWM - VmRSS before``: the largest amount of extra
memory the step actually touched. It counts every intermediate tensor (the ``(T, T)`` attention
matrices among them) and nothing that was allocated before. One catch: glibc's ``malloc`` keeps
freed blocks to reuse them, so a step could run in memory an earlier step left behind and seem to
need none. We therefore tell it (``mallopt``) to map every block of 64 KiB or more on its own and
return it to the system when freed. Where ``clear_refs`` cannot be written (not Linux, or a
locked-down kernel) memory is reported as ``null``; without glibc the figures may be too low.

Beside them, the same run times a 2048 x 2048 float32 matmul, so the fast path's achieved FLOP
rate can be read against what this CPU does at its best. FLOPs of the fast path are counted as
``8 B T d^2`` for the four projections plus ``2 B T^2 d`` for the causal half of ``Q K^T`` and of
``weights V``.

Writes ``benchmarks/results.json`` (with the machine: CPU model, threads, torch and Python
versions, date) and ``benchmarks/attention_benchmark.svg`` (the page draws the same plot at build,
from the results file), and prints a table and the ratios against the
goals. Timings on a shared machine are noisy: compare ratios measured in the same run.

    python benchmarks/attention_benchmark.py            # full run, a few minutes on 2 cores
    python benchmarks/attention_benchmark.py --quick    # tiny sizes, seconds: checks the script
    python benchmarks/attention_benchmark.py --replot   # redraw the plot from results.json
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import json
import pathlib
import re
import subprocess
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils import benchmark

from common import (  # benchmarks/common.py, beside this script
    machine_info, save_site_figure, set_threads, replotted, time_in_turns, write_report,
)
from llm_attention.multihead import MultiHeadAttention
from llm_attention_site.benchmark_plots import ATTENTION_LABELS
from llm_attention.multihead_wrapper import MultiHeadAttentionWrapper

ROOT = pathlib.Path(__file__).resolve().parent.parent
LABELS = ATTENTION_LABELS  # the figure's, in this script's order
IMPLEMENTATIONS = tuple(LABELS)
MODES = ("forward", "forward+backward")

# min_run_time: seconds of one implementation's block in a round
FULL = dict(d_model=768, num_heads=12, sizes=[(8, 128), (8, 256), (8, 512), (8, 1024), (1, 4096)], min_run_time=0.3, rounds=7, matmul_n=2048)
QUICK = dict(d_model=64, num_heads=4, sizes=[(2, 16), (2, 32), (1, 64)], min_run_time=0.002, rounds=2, matmul_n=128)
NOISY = 1.5  # a cell whose slowest round took more than this times its fastest was disturbed
MMAP_THRESHOLD = 64 * 1024


# --- the implementations -----------------------------------------------------------------------


# --8<-- [start:obvious]
def obvious_explicit_attention(module, x):
    """The explicit path as it is first written: the same result, with more tables."""
    b, t, _ = x.shape
    split = (b, t, module.num_heads, module.head_dim)
    queries = module.W_query(x).view(split).transpose(1, 2)  # (B, H, T, d_h)
    keys = module.W_key(x).view(split).transpose(1, 2)  # (B, H, T, d_h)
    values = module.W_value(x).view(split).transpose(1, 2)  # (B, H, T, d_h)
    mask_bool = module.mask[:t, :t]  # (T, T), True = future
    attn_scores = queries @ keys.transpose(2, 3)  # new table: (B, H, T, T)
    attn_scores.masked_fill_(mask_bool, -torch.inf)  # in place
    scaled = attn_scores / module.head_dim**0.5  # new table
    attn_weights = torch.softmax(scaled, dim=-1)  # new table
    attn_weights = attn_weights.masked_fill(mask_bool, 0.0)  # new table, every call
    context_vec = (attn_weights @ values).transpose(1, 2)  # (B, T, H, d_h)
    return module.out_proj(context_vec.reshape(b, t, module.d_out))  # (B, T, d)
# --8<-- [end:obvious]


def build(name: str, d: int, heads: int, context_length: int):
    """Return ``(module, step)``: ``step(x)`` computes the attention output of ``x`` ``(B, T, d)``."""
    module, step = _build(name, d, heads, context_length)
    return module.eval(), step  # eval mode: no dropout; gradients still flow in forward+backward


def _build(name: str, d: int, heads: int, context_length: int):
    torch.manual_seed(0)
    if name == "wrapper":
        module = MultiHeadAttentionWrapper(d, d // heads, context_length, 0.0, heads)
        return module, module
    if name == "obvious":
        module = MultiHeadAttention(d, d, context_length, 0.0, heads)  # only its layers are used
        return module, lambda x: obvious_explicit_attention(module, x)
    if name in ("explicit", "fast"):
        module = MultiHeadAttention(d, d, context_length, 0.0, heads, fast_path=name == "fast")
        return module, module
    if name == "torch_mha":
        module = nn.MultiheadAttention(d, heads, bias=True, batch_first=True)
        causal_mask = torch.ones(context_length, context_length, dtype=torch.bool).triu(1)  # True = masked

        def step(x):
            t = x.shape[1]
            return module(x, x, x, attn_mask=causal_mask[:t, :t], need_weights=False)[0]

        return module, step
    if name == "bare":
        module = MultiHeadAttention(d, d, context_length, 0.0, heads)  # only its layers are used

        def step(x):
            b, t, _ = x.shape
            split = (b, t, heads, d // heads)
            q = module.W_query(x).view(split).transpose(1, 2)  # (B, H, T, d_h)
            k = module.W_key(x).view(split).transpose(1, 2)  # (B, H, T, d_h)
            v = module.W_value(x).view(split).transpose(1, 2)  # (B, H, T, d_h)
            context = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, d_h)
            return module.out_proj(context.transpose(1, 2).reshape(b, t, d))  # (B, T, d)

        return module, step
    raise ValueError(f"unknown implementation {name!r}")


def runner(step, module, x, mode):
    if mode == "forward":

        def run():
            with torch.no_grad():
                step(x)

    else:

        def run():
            module.zero_grad(set_to_none=True)
            step(x).sum().backward()

    return run


# --- measuring ---------------------------------------------------------------------------------


def _status_kib(field: str) -> int:
    text = pathlib.Path("/proc/self/status").read_text()
    return int(re.search(rf"^{field}:\s+(\d+) kB", text, re.MULTILINE).group(1))


def return_freed_memory_to_the_system() -> str:
    """Ask glibc to mmap blocks of MMAP_THRESHOLD bytes or more and unmap them when freed."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        m_trim_threshold, m_mmap_threshold = -1, -3  # from glibc's malloc.h
        if libc.mallopt(m_mmap_threshold, MMAP_THRESHOLD) == 1 and libc.mallopt(m_trim_threshold, MMAP_THRESHOLD) == 1:
            return f"glibc mallopt: blocks >= {MMAP_THRESHOLD // 1024} KiB are mapped alone and returned when freed"
    except (OSError, AttributeError, TypeError):
        pass
    return "mallopt unavailable: freed memory may be reused unseen, so peaks may read low"


def peak_memory_bytes(run) -> int | None:
    """Extra resident memory touched by one call of ``run`` (see the module docstring), or None."""
    try:
        pathlib.Path("/proc/self/clear_refs").write_text("5")
        before = _status_kib("VmRSS")
    except OSError:
        return None
    run()
    return (_status_kib("VmHWM") - before) * 1024


def matmul_rate(n: int, min_run_time: float) -> dict:
    a, b = torch.randn(n, n), torch.randn(n, n)
    timer = benchmark.Timer(stmt="a @ b", globals={"a": a, "b": b}, num_threads=torch.get_num_threads())
    median = timer.blocked_autorange(min_run_time=min_run_time).median
    return {"n": n, "median_s": median, "gflops": 2 * n**3 / median / 1e9}


def fast_path_flops(batch: int, tokens: int, d: int) -> float:
    return 8 * batch * tokens * d * d + 2 * batch * tokens * tokens * d


# --- reporting ---------------------------------------------------------------------------------


def find(results, impl, batch, tokens, mode):
    return next(r for r in results if (r["impl"], r["batch"], r["tokens"], r["mode"]) == (impl, batch, tokens, mode))


def ratios(results, sizes) -> dict:
    """The goals, read at the longest batch-8 length (forward) and the longest length (memory)."""
    b_time, t_time = max((s for s in sizes if s[0] == max(b for b, _ in sizes)), key=lambda s: s[1])
    b_mem, t_mem = max(sizes, key=lambda s: s[1])
    fwd = {impl: find(results, impl, b_time, t_time, "forward")["median_s"] for impl in IMPLEMENTATIONS}
    mem = {impl: find(results, impl, b_mem, t_mem, "forward+backward")["peak_bytes"] for impl in IMPLEMENTATIONS}
    goals = {
        "fast_vs_explicit": {"what": "explicit time / fast time", "value": fwd["explicit"] / fwd["fast"], "goal": ">= 3"},
        "fast_vs_torch_mha": {"what": "nn.MultiheadAttention time / fast time", "value": fwd["torch_mha"] / fwd["fast"], "goal": ">= 2.5"},
        "fast_vs_bare": {"what": "fast time / bare SDPA time", "value": fwd["fast"] / fwd["bare"], "goal": "<= 1.05"},
        "fast_vs_wrapper": {"what": "wrapper time / fast time", "value": fwd["wrapper"] / fwd["fast"], "goal": None},
        "explicit_vs_wrapper": {"what": "explicit time / wrapper time", "value": fwd["explicit"] / fwd["wrapper"], "goal": "<= 1"},
    }
    if mem["fast"] and mem["explicit"]:
        goals["memory_fast_vs_explicit"] = {
            "what": "fast peak memory / explicit peak memory",
            "value": mem["fast"] / mem["explicit"],
            "goal": "<= 0.05",
        }
    checks = {"<= 1": lambda v: v <= 1, ">= 3": lambda v: v >= 3, ">= 2.5": lambda v: v >= 2.5, "<= 1.05": lambda v: v <= 1.05, "<= 0.05": lambda v: v <= 0.05}
    for g in goals.values():
        g["met"] = checks[g["goal"]](g["value"]) if g["goal"] else None
    return {"time_at": {"batch": b_time, "tokens": t_time, "mode": "forward"},
            "memory_at": {"batch": b_mem, "tokens": t_mem, "mode": "forward+backward"}, "goals": goals}  # fmt: skip


def plot(report: dict, path: pathlib.Path) -> None:
    """Save the wide figure the page draws at build (``benchmark_plots.attention_figure``)."""
    save_site_figure(report, path, "attention_figure")


def print_table(report: dict) -> None:
    rows = report["results"]
    print(f"\n{'implementation':38} {'batch':>5} {'tokens':>6} {'mode':>17} {'median ms':>10} {'peak MiB':>9}")
    for r in rows:
        mem = "n/a" if r["peak_bytes"] is None else f"{r['peak_bytes'] / 2**20:9.1f}"
        print(f"{LABELS[r['impl']]:38} {r['batch']:5d} {r['tokens']:6d} {r['mode']:>17} {r['median_s'] * 1e3:10.2f} {mem:>9}")
    print()
    for name, g in report["ratios"]["goals"].items():
        verdict = "" if g["met"] is None else ("  goal met" if g["met"] else "  GOAL MISSED")
        print(f"{name:26} {g['what']:42} {g['value']:7.3f}  goal {g['goal']}{verdict}")
    noisy = report.get("noisy", {"threshold": NOISY, "cells": []})
    print(f"\ncells whose slowest round took more than {noisy['threshold']}x their fastest: "
          f"{len(noisy['cells'])} of {len(rows)}")
    for cell in noisy["cells"]:
        print(f"  {cell}")
    f = report["flops"]
    print(f"\nfast path: {f['fast_path_gflops']:.1f} GFLOP/s at batch {f['batch']} x {f['tokens']}; "
          f"{f['matmul_n']}x{f['matmul_n']} matmul: {f['matmul_gflops']:.1f} GFLOP/s ({f['fraction_of_matmul']:.0%})")  # fmt: skip


# --- main --------------------------------------------------------------------------------------


def measure_memory(cfg: dict) -> dict:
    """Peak extra memory of one call of each implementation, size and mode (run in a child process)."""
    method = "Linux VmHWM - VmRSS after resetting the peak through /proc/self/clear_refs; "
    method += return_freed_memory_to_the_system()
    d, heads, sizes = cfg["d_model"], cfg["num_heads"], cfg["sizes"]
    peaks, total, done = {}, len(sizes) * len(IMPLEMENTATIONS) * len(MODES), 0
    for batch, tokens in sizes:
        x = torch.randn(batch, tokens, d)
        for impl in IMPLEMENTATIONS:
            module, step = build(impl, d, heads, max(t for _, t in sizes))
            for mode in MODES:
                run = runner(step, module, x, mode)
                run()  # warm-up
                peak = peak_memory_bytes(run)
                peaks[f"{impl} {batch} {tokens} {mode}"] = peak
                done += 1
                shown = "n/a" if peak is None else f"+{peak / 2**20:.1f} MiB"
                print(f"[{done:2d}/{total}] memory  {impl:9} B={batch} T={tokens:<5} {mode:16} {shown}", file=sys.stderr, flush=True)
            del module, step
    return {"method": method, "peaks": peaks}


def memory_in_a_child(args) -> dict:
    """Measure memory in a fresh process: its malloc settings would slow the timings down."""
    command = [sys.executable, __file__, "--memory-child"] + (["--quick"] if args.quick else [])
    command += ["--threads", str(torch.get_num_threads())]
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=True)
    return json.loads(done.stdout)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run of a few seconds")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's default)")
    parser.add_argument("--results", type=pathlib.Path, default=ROOT / "benchmarks" / "results.json")
    parser.add_argument("--plot", type=pathlib.Path, default=ROOT / "benchmarks" / "attention_benchmark.svg")
    parser.add_argument("--replot", action="store_true", help="measure nothing: redraw the plot and the table from --results")
    parser.add_argument("--memory-child", action="store_true", help=argparse.SUPPRESS)  # used by the script itself
    args = parser.parse_args(argv)
    if (report := replotted(args, "attention_figure", print_table)) is not None:
        return report
    set_threads(parser, args.threads)
    cfg = QUICK if args.quick else FULL
    if args.memory_child:
        print(json.dumps(measure_memory(cfg)))
        return {}
    d, heads, sizes = cfg["d_model"], cfg["num_heads"], cfg["sizes"]
    context_length = max(t for _, t in sizes)
    total = len(sizes) * len(IMPLEMENTATIONS) * len(MODES)  # in each phase: memory, then time
    started = time.perf_counter()
    print(f"{total} measurements of memory, then {total} of time; d={d}, {heads} heads, "
          f"{torch.get_num_threads()} threads", file=sys.stderr)  # fmt: skip

    memory = memory_in_a_child(args)  # first, while nothing else of ours runs
    results, done = [], 0
    for batch, tokens in sizes:
        x = torch.randn(batch, tokens, d)
        built = {impl: build(impl, d, heads, context_length) for impl in IMPLEMENTATIONS}
        for mode in MODES:
            runs = {impl: runner(step, module, x, mode) for impl, (module, step) in built.items()}
            for run in runs.values():
                run()  # warm-up: first-call allocations and caches
            timings = time_in_turns(runs, cfg["rounds"], cfg["min_run_time"])
            for impl in IMPLEMENTATIONS:
                peak = memory["peaks"].get(f"{impl} {batch} {tokens} {mode}")
                rounds_s = timings[impl]["rounds_s"]
                results.append({"impl": impl, "batch": batch, "tokens": tokens, "mode": mode, **timings[impl],
                                "spread": max(rounds_s) / min(rounds_s), "peak_bytes": peak})  # fmt: skip
                done += 1
                print(f"[{done:2d}/{total}] {time.perf_counter() - started:6.0f}s  time    {impl:9} B={batch} T={tokens:<5} "
                      f"{mode:16} {timings[impl]['median_s'] * 1e3:9.2f} ms", file=sys.stderr, flush=True)  # fmt: skip
        del built, runs
    print("matmul reference...", file=sys.stderr)
    matmul = matmul_rate(cfg["matmul_n"], cfg["min_run_time"])

    report = {
        "machine": machine_info(quick=args.quick, memory_method=memory["method"]),
        "config": {"d_model": d, "num_heads": heads, "dtype": "float32", "sizes": sizes, "min_run_time_s": cfg["min_run_time"], "rounds": cfg["rounds"],
                   "implementations": LABELS, "modes": list(MODES)},  # fmt: skip
        "results": results,
    }
    report["ratios"] = ratios(results, sizes)
    report["noisy"] = {"threshold": NOISY, "cells": [
        f"{r['impl']} {r['batch']} {r['tokens']} {r['mode']}" for r in results if r["spread"] > NOISY]}  # fmt: skip
    at = report["ratios"]["time_at"]
    fast = find(results, "fast", at["batch"], at["tokens"], "forward")["median_s"]
    fast_gflops = fast_path_flops(at["batch"], at["tokens"], d) / fast / 1e9
    report["flops"] = {"batch": at["batch"], "tokens": at["tokens"], "fast_path_gflops": fast_gflops,
                       "matmul_n": matmul["n"], "matmul_gflops": matmul["gflops"],
                       "fraction_of_matmul": fast_gflops / matmul["gflops"]}  # fmt: skip
    write_report(report, args.results, args.plot, "attention_figure", started)
    print_table(report)
    return report


if __name__ == "__main__":
    main()
