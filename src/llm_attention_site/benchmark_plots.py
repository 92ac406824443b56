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
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter, NullFormatter, NullLocator

# Importing figures applies its settings: text drawn in the ink the dark variant swaps.
from . import figures  # noqa: F401

# Two colours told apart in both palettes and by readers who confuse red and green.
CACHED, UNCACHED = "#1f77b4", "#e8710a"
DECODE_SETTINGS = {
    "mha": ("multi-head (32 kv heads)", "#e8710a", "o"),
    "gqa": ("grouped-query (4 kv heads)", "#1f77b4", "s"),
    "mqa": ("multi-query (1 kv head)", "#2ca02c", "^"),
    "window": ("grouped-query + window 1,024", "#9467bd", "D"),
}


def _panels(narrow: bool, width: float, height: float):
    if narrow:  # stacked: each panel keeps the phone's whole width
        fig, axes = plt.subplots(2, 1, figsize=(4.6, 2 * height * 0.95))
    else:
        fig, axes = plt.subplots(1, 2, figsize=(width, height))
    plt.setp(fig, facecolor="none")
    return fig, axes


def kv_cache_figure(report: dict, narrow: bool = False) -> plt.Figure:
    """Time of each generation step, and total time for N tokens, with and without a
    cache (``benchmarks/kv_cache_results.json``)."""
    steps, cfg = report["steps"], report["config"]
    with plt.rc_context({"font.size": 10 if narrow else 9}):
        fig, (left, right) = _panels(narrow, 10, 3.8)
        positions = range(2, cfg["new_tokens"] + 1)  # step 1, the prompt, left out
        for name, color in (("uncached", UNCACHED), ("cached", CACHED)):
            step_ms = [s * 1e3 for s in steps[name][1:]]
            left.plot(positions, step_ms, color=color, linewidth=0.7, label=name)
            totals = [row[f"{name}_s"] for row in report["table"]]
            right.plot(cfg["lengths"], totals, marker="o", color=color, label=name)
        left.set(yscale="log", xlabel="new token number",
                 ylabel="time of that step (ms)", title="Time per new token")
        right.set(xscale="log", yscale="log", xlabel="new tokens generated",
                  ylabel="total time (s)", title="Time to generate N tokens")
        lengths = cfg["lengths"]
        right.set_xticks(lengths, labels=[str(n) for n in lengths])
        right.xaxis.set_minor_locator(NullLocator())  # only the lengths that ran
        right.xaxis.set_minor_formatter(NullFormatter())
        for ax in (left, right):
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(loc="center right" if ax is left else "upper left")
        machine = report["machine"]
        fig.suptitle(f"{machine['threads']} thread, torch {machine['torch']}, "
                     f"float32, d={cfg['emb_dim']}, {cfg['num_layers']} blocks",
                     fontsize=9)
        fig.tight_layout()
    return fig


