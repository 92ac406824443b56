"""The one decode benchmark driver: one new token decoded by each of some layers over caches that
hold a number of tokens, timed, with the bytes each step must read and the share of the
machine's measured bandwidth that makes.

A benchmark script names its ``Setting``s (a layer, how to fill its cache, what a step reads),
its lengths and its goals, and calls ``run_script``; the driver does the rest, the same way for
every script:

- measures the device's memory bandwidth in the same run (a copy and a sum over a large buffer;
  the larger is the limit), before the first length and after each one, keeping the best: on a
  shared machine one measurement can fall far below what the steps then get;
- fills each setting's cache with ``held`` random tokens (what they hold does not change the
  time) and times one decoding step of each, in turns (``common.time_in_turns``): median and
  interquartile range over blocks, and each round's median; after each call the cache is put
  back to ``held`` tokens, so every call decodes at the same position. By default every length
  of every setting is timed in one set of turns, so that a burst of someone else's work slows
  all lengths alike; ``by_length`` times the settings of one length together, then the next
  (less memory: one length's caches at a time, each dropped once timed but the longest's,
  which the profile reads);
- profiles one step of each setting at the longest length (where the time goes);
- writes the results file (the machine, the config, the bandwidth, one row per setting and
  length: bytes of the cache and the weights, bytes read, the timings; then the script's
  ratios and goals), draws the page's figure from it through ``common.save_site_figure``, and
  prints the table: milliseconds per token with the spread, MB read, the share of the limit.

``--device cuda`` runs on a GPU (bfloat16 by default there), timed with CUDA events, the
bandwidth measured on the device; the results then name the device.
"""

from __future__ import annotations

import json
import pathlib
import sys
from dataclasses import dataclass
from typing import Callable

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from common import (  # noqa: E402
    decode_parser, machine_info, measure_bandwidth, profile_step, replotted, set_threads,
    time_in_turns, write_report,
)


def weight_bytes(module: torch.nn.Module) -> int:
    """Bytes of every parameter: a decoding step multiplies the new token by each once."""
    return sum(p.numel() * p.element_size() for p in module.parameters())


