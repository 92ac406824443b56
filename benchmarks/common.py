"""Helpers the benchmark scripts share: the machine a run took place on, timing in turns, the
machine's memory bandwidth, a profile of one call, saving a plot, the command line the decode
benchmarks share."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import pathlib
import platform
import sys
import time

import torch
from torch.utils import benchmark


def cpu_model() -> str:
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info(**extra) -> dict:
    """CPU (and GPU), threads, versions and date: what a results file needs to be read
    fairly."""
    if extra.get("device") == "cuda":
        extra = {**extra, "gpu": torch.cuda.get_device_name(), "cuda": torch.version.cuda}
    return {
        "cpu_model": cpu_model(),
        "machine": platform.machine(),
        "system": f"{platform.system()} {platform.release()}",
        "logical_cpus": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        **extra,
    }


def time_in_turns(runs: dict, rounds: int, min_run_time: float) -> dict:
    """Time each of ``runs`` (name -> callable) in turns; return name -> median, spread and count.

    In each round every callable gets one ``blocked_autorange`` block, in a rotating order, so a
    long stretch of someone else's work on a shared machine falls on several of them rather than
    on one; a short burst still slows only whichever runs then. So each result keeps, beside the
    median over all blocks (``median_s``) and their interquartile range (``iqr_s``), the time of
    each round (``rounds_s``, the median of that round's blocks): rounds that disagree show a
    cell the machine disturbed.
    """
    timers = {
        name: benchmark.Timer(stmt="run()", globals={"run": run}, label=name, num_threads=torch.get_num_threads())
        for name, run in runs.items()
    }
    blocks = {name: [] for name in runs}  # seconds per call, one entry per block
    per_round = {name: [] for name in runs}  # seconds per call, one entry per round
    names = list(runs)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:  # rotate who goes first
            times = timers[name].blocked_autorange(min_run_time=min_run_time).times
            blocks[name] += times
            per_round[name].append(torch.tensor(times, dtype=torch.float64).median().item())
    out = {}
    for name, times in blocks.items():
        t = torch.tensor(times, dtype=torch.float64)
        q1, median, q3 = (torch.quantile(t, q).item() for q in (0.25, 0.5, 0.75))
        out[name] = {"median_s": median, "iqr_s": q3 - q1, "blocks": len(times),
                     "rounds_s": per_round[name]}
    return out


def set_threads(parser, threads: int | None) -> None:
    """Use ``threads`` torch threads (None: torch's default); a bad count is a usage error."""
    if threads is None:
        return
    if threads < 1:
        parser.error(f"--threads must be a positive int, got {threads}")
    import torch

    torch.set_num_threads(threads)


def save_figure(fig, path: pathlib.Path) -> None:
    """Write ``fig`` to ``path`` (SVG unless the suffix says otherwise) on white, and close it."""
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format=path.suffix.lstrip(".") or "svg", facecolor="white")
    plt.close(fig)


def save_site_figure(report: dict, path: pathlib.Path, figure: str) -> None:
    """Save the wide figure the page draws at build from the same results:
    ``llm_attention_site.benchmark_plots.<figure>(report)``."""
    import matplotlib

    matplotlib.use("Agg")
    from llm_attention_site import benchmark_plots

    save_figure(getattr(benchmark_plots, figure)(report), path)


def write_report(report: dict, results: pathlib.Path, plot: pathlib.Path, figure: str,
                 started: float | None = None) -> None:
    """Write ``report`` to the results file and draw the page's figure from it; with
    ``started`` (a ``time.perf_counter()``), record and say how long the run took."""
    if started is not None:
        report["wall_s"] = time.perf_counter() - started
        print(f"writing {results} and {plot} after {report['wall_s']:.0f} s", file=sys.stderr)
    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text(json.dumps(report, indent=1) + "\n")
    save_site_figure(report, plot, figure)


def replotted(args, figure: str, show=None) -> dict | None:
    """With ``--replot``: the results file's report, its figure drawn again (and
    ``show(report)``); else None, and the script measures."""
    if not args.replot:
        return None
    report = json.loads(args.results.read_text())
    save_site_figure(report, args.plot, figure)
    if show is not None:
        show(report)
    return report


def decode_parser(doc: str, stem: str, threads_help: str = "torch threads (default 1)",
                  threads: int | None = 1):
    """The options of a decode benchmark: ``--quick``, ``--replot``, ``--threads``,
    ``--held`` (the lengths), ``--device`` and ``--dtype``, and where the results and the
    plot go (``benchmarks/<stem>_results.json``, ``<stem>_benchmark.svg``)."""
    folder = pathlib.Path(__file__).resolve().parent
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: checks the script")
    parser.add_argument("--replot", action="store_true", help="redraw from --results")
    parser.add_argument("--threads", type=int, default=threads, help=threads_help)
    parser.add_argument("--results", type=pathlib.Path, default=folder / f"{stem}_results.json")
    parser.add_argument("--plot", type=pathlib.Path, default=folder / f"{stem}_benchmark.svg")
    parser.add_argument("--held", type=int, nargs="+", help="tokens held (default: the script's)")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--dtype", choices=("float32", "bfloat16", "float16"),
                        help="default: float32 on the CPU, bfloat16 on CUDA")
    return parser


def measure_bandwidth(mib: int, repeats: int = 5, device: str = "cpu") -> dict:
    """Bytes per second of a large copy (read + write) and a large sum (read), best of
    ``repeats``, on the current thread count (on ``device``: a GPU's memory, timed after
    synchronizing)."""
    numbers = mib * 2**20 // 4
    src = torch.rand(numbers, device=device)
    dst = torch.empty(numbers, device=device)
    dst.copy_(src)  # touch every page first

    def timed(work) -> float:
        if device != "cpu":
            torch.cuda.synchronize()
        start = time.perf_counter()
        work()
        if device != "cpu":
            torch.cuda.synchronize()
        return time.perf_counter() - start

    best_copy = best_sum = float("inf")
    for _ in range(repeats):
        best_copy = min(best_copy, timed(lambda: dst.copy_(src)))
        best_sum = min(best_sum, timed(src.sum))
    size = numbers * 4
    return {"copy_bytes_per_s": 2 * size / best_copy, "read_bytes_per_s": size / best_sum,
            "size_bytes": size}


def profile_step(step, top: int = 5) -> list[dict]:
    """The ``top`` operators by their own time in one call of ``step``."""
    from torch.profiler import ProfilerActivity, profile

    step()  # warm
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step()
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    ranked = sorted(events, key=lambda e: e.self_cpu_time_total, reverse=True)[:top]
    return [{"op": e.key, "share": e.self_cpu_time_total / total} for e in ranked]
