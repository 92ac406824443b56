# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""The plots of the benchmarks, drawn from their committed results files.

Each ``*_figure(report, narrow=False)`` returns a matplotlib figure: two panels
side by side, or, with ``narrow``, stacked and narrower, for a phone. The pages
draw both at build from the results file and print them with
``figures.to_html`` (a light and a dark variant of each) inside
``figures.wide_and_narrow``, which shows the variant that fits the screen. The benchmark
scripts save the wide figure as an SVG beside their results, to look at without
building the site. Not a model module: it needs matplotlib.

Each variant is drawn as wide as the narrowest column that shows it
(``figures.WIDE_COLUMN_IN``, ``figures.PHONE_COLUMN_IN``), so a page shows it at its
drawn size, its text at 9 points (12 CSS px) or more. Log axes are labelled with plain
numbers (``figures.plain_log_labels``): a power of ten's exponent would be drawn at 70 %
of that. The legends sit where no line runs: beside the data or in a row of their own.
"""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter, NullFormatter, NullLocator

# Importing figures applies its settings: text drawn in the ink the dark variant swaps.
from .figures import PHONE_COLUMN_IN, WIDE_COLUMN_IN, plain_log_labels

# Every text of these plots: 9 points, 12 CSS px at the size a page shows them.
TEXT_PT = 9

# Two colours told apart in both palettes and by readers who confuse red and green.
CACHED, UNCACHED = "#1f77b4", "#e8710a"
DECODE_SETTINGS = {
    "mha": ("multi-head (32 kv heads)", "#e8710a", "o"),
    "gqa": ("grouped-query (4 kv heads)", "#1f77b4", "s"),
    "mqa": ("multi-query (1 kv head)", "#2ca02c", "^"),
    "window": ("grouped-query + window 1,024", "#9467bd", "D"),
}


def _panels(narrow: bool, height: float, legend_rows: float = 0.0):
    """Two panels: side by side in the wide column, stacked in the phone's; with
    ``legend_rows``, a row of that height (in inches) under them for a legend."""
    shape = (2, 1) if narrow else (1, 2)
    width = PHONE_COLUMN_IN if narrow else WIDE_COLUMN_IN
    total = height * shape[0]
    if legend_rows:
        fig = plt.figure(figsize=(width, total + legend_rows))
        grid = fig.add_gridspec(shape[0] + 1, shape[1],
                                height_ratios=[height] * shape[0] + [legend_rows])
        axes = [fig.add_subplot(grid[i, j]) for i in range(shape[0])
                for j in range(shape[1])]
        legend_row = fig.add_subplot(grid[shape[0], :])
        legend_row.axis("off")
    else:
        fig, grid = plt.subplots(*shape, figsize=(width, total))
        axes, legend_row = list(grid.flat), None
    plt.setp(fig, facecolor="none")
    return fig, axes, legend_row


def _suptitle(fig: plt.Figure, text: str, narrow: bool) -> None:
    """The machine and settings above the panels: on two lines in a phone's column."""
    fig.suptitle(textwrap.fill(text, 40) if narrow else text, fontsize=TEXT_PT)


def _log_axes(*axes, which: str = "xy") -> None:
    for ax in axes:
        for name in which:
            axis = getattr(ax, f"{name}axis")
            if axis.get_scale() == "log":
                plain_log_labels(axis)