def widths(values: dict, shrink: int, fields: dict) -> dict:
    """``fields`` (the benchmark's name -> the config.json's) of a published config from the
    family table, divided by ``shrink`` (1: as published; more: a quick run)."""
    return {ours: values[theirs] // shrink for ours, theirs in fields.items()}


def rewind_length(cache, held: int) -> None:
    """Put a cache that counts its tokens in ``length`` back to ``held`` tokens."""
    cache.length = held


@dataclass
class Setting:
    """One layer to decode with.

    Args:
        label: how tables and figures name it.
        build: ``context_length -> layer`` (on the device and dtype of the run).
        fill: ``(layer, held) -> cache`` holding ``held`` random tokens, room for one more.
        cache_bytes: ``(layer, cache, held) -> bytes`` of the cache a step reads.
        step: ``(layer, x, cache)``: one decoding step of the new token ``x`` ``(B, 1, d)``.
        rewind: ``(cache, held)``: the cache back to ``held`` tokens after a step.
        weights: ``layer -> bytes`` of the weights a step reads.
        shares_layer: another setting's name whose layer this one uses (built once).
        fields: ``layer -> dict`` of more fields for each of its rows.
    """

    label: str
    build: Callable
    fill: Callable
    cache_bytes: Callable
    step: Callable = lambda layer, x, cache: layer(x, cache=cache)
    rewind: Callable = rewind_length
    weights: Callable = weight_bytes
    shares_layer: str | None = None
    fields: Callable = lambda layer: {}


def _timed_step(setting: Setting, layer, x, cache, held: int):
    def step():
        with torch.no_grad():
            setting.step(layer, x, cache)
        setting.rewind(cache, held)

    return step


def measure(settings: dict, held: list, width: int, rounds: int, min_run_time: float,
            *, by_length: bool = False, bandwidth_mib: int = 1024, batch: int = 1,
            device: str = "cpu", dtype: torch.dtype = torch.float32) -> dict:
    """Every setting at every length held: the rows, the bandwidth samples and a profile of
    each setting at the longest length (see the module's docstring)."""
    context_length = max(held) + 1
    with torch.device(device):
        layers = {}
        for name, s in settings.items():
            torch.manual_seed(0)
            layers[name] = (layers[s.shares_layer] if s.shares_layer
                            else s.build(context_length).to(dtype).eval())
    x = torch.randn(batch, 1, width, device=device, dtype=dtype)  # (B, 1, d): the new token
    samples = [measure_bandwidth(bandwidth_mib, device=device)]
    rows, steps, caches, held_bytes = [], {}, {}, {}
    longest = max(held)

    def fill(length: int) -> None:
        for name, s in settings.items():
            with torch.device(device):
                caches[name, length] = s.fill(layers[name], length)
            held_bytes[name, length] = s.cache_bytes(layers[name], caches[name, length],
                                                     length)
            steps[name, length] = _timed_step(s, layers[name], x, caches[name, length],
                                              length)

    def drop(length: int) -> None:
        """Free one length's caches, once timed (the longest's stay: profiled)."""
        if length != longest:
            for name in settings:
                del caches[name, length], steps[name, length]

    def time_them(keys) -> dict:
        runs = {f"{name}@{length}": steps[name, length] for name, length in keys}
        timed = time_in_turns(runs, rounds, min_run_time)  # synchronizes CUDA itself
        return {(name, length): timed[f"{name}@{length}"] for name, length in keys}

    timings = {}
    for i, length in enumerate(held, 1):
        print(f"[{i}/{len(held)}] caches for {length} tokens held", file=sys.stderr,
              flush=True)
        fill(length)
        if by_length:
            timings |= time_them([(name, length) for name in settings])
            samples.append(measure_bandwidth(bandwidth_mib, device=device))
            drop(length)
    if not by_length:
        print("decoding, every length in turns", file=sys.stderr, flush=True)
        timings = time_them([(name, length) for length in held for name in settings])
        samples.append(measure_bandwidth(bandwidth_mib, device=device))
    for length in held:
        for name, s in settings.items():
            layer, read = layers[name], held_bytes[name, length]
            weights = s.weights(layer)
            rows.append({"setting": name, "held": length, "cache_bytes": read,
                         **s.fields(layer), "weight_bytes": weights,
                         "bytes_read": weights + read, **timings[name, length]})
    profiles = ({name: profile_step(steps[name, longest]) for name in settings}
                if device == "cpu" else {})
    bandwidth = {key: max(sample[key] for sample in samples) for key in samples[0]}
    return {"rows": rows, "profiles": profiles, "bandwidth": bandwidth,
            "bandwidth_samples": samples, "layers": layers}


def bandwidth_limit(report: dict) -> float:
    """The larger of the measured copy and read bandwidths, bytes per second."""
    return max(report["bandwidth"]["copy_bytes_per_s"], report["bandwidth"]["read_bytes_per_s"])


def shares_of_bandwidth(report: dict) -> dict:
    """``"setting@held"`` -> bytes read per second over the limit."""
    limit = bandwidth_limit(report)
    return {f"{r['setting']}@{r['held']}": r["bytes_read"] / r["median_s"] / limit
            for r in report["results"]}


def print_table(report: dict, labels: dict) -> None:
    """Bandwidth, then per row: milliseconds per token, spread, MB read, share of the limit."""
    bandwidth, limit = report["bandwidth"], bandwidth_limit(report)
    print(f"bandwidth ({report['machine'].get('device', 'cpu')}): copy "
          f"{bandwidth['copy_bytes_per_s'] / 1e9:.1f} GB/s, read "
          f"{bandwidth['read_bytes_per_s'] / 1e9:.1f} GB/s")
    width = max(len(label) for label in labels.values()) + 2
    print(f"{'setting':<{width}}{'held':>7}{'ms/token':>10}{'spread':>8}{'MB read':>9}"
          f"{'of limit':>9}")
    for row in report["results"]:
        achieved = row["bytes_read"] / row["median_s"]
        print(f"{labels[row['setting']]:<{width}}{row['held']:>7}"
              f"{row['median_s'] * 1e3:>10.2f}{row['iqr_s'] * 1e3:>8.2f}"
              f"{row['bytes_read'] / 1e6:>9.0f}{achieved / limit:>9.2f}")
    for name, ops in report.get("profiles", {}).items():
        print(name, ", ".join(f"{o['op']} {o['share']:.0%}" for o in ops))


def run_script(argv, *, doc: str, stem: str, full: dict, quick: dict, settings: Callable,
               ratios: Callable, figure: str, labels: dict, by_length: bool = False,
               width: Callable = lambda config: config["d_model"], extra: Callable | None = None,
               record: Callable | None = None, threads_help: str | None = None) -> dict:
    """A decode benchmark script's ``main``: parse ``argv``; measure ``settings(config)``
    (name -> ``Setting``) at ``config["held"]``; then ``extra(config, layers)`` (more
    measurements, kept under the key it returns, e.g. a prefill); ``record(config,
    layers)`` (fields to keep beside the rows); ``ratios(report)``; write, draw, print."""
    parser = decode_parser(doc, stem, **({"threads_help": threads_help} if threads_help else {}))
    args = parser.parse_args(argv)
    if (report := replotted(args, figure)) is not None:
        return report
    set_threads(parser, args.threads)
    config = dict(quick if args.quick else full)
    if args.held:
        config["held"] = args.held
    dtype = getattr(torch, args.dtype or ("bfloat16" if args.device == "cuda" else "float32"))
    measured = measure(settings(config), config["held"], width(config), config["rounds"],
                       config["min_run_time"], by_length=by_length,
                       bandwidth_mib=config["bandwidth_mib"], device=args.device,
                       dtype=dtype)
    report = {"machine": machine_info(quick=args.quick, device=args.device,
                                      dtype=str(dtype).removeprefix("torch.")),
              "config": config, "bandwidth": measured["bandwidth"],
              "bandwidth_samples": measured["bandwidth_samples"],
              "results": measured["rows"], "profiles": measured["profiles"]}
    if record is not None:
        report |= record(config, measured["layers"])
    if extra is not None:
        report |= extra(config, measured["layers"])
    report["ratios"] = {"bandwidth_limit_bytes_per_s": bandwidth_limit(report),
                        "fraction_of_bandwidth": shares_of_bandwidth(report),
                        **ratios(report)}
    write_report(report, args.results, args.plot, figure)
    print_table(report, labels)
    print(json.dumps({k: v for k, v in report["ratios"].items()
                      if k != "fraction_of_bandwidth"}, indent=1))
    return report
