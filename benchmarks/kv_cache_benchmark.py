"""Generate with and without a KV cache at GPT-2-small width, timing every new token.

The model: ``GPTModel`` with width 768, 12 heads and 3 blocks (GPT-2 small has 12 of the same
blocks), a vocabulary of 256 ids (byte-sized, so that the output layer, which is not what this
measures, stays small), float32, eval mode, batch 1, the fast path. Random weights: speed does not
depend on what the weights are.

From a prompt of 16 tokens, greedy decoding adds 1,024 tokens twice:

- ``uncached``: every step runs the model on the whole sequence so far (``use_cache=False`` in
  ``generate``);
- ``cached``: the prompt runs once (prefill), then every step runs the model on the new token
  alone, with one ``KVCache`` per block.

Every step is timed on its own, so one run of 1,024 tokens also gives the time to generate its
first 128, 256 or 512 (generating N tokens is the first N steps of generating more). The cached run
is repeated (``--repeats``) and each step's median kept; the uncached run, which takes minutes, runs
once. Both runs must produce the same tokens.

Goals on the project's 2-core CPU: at N = 1,024 the cached run at least 10x faster; with the cache,
the last 100 tokens take at most 1.5x the time of the first 100; without it, the time per token
grows with the length.

Writes ``benchmarks/kv_cache_results.json`` (machine, threads, versions, every step's time) and
``benchmarks/kv_cache_benchmark.svg`` (the page draws the same plot at build, from the
results file), and prints a table and the ratios against the goals.

    python benchmarks/kv_cache_benchmark.py --threads 1   # full run, several minutes
    python benchmarks/kv_cache_benchmark.py --quick       # tiny sizes, seconds
    python benchmarks/kv_cache_benchmark.py --replot      # redraw from the results file
"""

from __future__ import annotations

import json
import pathlib
import statistics
import sys
import time

import torch

from llm_attention.generate import generate, new_caches
from llm_attention.gpt import GPTModel

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from common import (  # noqa: E402
    decode_parser, machine_info, save_site_figure, replotted, set_threads, write_report,
)

FULL = dict(emb_dim=768, num_heads=12, num_layers=3, vocab_size=256, prompt=16, new_tokens=1024,
            lengths=[128, 256, 512, 1024], repeats=3, window=100)  # fmt: skip
QUICK = dict(emb_dim=64, num_heads=4, num_layers=2, vocab_size=64, prompt=4, new_tokens=64,
             lengths=[16, 32, 64], repeats=2, window=10)  # fmt: skip


def build(cfg: dict) -> GPTModel:
    torch.manual_seed(0)
    model = GPTModel(cfg["vocab_size"], cfg["prompt"] + cfg["new_tokens"], cfg["emb_dim"],
                     cfg["num_heads"], cfg["num_layers"], fast_path=True)  # fmt: skip
    return model.eval()