def kv_cache_figure(report: dict, narrow: bool = False) -> plt.Figure:
    """Time of each generation step, and total time for N tokens, with and without a
    cache (``benchmarks/kv_cache_results.json``)."""
    steps, cfg = report["steps"], report["config"]
    with plt.rc_context({"font.size": TEXT_PT}):
        fig, (left, right), _ = _panels(narrow, 3.0 if narrow else 3.2)
        positions = range(2, cfg["new_tokens"] + 1)  # step 1, the prompt, left out
        for name, color in (("uncached", UNCACHED), ("cached", CACHED)):
            step_ms = [s * 1e3 for s in steps[name][1:]]
            left.plot(positions, step_ms, color=color, linewidth=0.7, label=name)
            totals = [row[f"{name}_s"] for row in report["table"]]
            right.plot(cfg["lengths"], totals, marker="o", color=color, label=name)
        left.set(yscale="log", xlabel="new token number",
                 ylabel="time of that step (ms)", title="Time per new token")
        right.set(xscale="log", yscale="log", xlabel="new tokens generated",
                  ylabel="total time (s)", title="Time to generate $N$ tokens")
        lengths = cfg["lengths"]
        right.set_xticks(lengths, labels=[str(n) for n in lengths])
        right.xaxis.set_minor_locator(NullLocator())  # only the lengths that ran
        right.xaxis.set_minor_formatter(NullFormatter())
        _log_axes(left, right)
        for ax in (left, right):
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(loc="center right" if ax is left else "upper left")
        machine = report["machine"]
        _suptitle(fig, f"{machine['threads']} thread, torch {machine['torch']}, "
                  f"float32, width {cfg['emb_dim']}, {cfg['num_layers']} blocks",
                  narrow)
        fig.tight_layout()
    return fig


def decode_figure(report: dict, narrow: bool = False) -> plt.Figure:
    """Time to decode one token, and the cache held, against the tokens held, for four
    settings of one layer (``benchmarks/decode_results.json``)."""
    with plt.rc_context({"font.size": TEXT_PT}):
        fig, (left, right), legend_row = _panels(narrow, 2.9 if narrow else 3.0,
                                                 legend_rows=0.75 if narrow else 0.5)
        for setting, (label, color, marker) in DECODE_SETTINGS.items():
            rows = [r for r in report["results"] if r["setting"] == setting]
            held = [r["held"] for r in rows]
            left.plot(held, [r["median_s"] * 1e3 for r in rows], marker=marker,
                      color=color, label=label)
            right.plot(held, [r["cache_bytes"] / 2**20 for r in rows], marker=marker,
                       color=color, label=label)
        left.set(xlabel="tokens held", ylabel="ms per decoded token",
                 title="Decoding one token (one layer)")
        right.set(xlabel="tokens held", ylabel="MiB (log scale)",
                  title="KV cache of one layer", yscale="log")
        left.set_ylim(bottom=0)
        _log_axes(right)
        for ax in (left, right):
            ax.grid(alpha=0.3)
        legend_row.legend(*left.get_legend_handles_labels(), loc="center",
                          ncol=1 if narrow else 2, borderaxespad=0)
        machine = report["machine"]
        title = f"{machine['threads']} thread, torch {machine['torch']}, float32"
        _suptitle(fig, title, narrow)
        fig.tight_layout()
    return fig


LATENT_SETTINGS = {
    "mha": ("multi-head (128 kv heads)", "#e8710a", "o"),
    "gqa": ("grouped-query (8 kv heads)", "#1f77b4", "s"),
    "mla_plain": ("latent, plain", "#9467bd", "D"),
    "mla_absorbed": ("latent, absorbed", "#2ca02c", "^"),
}


def latent_decode_figure(report: dict, narrow: bool = False) -> plt.Figure:
    """Time to decode one token against the tokens held, and the bandwidth each step
    achieved as a fraction of the machine's
    (``benchmarks/latent_decode_results.json``)."""
    limit = report["ratios"]["bandwidth_limit_bytes_per_s"]
    with plt.rc_context({"font.size": TEXT_PT}):
        fig, (left, right), legend_row = _panels(narrow, 2.9 if narrow else 3.0,
                                                 legend_rows=1.0 if narrow else 0.6)
        for setting, (label, color, marker) in LATENT_SETTINGS.items():
            rows = [r for r in report["results"] if r["setting"] == setting]
            held = [r["held"] for r in rows]
            left.plot(held, [r["median_s"] * 1e3 for r in rows], marker=marker,
                      color=color, label=label)
            achieved = [r["bytes_read"] / r["median_s"] / limit for r in rows]
            right.plot(held, achieved, marker=marker, color=color, label=label)
        half = right.axhline(0.5, color="#7f7f7f", linestyle="--", linewidth=1.5,
                             label="half the measured bandwidth")
        left.set(xscale="log", yscale="log", xlabel="tokens held",
                 ylabel="ms per decoded token (log)",
                 title="Decoding one token (one layer)")
        right.set(xscale="log", xlabel="tokens held", ylim=(0, 1.05),
                  ylabel="bytes read / time / bandwidth",
                  title="Share of the machine's bandwidth")
        _log_axes(left, which="y")
        for ax in (left, right):
            # every other length on a phone, so that the labels keep apart
            shown = held if not narrow else held[::2]
            ax.set_xticks(shown, labels=[f"{h:,}" for h in shown])
            ax.xaxis.set_minor_locator(NullLocator())
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.grid(alpha=0.3, which="both")
        handles, labels = left.get_legend_handles_labels()
        legend_row.legend([*handles, half], [*labels, half.get_label()], loc="center",
                          ncol=1 if narrow else 2, borderaxespad=0)
        machine = report["machine"]
        _suptitle(fig, f"{machine['threads']} thread, torch {machine['torch']}, "
                  "float32, DeepSeek-V3's widths", narrow)
        fig.tight_layout()
    return fig