def decode_figure(report: dict, narrow: bool = False) -> plt.Figure:
    """Time to decode one token, and the cache held, against the tokens held, for four
    settings of one layer (``benchmarks/decode_results.json``)."""
    with plt.rc_context({"font.size": 10 if narrow else 9}):
        fig, (left, right) = _panels(narrow, 10, 4)
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
        for ax in (left, right):
            ax.grid(alpha=0.3)
            ax.legend(fontsize=9 if narrow else 8)
        machine = report["machine"]
        title = f"{machine['threads']} thread, torch {machine['torch']}, float32"
        fig.suptitle(title, fontsize=9)
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
    with plt.rc_context({"font.size": 10 if narrow else 9}):
        fig, (left, right) = _panels(narrow, 10, 4)
        for setting, (label, color, marker) in LATENT_SETTINGS.items():
            rows = [r for r in report["results"] if r["setting"] == setting]
            held = [r["held"] for r in rows]
            left.plot(held, [r["median_s"] * 1e3 for r in rows], marker=marker,
                      color=color, label=label)
            achieved = [r["bytes_read"] / r["median_s"] / limit for r in rows]
            right.plot(held, achieved, marker=marker, color=color, label=label)
        right.axhline(0.5, color="#7f7f7f", linestyle="--", linewidth=1)
        right.annotate("half the measured bandwidth", (held[0], 0.5), xytext=(0, 4),
                       textcoords="offset points", fontsize=9 if narrow else 8)
        left.set(xscale="log", yscale="log", xlabel="tokens held",
                 ylabel="ms per decoded token (log)",
                 title="Decoding one token (one layer)")
        right.set(xscale="log", xlabel="tokens held", ylim=(0, 1.05),
                  ylabel="bytes read / time / bandwidth",
                  title="Share of the machine's bandwidth")
        for ax in (left, right):
            ax.set_xticks(held, labels=[f"{h:,}" for h in held])
            ax.xaxis.set_minor_locator(NullLocator())
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.grid(alpha=0.3, which="both")
        if narrow:  # one legend under both panels: each panel keeps its whole width
            left.legend(fontsize=9, loc="upper center", bbox_to_anchor=(0.5, -0.25),
                        ncol=2)
        else:
            left.legend(fontsize=8, loc="upper left")
        machine = report["machine"]
        fig.suptitle(f"{machine['threads']} thread, torch {machine['torch']}, float32, "
                     "DeepSeek-V3's widths", fontsize=9)
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
    with plt.rc_context({"font.size": 10 if narrow else 9}):
        fig, (left, right) = _panels(narrow, 10, 4)
        for setting, (label, color, marker, style) in SPARSE_SETTINGS.items():
            rows = [r for r in report["results"] if r["setting"] == setting]
            held = [r["held"] for r in rows]
            left.plot(held, [r["median_s"] * 1e3 for r in rows], marker=marker,
                      color=color, linestyle=style, label=label)
            achieved = [r["bytes_read"] / r["median_s"] / limit for r in rows]
            right.plot(held, achieved, marker=marker, color=color, linestyle=style,
                       label=label)
        left.axvline(predicted, color="#7f7f7f", linestyle=":", linewidth=1)
        # halfway up, between the gathered line below and the dense ones above
        left.annotate("bytes predict\ngathered wins\nfrom here", (predicted, 0.5),
                      xytext=(4, 0), xycoords=("data", "axes fraction"),
                      textcoords="offset points", ha="left", va="center",
                      fontsize=9 if narrow else 8)
        right.axhline(0.5, color="#7f7f7f", linestyle="--", linewidth=1)
        right.annotate("half the measured bandwidth", (held[0], 0.5), xytext=(0, 4),
                       textcoords="offset points", fontsize=9 if narrow else 8)
        left.set(xscale="log", yscale="log", xlabel="tokens held",
                 ylabel="ms per decoded token (log)",
                 title="Decoding one token (one layer)")
        right.set(xscale="log", xlabel="tokens held", ylim=(0, 1.05),
                  ylabel="bytes read / time / bandwidth",
                  title="Share of the machine's bandwidth")
        for ax in (left, right):
            ax.set_xticks(held, labels=[f"{h // 1024}K" for h in held])
            ax.xaxis.set_minor_locator(NullLocator())
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.grid(alpha=0.3, which="both")
        left.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        left.yaxis.set_minor_formatter(
            FuncFormatter(lambda v, _: f"{v:g}" if f"{v:g}"[0] in "25" else ""))
        if narrow:  # one legend under both panels: each panel keeps its whole width
            right.legend(fontsize=9, loc="upper center", bbox_to_anchor=(0.5, -0.25),
                         ncol=1)
        else:
            right.legend(fontsize=8, loc="upper right")
        machine = report["machine"]
        fig.suptitle(f"{machine['threads']} thread, torch {machine['torch']}, float32, "
                     "DeepSeek-V3.2's widths", fontsize=9)
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


def _row(results, impl, batch, tokens, mode) -> dict:
    return next(r for r in results
                if (r["impl"], r["batch"], r["tokens"], r["mode"])
                == (impl, batch, tokens, mode))