@torch.no_grad()
def timed_generation(model, prompt, new_tokens, use_cache, label):
    """Greedy decoding as ``generate`` does it, timing each step; returns tokens and seconds."""
    caches = new_caches(model, prompt.shape[0]) if use_cache else None
    tokens, new, seconds = prompt, prompt, []
    for step in range(new_tokens):
        start = time.perf_counter()
        logits = model(new, caches=caches)[:, -1]  # (B, V)
        next_token = logits.argmax(dim=-1, keepdim=True)  # (B, 1)
        seconds.append(time.perf_counter() - start)
        tokens = torch.cat([tokens, next_token], dim=1)
        new = next_token if use_cache else tokens
        if (step + 1) % max(1, new_tokens // 8) == 0:
            print(f"  {label}: {step + 1}/{new_tokens} tokens, {sum(seconds):.1f} s",
                  file=sys.stderr, flush=True)  # fmt: skip
    return tokens, seconds


def goals(report: dict) -> dict:
    cfg, steps = report["config"], report["steps"]
    window, n_max = cfg["window"], cfg["new_tokens"]
    cached, uncached = steps["cached"], steps["uncached"]
    # step 0 runs the prompt (the prefill when cached); the per-token goals look at steps 1..
    first = slice(1, 1 + window)
    last = slice(n_max - window, n_max)
    found = {
        "speedup_at_max": {
            "what": f"uncached time / cached time, N={n_max}",
            "value": sum(uncached) / sum(cached), "goal": ">= 10"},
        "cached_last_vs_first": {
            "what": f"cached: last {window} tokens / first {window}",
            "value": sum(cached[last]) / sum(cached[first]), "goal": "<= 1.5"},
        "uncached_last_vs_first": {
            "what": f"uncached: last {window} tokens / first {window}",
            "value": sum(uncached[last]) / sum(uncached[first]), "goal": "> 1"},
    }  # fmt: skip
    checks = {">= 10": lambda v: v >= 10, "<= 1.5": lambda v: v <= 1.5, "> 1": lambda v: v > 1}
    for goal in found.values():
        goal["met"] = checks[goal["goal"]](goal["value"])
    return found


def table(report: dict) -> list[dict]:
    steps = report["steps"]
    rows = []
    for n in report["config"]["lengths"]:
        cached, uncached = sum(steps["cached"][:n]), sum(steps["uncached"][:n])
        rows.append({"new_tokens": n, "uncached_s": uncached, "cached_s": cached,
                     "speedup": uncached / cached})  # fmt: skip
    return rows


def print_report(report: dict) -> None:
    print(f"\n{'new tokens':>10} {'uncached s':>11} {'cached s':>9} {'speedup':>8}")
    for row in report["table"]:
        print(f"{row['new_tokens']:10d} {row['uncached_s']:11.2f} {row['cached_s']:9.3f} "
              f"{row['speedup']:7.1f}x")  # fmt: skip
    print()
    for name, g in report["goals"].items():
        verdict = "goal met" if g["met"] else "GOAL MISSED"
        print(f"{name:24} {g['what']:38} {g['value']:8.2f}  goal {g['goal']}  {verdict}")


def plot(report: dict, path: pathlib.Path) -> None:
    """Save the wide figure the page draws at build (``benchmark_plots.kv_cache_figure``)."""
    save_site_figure(report, path, "kv_cache_figure")


def main(argv: list[str] | None = None) -> dict:
    parser = decode_parser(__doc__, "kv_cache", threads_help="torch threads", threads=None)
    args = parser.parse_args(argv)
    if (report := replotted(args, "kv_cache_figure", print_report)) is not None:
        return report
    set_threads(parser, args.threads)
    cfg = QUICK if args.quick else FULL
    model = build(cfg)
    prompt = torch.randint(0, cfg["vocab_size"], (1, cfg["prompt"]),
                           generator=torch.Generator().manual_seed(1))  # fmt: skip
    started = time.perf_counter()
    print(f"d={cfg['emb_dim']}, {cfg['num_heads']} heads, {cfg['num_layers']} blocks, "
          f"{cfg['new_tokens']} new tokens, {torch.get_num_threads()} threads",
          file=sys.stderr)  # fmt: skip
    timed_generation(model, prompt, min(8, cfg["new_tokens"]), True, "warm-up")
    cached_runs = []
    for r in range(cfg["repeats"]):
        tokens, seconds = timed_generation(model, prompt, cfg["new_tokens"], True,
                                           f"cached {r + 1}/{cfg['repeats']}")  # fmt: skip
        cached_runs.append(seconds)
    uncached_tokens, uncached = timed_generation(model, prompt, cfg["new_tokens"], False,
                                                 "uncached")  # fmt: skip
    if not torch.equal(tokens, uncached_tokens):
        raise SystemExit("the cached and uncached runs generated different tokens")
    reference, _ = generate(model, prompt, min(16, cfg["new_tokens"]))
    if not torch.equal(reference, tokens[:, : reference.shape[1]]):
        raise SystemExit("the timed loop does not generate what generate() does")
    cached = [statistics.median(step) for step in zip(*cached_runs)]
    report = {
        "machine": machine_info(quick=args.quick),
        "config": cfg | {"dtype": "float32", "batch": 1},
        "steps": {"cached": cached, "uncached": uncached},
    }
    report["table"] = table(report)
    report["goals"] = goals(report)
    write_report(report, args.results, args.plot, "kv_cache_figure", started)
    print_report(report)
    return report


if __name__ == "__main__":
    main()