SPARSE_SETTINGS = {
    "dense": ("dense latent attention", "#e8710a", "o", "-"),
    "sparse_masked": ("sparse, masked (reference form)", "#9467bd", "D", "--"),
    "sparse_gathered": ("sparse, gathered", "#1f77b4", "s", "-"),
}


def sparse_decode_figure(report: dict, narrow: bool = False) -> plt.Figure:
    """Time to decode one token against the tokens held, dense and sparse latent
    attention, and the bandwidth each step achieved as a fraction of the machine's
    (``benchmarks/sparse_decode_results.json``); a dotted line where the byte counts
    predict the gathered form to start winning."""
    limit = report["ratios"]["bandwidth_limit_bytes_per_s"]
    predicted = report["ratios"]["predicted_crossover_held"]
    with plt.rc_context({"font.size": TEXT_PT}):
        fig, (left, right), legend_row = _panels(narrow, 2.9 if narrow else 3.0,
                                                 legend_rows=0.9 if narrow else 0.6)
        for setting, (label, color, marker, style) in SPARSE_SETTINGS.items():
            rows = [r for r in report["results"] if r["setting"] == setting]
            held = [r["held"] for r in rows]
            left.plot(held, [r["median_s"] * 1e3 for r in rows], marker=marker,
                      color=color, linestyle=style, label=label)
            achieved = [r["bytes_read"] / r["median_s"] / limit for r in rows]
            right.plot(held, achieved, marker=marker, color=color, linestyle=style,
                       label=label)
        # The two reference lines drawn thicker than a grid line, and their legend
        # samples longer than the default, so that the dotted one shows as dots (at
        # 1 pt it was a faint grey smudge in the legend).
        crossover = left.axvline(predicted, color="#7f7f7f", linestyle=":",
                                 linewidth=1.8,
                                 label="where the bytes predict the gathered\nform wins"
                                 if narrow else "where the bytes predict the gathered "
                                 "form wins")
        half = right.axhline(0.5, color="#7f7f7f", linestyle="--", linewidth=1,
                             label="half the measured bandwidth")
        left.set(xscale="log", yscale="log", xlabel="tokens held",
                 ylabel="ms per decoded token (log)",
                 title="Decoding one token (one layer)")
        right.set(xscale="log", xlabel="tokens held", ylim=(0, 1.05),
                  ylabel="bytes read / time / bandwidth",
                  title="Share of the machine's bandwidth")
        for ax in (left, right):
            shown = held if not narrow else held[::2]  # a phone: every other length
            ax.set_xticks(shown, labels=[f"{h // 1024}K" for h in shown])
            ax.xaxis.set_minor_locator(NullLocator())
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.grid(alpha=0.3, which="both")
        _log_axes(left, which="y")
        left.yaxis.set_minor_formatter(  # 200 and 500 too: one decade has few labels
            FuncFormatter(lambda v, _: f"{v:,g}" if f"{v:g}"[0] in "25" else ""))
        handles, labels = left.get_legend_handles_labels()
        handles = [h for h in handles if h is not crossover] + [crossover, half]
        legend_row.legend(handles, [h.get_label() for h in handles], loc="center",
                          ncol=1 if narrow else 2, borderaxespad=0, handlelength=3.2)
        machine = report["machine"]
        _suptitle(fig, f"{machine['threads']} thread, torch {machine['torch']}, "
                  "float32, DeepSeek-V3.2's widths", narrow)
        fig.tight_layout()
    return fig