def attention_figure(report: dict, narrow: bool = False) -> plt.Figure:
    """Time and memory of the six implementations against the sequence length, and the
    memory of each at the longest length (``benchmarks/results.json``): four panels, two
    by two, or stacked for a phone."""
    results, sizes = report["results"], [tuple(s) for s in report["config"]["sizes"]]
    main_batch = max(b for b, _ in sizes)
    lengths = [t for b, t in sizes if b == main_batch]
    long_b, long_t = max(sizes, key=lambda s: s[1])
    with plt.rc_context({"font.size": 10 if narrow else 9}):
        if narrow:  # a row of its own for the legend, between the first two panels
            fig, rows = plt.subplots(5, 1, figsize=(3.8, 13.0),
                                     gridspec_kw={"height_ratios": [3, 1.6, 3, 3, 3]})
            legend_row, axes = rows[1], [rows[0], *rows[2:]]
            legend_row.axis("off")
        else:
            fig, grid = plt.subplots(2, 2, figsize=(10, 7.5))
            axes = grid.flatten()
        plt.setp(fig, facecolor="none")
        panels = [
            ("forward", "median_s", 1e3, "time (ms)", f"Forward, batch {main_batch}"),
            ("forward+backward", "median_s", 1e3, "time (ms)",
             f"Forward + backward, batch {main_batch}"),
            ("forward+backward", "peak_bytes", 1 / 2**20, "peak extra memory (MiB)",
             f"Memory, forward + backward, batch {main_batch}"),
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
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.yaxis.set_minor_formatter(
                FuncFormatter(lambda v, _: f"{v:g}" if f"{v:g}"[0] in "25" else ""))
            ax.grid(True, which="both", alpha=0.3)
        ax = axes[3]
        memory = [_row(results, impl, long_b, long_t, "forward+backward")["peak_bytes"]
                  for impl in ATTENTION_LABELS]
        if all(m is not None for m in memory):
            bars = ax.barh(range(len(memory)), [m / 2**20 for m in memory],
                           color=[f"C{i}" for i in range(len(memory))])
            ax.bar_label(bars, labels=[f"{m / 2**20:,.0f} MiB" for m in memory],
                         padding=3)
            ax.set_xlim(right=max(max(memory) / 2**20 * (1.6 if narrow else 1.35), 1))
        names = [label.replace(" (", "\n(").replace(" + ", "\n+ ")
                 for label in ATTENTION_LABELS.values()]
        if narrow:  # the legend above names them in full
            names = ["wrapper", "obvious", "explicit", "fast path", "nn.MHA",
                     "bare SDPA"]
        ax.set_yticks(range(len(names)), labels=names)
        ax.invert_yaxis()
        ax.set(xlabel="peak extra memory (MiB)",
               title=f"Memory, forward + backward, T={long_t}, batch {long_b}")
        if narrow:  # in its own row, under the first panel
            legend_row.legend(*axes[0].get_legend_handles_labels(), fontsize=9,
                              loc="center")
        else:
            axes[0].legend(fontsize=8)
        machine, config = report["machine"], report["config"]
        fig.suptitle(f"{machine['threads']} threads, torch {machine['torch']}, "
                     f"float32, d={config['d_model']}, {config['num_heads']} heads",
                     fontsize=9)
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
    with plt.rc_context({"font.size": 10 if narrow else 9}):
        fig, (left, right) = _panels(narrow, 10, 4)
        for setting, (label, color, marker) in LINEAR_SETTINGS.items():
            rows = [r for r in report["results"] if r["setting"] == setting]
            held = [r["held"] for r in rows]
            left.plot(held, [r["median_s"] * 1e3 for r in rows], marker=marker,
                      color=color, label=label)
            right.plot(held, [r["bytes_read"] / 1e6 for r in rows], marker=marker,
                       color=color, label=label)
        for ax in (left, right):
            ax.axvline(crossing, color="#7f7f7f", linestyle="--", linewidth=1)
            ax.set_xscale("log")
            ax.set_xticks(held, labels=[f"{h // 1024}K" for h in held])
            ax.xaxis.set_minor_locator(NullLocator())
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.grid(alpha=0.3, which="both")
            ax.set_ylim(bottom=0)
        right.annotate("the grouped-query step\nreads more from here", (crossing, 0),
                       xytext=(4, 6), textcoords="offset points",
                       fontsize=9 if narrow else 8)
        left.set(xlabel="tokens held", ylabel="ms per decoded token",
                 title="Decoding one token (one layer)")
        right.set(xlabel="tokens held", ylabel="MB read per step",
                  title="Weights + KV cache, or weights + state")
        left.legend(fontsize=9 if narrow else 8, loc="upper left")
        machine = report["machine"]
        fig.suptitle(f"{machine['threads']} thread, torch {machine['torch']}, float32, "
                     "Qwen3-Next's width", fontsize=9)
        fig.tight_layout()
    return fig
