# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""Figures of the page on Llama 4, SmolLM3 and Gemma 4, drawn from what the page
computed: the query scale of temperature tuning against the position, and a map of a
model's layers that shows which keep a cache and which read another layer's. Not a model
module: it needs matplotlib.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import Patch, Rectangle

from . import figures  # noqa: F401  (its ink, swapped in the dark variant)

BLUE, ORANGE = "#1f77b4", "#e8710a"
# the sharing layers: lighter tints of their sources' colours. The cells' text is not
# the figure's ink, so it reads the same in both palettes: white on the blue, near-black
# on the others (each at least 4.5:1)
PALE_BLUE, PALE_ORANGE = "#b9d4ec", "#f7c9a3"
WHITE, NEAR_BLACK = "#ffffff", "#1a1a1a"


def temperature_figure(positions, scales, floor_scale: int, narrow: bool = False):
    """The query scale ``(T,)`` at each position ``(T,)``, with the first
    ``floor_scale`` positions, where it is 1, marked."""
    with plt.rc_context({"font.size": 10 if narrow else 9}):
        fig, ax = plt.subplots(figsize=(3.8, 3.2) if narrow else (7.0, 2.8))
        ax.plot(positions, scales, color=BLUE, linewidth=1.5)
        ax.axvline(floor_scale, color=ORANGE, linestyle="--", linewidth=1)
        ax.annotate(f"{floor_scale:,}", (floor_scale, float(scales.max())),
                    xytext=(4, -2), textcoords="offset points", va="top",
                    color=ORANGE)
        step = 100_000 if narrow else 50_000
        ticks = range(0, int(positions.max()) + 1, step)
        ax.set_xticks(ticks, labels=[f"{t // 1000:,}k" if t else "0" for t in ticks])
        ax.set(xlabel="query position", ylabel="query scale",
               title="Temperature tuning, Llama 4 Scout's settings")
        ax.grid(alpha=0.3)
        ax.spines[["top", "right"]].set_visible(False)
        fig.tight_layout()
    return fig


def sharing_figure(kinds: list[str], sources: list[int | None], columns: int):
    """One cell per layer, ``columns`` to a row: a layer that keeps a cache in a solid
    colour (blue windowed, orange full), a layer that reads another's in a pale one,
    labelled ``layer -> source``."""
    rows = -(-len(kinds) // columns)
    with plt.rc_context({"font.size": 9}):
        fig, ax = plt.subplots(figsize=(3.8, 0.5 * rows + 1.3))
        for i, (kind, source) in enumerate(zip(kinds, sources)):
            r, c = divmod(i, columns)
            windowed = kind == "sliding_attention"
            if source is None:
                colour = BLUE if windowed else ORANGE
                text, ink = f"{i}", WHITE if windowed else NEAR_BLACK
            else:
                colour = PALE_BLUE if windowed else PALE_ORANGE
                text, ink = f"{i}\u2192{source}", NEAR_BLACK
            ax.add_patch(Rectangle((c, -r - 1), 0.94, 0.9, facecolor=colour))
            ax.text(c + 0.47, -r - 0.55, text, ha="center", va="center", color=ink,
                    fontsize=9)
        ax.set_xlim(-0.05, columns)
        ax.set_ylim(-rows - 0.1, 0.05)
        ax.set_aspect("auto")
        ax.axis("off")
        ax.legend(
            handles=[
                Patch(facecolor=BLUE, label="keeps a windowed cache"),
                Patch(facecolor=ORANGE, label="keeps a full cache"),
                Patch(facecolor=PALE_BLUE, label="reads a windowed one"),
                Patch(facecolor=PALE_ORANGE, label="reads a full one"),
            ],
            loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=2, frameon=False,
            handlelength=1.2, columnspacing=0.8, fontsize=9,
        )
        fig.tight_layout()
    return fig