# benchmarks/attention_benchmark.py's implementations, in its order
ATTENTION_LABELS = {
    "wrapper": "MultiHeadAttentionWrapper",
    "obvious": "explicit, written the obvious way",
    "explicit": "MultiHeadAttention (explicit)",
    "fast": "MultiHeadAttention (fast_path=True)",
    "torch_mha": "nn.MultiheadAttention + causal mask",
    "bare": "bare scaled_dot_product_attention",
}


# Their short names, for the bars of the memory panel (the legend gives the long ones).
ATTENTION_SHORT = {
    "wrapper": "wrapper",
    "obvious": "obvious",
    "explicit": "explicit",
    "fast": "fast path",
    "torch_mha": "nn.MHA",
    "bare": "bare SDPA",
}


def _row(results, impl, batch, tokens, mode) -> dict:
    return next(r for r in results
                if (r["impl"], r["batch"], r["tokens"], r["mode"])
                == (impl, batch, tokens, mode))


def attention_figure(report: dict, narrow: bool = False) -> plt.Figure:
    """Time and memory of the six implementations against the sequence length, and the
    memory of each at the longest length (``benchmarks/results.json``): four panels, two
    by two, or stacked for a phone; the legend in a row of its own above them, where it
    covers no line."""
    results, sizes = report["results"], [tuple(s) for s in report["config"]["sizes"]]
    main_batch = max(b for b, _ in sizes)
    lengths = [t for b, t in sizes if b == main_batch]
    long_b, long_t = max(sizes, key=lambda s: s[1])
    with plt.rc_context({"font.size": TEXT_PT}):
        if narrow:  # the legend's row, then the four panels one under the other
            fig = plt.figure(figsize=(PHONE_COLUMN_IN, 12.2))
            grid = fig.add_gridspec(5, 1, height_ratios=[0.7, 3, 3, 3, 3])
            axes = [fig.add_subplot(grid[i, 0]) for i in range(1, 5)]
        else:  # the legend's row, then two by two
            fig = plt.figure(figsize=(WIDE_COLUMN_IN, 7.1))
            grid = fig.add_gridspec(3, 2, height_ratios=[0.3, 3, 3])
            axes = [fig.add_subplot(grid[i, j]) for i in (1, 2) for j in (0, 1)]
        legend_row = fig.add_subplot(grid[0, :])
        legend_row.axis("off")
        plt.setp(fig, facecolor="none")
        panels = [
            ("forward", "median_s", 1e3, "time (ms)", f"Forward, batch {main_batch}"),
            ("forward+backward", "median_s", 1e3, "time (ms)",
             f"Forward + backward, batch {main_batch}"),
            ("forward+backward", "peak_bytes", 1 / 2**20, "peak extra memory (MiB)",
             f"Memory, forward + backward,\nbatch {main_batch}"),
        ]
        for ax, (mode, key, scale, ylabel, title) in zip(axes, panels):
            for i, (impl, label) in enumerate(ATTENTION_LABELS.items()):
                points = [(t, _row(results, impl, main_batch, t, mode)[key])
                          for t in lengths]
                points = [(t, y * scale) for t, y in points if y]  # log axes: no 0
                dashed = impl == "bare"  # so the fast path's line shows where they meet
                ax.plot([t for t, _ in points], [y for _, y in points], color=f"C{i}",
                        marker="x" if dashed else "o",
                        linestyle="--" if dashed else "-", label=label)
            ax.set(xscale="log", yscale="log", xlabel="tokens per sequence",
                   ylabel=ylabel, title=title)
            ax.set_xticks(lengths, labels=[str(t) for t in lengths])
            ax.xaxis.set_minor_locator(NullLocator())
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,g}"))
            ax.yaxis.set_minor_formatter(
                FuncFormatter(lambda v, _: f"{v:,g}" if f"{v:g}"[0] in "25" else ""))
            ax.grid(True, which="both", alpha=0.3)
        ax = axes[3]
        memory = [_row(results, impl, long_b, long_t, "forward+backward")["peak_bytes"]
                  for impl in ATTENTION_LABELS]
        if all(m is not None for m in memory):
            bars = ax.barh(range(len(memory)), [m / 2**20 for m in memory],
                           color=[f"C{i}" for i in range(len(memory))])
            ax.bar_label(bars, labels=[f"{m / 2**20:,.0f} MiB" for m in memory],
                         padding=3)
            ax.set_xlim(right=max(max(memory) / 2**20 * 1.6, 1))
        # The legend above names them in full.
        short = list(ATTENTION_SHORT.values())
        ax.set_yticks(range(len(short)), labels=short)
        ax.invert_yaxis()
        ax.set(xlabel="peak extra memory (MiB)",
               title=f"Memory, forward + backward,\n$T$ = {long_t}, batch {long_b}")
        legend_row.legend(*axes[0].get_legend_handles_labels(), loc="center",
                          ncol=1 if narrow else 2, borderaxespad=0)
        machine, config = report["machine"], report["config"]
        _suptitle(fig, f"{machine['threads']} threads, torch {machine['torch']}, "
                  f"float32, width {config['d_model']}, {config['num_heads']} heads",
                  narrow)
        fig.tight_layout()
    return fig


LINEAR_SETTINGS = {
    "gdn": ("Gated DeltaNet (state)", "#2ca02c", "^"),
    "gqa": ("grouped-query (KV cache)", "#1f77b4", "s"),
}


def linear_decode_figure(report: dict, narrow: bool = False) -> plt.Figure:
    """Time to decode one token, and the bytes that step reads, against the tokens held,
    for Gated DeltaNet and grouped-query attention at Qwen3-Next's width
    (``benchmarks/linear_decode_results.json``); a dashed line where the grouped-query
    step starts to read more."""
    crossing = report["ratios"]["gqa_step_reads_more_from"]
    with plt.rc_context({"font.size": TEXT_PT}):
        fig, (left, right), legend_row = _panels(narrow, 2.9 if narrow else 3.0,
                                                 legend_rows=0.7 if narrow else 0.45)
        for setting, (label, color, marker) in LINEAR_SETTINGS.items():
            rows = [r for r in report["results"] if r["setting"] == setting]
            held = [r["held"] for r in rows]
            left.plot(held, [r["median_s"] * 1e3 for r in rows], marker=marker,
                      color=color, label=label)
            right.plot(held, [r["bytes_read"] / 1e6 for r in rows], marker=marker,
                       color=color, label=label)
        for ax in (left, right):
            ax.axvline(crossing, color="#7f7f7f", linestyle="--", linewidth=1,
                       label="the grouped-query step\nreads more from here" if narrow
                       else "the grouped-query step reads more from here")
            ax.set_xscale("log")
            shown = held if not narrow else held[::2]  # a phone: every other length
            ax.set_xticks(shown, labels=[f"{h // 1024}K" for h in shown])
            ax.xaxis.set_minor_locator(NullLocator())
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.grid(alpha=0.3, which="both")
            ax.set_ylim(bottom=0)
        left.set(xlabel="tokens held", ylabel="ms per decoded token",
                 title="Decoding one token (one layer)")
        right.set(xlabel="tokens held", ylabel="MB read per step",
                  title="Weights + KV cache,\nor weights + state" if narrow
                  else "Weights + KV cache, or weights + state")
        handles, _ = left.get_legend_handles_labels()
        legend_row.legend(handles, [h.get_label() for h in handles], loc="center",
                          ncol=1 if narrow else 2, borderaxespad=0)
        machine = report["machine"]
        _suptitle(fig, f"{machine['threads']} thread, torch {machine['torch']}, "
                  "float32, Qwen3-Next's width", narrow)
        fig.tight_layout()
    return fig


COMPRESSED_SETTINGS = {
    "mla": ("dense latent (V3.2)", "#e8710a", "o", "-"),
    "dsa": ("sparse latent (V3.2)", "#9467bd", "D", "--"),
    "csa": ("CSA (V4-Flash)", "#1f77b4", "s", "-"),
    "hca": ("HCA (V4-Flash)", "#2ca02c", "^", "-"),
}
COMPRESSED_SHORT = {"mla": "dense latent", "dsa": "sparse latent", "csa": "CSA",
                    "hca": "HCA"}


def _compressed_label(setting: str, config: dict) -> str:
    """A setting's legend label, with the sizes the run used."""
    v4 = config["v4"]
    detail = {
        "mla": "every token",
        "dsa": f"top {config['index_topk']:,} tokens",
        "csa": f"1 entry per {v4['csa']['compress_rate']}, top "
               f"{v4['csa']['index_topk']:,}",
        "hca": f"1 entry per {v4['hca']['compress_rate']}, all",
    }[setting]
    return f"{COMPRESSED_SETTINGS[setting][0]}: {detail}"


def compressed_decode_figure(report: dict, narrow: bool = False) -> plt.Figure:
    """Time to decode one token, and the bytes that step reads, against the tokens held,
    for a layer of DeepSeek-V4-Flash (CSA and HCA) and of DeepSeek-V3.2 (sparse and
    dense latent attention) (``benchmarks/compressed_decode_results.json``); a dotted
    line where the byte counts predict one setting to start reading less than another
    within the lengths measured."""
    config, crossings = report["config"], report["ratios"]["crossings"]
    held = config["held"]
    with plt.rc_context({"font.size": TEXT_PT}):
        fig, (left, right), legend_row = _panels(narrow, 2.9 if narrow else 3.0,
                                                 legend_rows=1.5 if narrow else 0.75)
        for setting, (_, color, marker, style) in COMPRESSED_SETTINGS.items():
            rows = [r for r in report["results"] if r["setting"] == setting]
            lengths = [r["held"] for r in rows]
            label = _compressed_label(setting, config)
            left.plot(lengths, [r["median_s"] * 1e3 for r in rows], marker=marker,
                      color=color, linestyle=style, label=label)
            right.plot(lengths, [r["bytes_read"] / 1e6 for r in rows], marker=marker,
                       color=color, linestyle=style, label=label)
        lines = []  # the crossings' dotted lines, labelled on the left panel only
        for name, crossing in crossings.items():
            a, b = name.split("_vs_")
            meet = crossing["bytes"]["lines_meet_at"]
            if (crossing["bytes"]["a_grows_slower"] and meet is not None
                    and min(held) < meet < max(held)):
                text = (f"{COMPRESSED_SHORT[a]} reads fewer bytes than "
                        f"{COMPRESSED_SHORT[b]} from here")
                lines.append(left.axvline(meet, color="#7f7f7f", linestyle=":",
                                          linewidth=1.8, label=text))
                right.axvline(meet, color="#7f7f7f", linestyle=":", linewidth=1.8)
        left.set(xscale="log", yscale="log", xlabel="tokens held",
                 ylabel="ms per decoded token (log)",
                 title="Decoding one token (one layer)")
        right.set(xscale="log", xlabel="tokens held",
                  ylabel="MB: weights + cache read", title="Bytes a step reads")
        right.set_ylim(bottom=0)
        for ax in (left, right):
            shown = held[::2]  # every other length: eight labels run together
            ax.set_xticks(shown, labels=[f"{h // 1024}K" if h >= 1024 else str(h)
                                         for h in shown])
            ax.xaxis.set_minor_locator(NullLocator())
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.grid(alpha=0.3, which="both")
        _log_axes(left, which="y")
        handles = left.get_legend_handles_labels()[0]  # the settings, then the lines
        legend_row.legend(handles, [textwrap.fill(h.get_label(), 38)
                                    for h in handles],
                          loc="center", ncol=1 if narrow else 2, borderaxespad=0,
                          handlelength=3.2)
        machine = report["machine"]
        _suptitle(fig, f"{machine['threads']} thread, torch {machine['torch']}, "
                  f"{machine.get('dtype', 'float32')}, V4-Flash's and V3.2's widths",
                  narrow)
        fig.tight_layout()
    return fig


MAMBA2_SETTINGS = {
    "mamba2": ("Mamba-2 (state)", "#2ca02c", "^"),
    "gdn": ("Gated DeltaNet (state)", "#9467bd", "D"),
    "gqa": ("grouped-query (KV cache)", "#1f77b4", "s"),
}
# Who ran each bar of the prefill panel: this package's chunked form, transformers'
# pure-torch function, the token loop.
MAMBA2_BARS = {"ours": ("chunked form, ours", "#2ca02c"),
               "transformers": ("transformers' torch path", "#e8710a"),
               "loop": ("token loop, ours", "#9467bd")}


def mamba2_figure(report: dict, narrow: bool = False) -> plt.Figure:
    """Time to decode one token against the tokens held, Mamba-2, Gated DeltaNet and
    grouped-query attention at Nemotron-H's width; and one call on a prompt: Mamba-2's
    chunked form against its token loop, and the chunked forms of Gated DeltaNet, Kimi
    Delta Attention and Mamba-2 against transformers'
    (``benchmarks/mamba2_results.json``), bars at the median with the spread."""
    prefill, versus = report["prefill"], report["versus"]
    shape = f"{versus['heads']} heads of {versus['head_dim']}"
    mamba = f"{prefill['heads']} heads of {prefill['head_dim']}"
    names = {"gdn": f"Gated DeltaNet, {shape}", "kda": f"Kimi Delta Attention, {shape}",
             "mamba2": f"Mamba-2 scan, {mamba}"}
    pairs = [(f"Mamba-2's rule, {mamba}",
              [("loop", prefill["recurrent"]), ("ours", prefill["chunked"])])]
    pairs += [(names[name],
               [("transformers", pair["transformers"]), ("ours", pair["ours"])])
              for name, pair in versus["pairs"].items()]
    with plt.rc_context({"font.size": TEXT_PT}):
        fig, (left, right), legend_row = _panels(narrow, 3.4 if narrow else 3.6,
                                                 legend_rows=1.25 if narrow else 0.65)
        for setting, (label, color, marker) in MAMBA2_SETTINGS.items():
            rows = [r for r in report["results"] if r["setting"] == setting]
            held = [r["held"] for r in rows]
            left.plot(held, [r["median_s"] * 1e3 for r in rows], marker=marker,
                      color=color, label=label)
        left.set(xscale="log", xlabel="tokens held", ylabel="ms per decoded token",
                 title="Decoding one token (one layer)")
        left.set_ylim(bottom=0)
        shown = held if not narrow else held[::2]  # a phone: every other length
        left.set_xticks(shown, labels=[f"{h // 1024}K" if h >= 1024 else str(h)
                                       for h in shown])
        left.xaxis.set_minor_locator(NullLocator())
        left.xaxis.set_minor_formatter(NullFormatter())
        left.grid(alpha=0.3, which="both")
        # each pair: its name on a row of its own, then its two bars, top to bottom
        top = 3 * len(pairs)
        for i, (name, cells) in enumerate(pairs):
            row = top - 3 * i
            right.text(0.01, row - 0.2, name, transform=right.get_yaxis_transform(),
                       va="center", ha="left")
            for j, (who, cell) in enumerate(cells, 1):
                right.barh(row - j, cell["median_s"] * 1e3, xerr=cell["iqr_s"] * 1e3,
                           height=0.8, color=MAMBA2_BARS[who][1],
                           error_kw={"ecolor": "#7f7f7f"})
        right.set_ylim(0.4, top + 0.4)
        right.set_yticks([])
        right.set(xscale="log", xlabel="ms per call (log)",
                  title=f"One call on a prompt of {versus['tokens']:,} tokens")
        _log_axes(right, which="x")
        right.grid(alpha=0.3, which="both", axis="x")
        handles = left.get_legend_handles_labels()[0]
        handles += [plt.Rectangle((0, 0), 1, 1, color=color, label=label)
                    for label, color in MAMBA2_BARS.values()]
        legend_row.legend(handles, [h.get_label() for h in handles], loc="center",
                          ncol=1 if narrow else 2, borderaxespad=0)
        machine = report["machine"]
        _suptitle(fig, f"{machine['threads']} thread, torch {machine['torch']}, "
                  f"{machine.get('dtype', 'float32')}, Nemotron-H's width", narrow)
        fig.tight_layout()
    return fig
