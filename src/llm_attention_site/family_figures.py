# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""Two figures of the families' pages: which rotary pairs a stretch slows down
(scaled-rotary page), and what one token leaves in one layer's cache (latent-attention
page). Not a model module: it needs matplotlib.
"""

from __future__ import annotations


def stretch_figure(curves: dict, narrow: bool = False):
    """How much each pair's speed is divided by, against its wavelength before the
    stretch: ``curves`` maps a label to ``(wavelengths, divided_by, training_length)``,
    tensors ``(d_rot / 2,)`` and an int."""
    import matplotlib.pyplot as plt

    from . import figures  # noqa: F401  (its ink, swapped in the dark variant)

    colours = ("#1f77b4", "#e8710a", "#2ca02c")
    with plt.rc_context({"font.size": 10 if narrow else 9}):
        fig, ax = plt.subplots(figsize=(4.2, 4.0) if narrow else (7.0, 3.2))
        for (label, (wavelength, divided_by, length)), colour in zip(
            curves.items(), colours
        ):
            ax.plot(
                wavelength,
                divided_by,
                marker="o",
                markersize=3,
                color=colour,
                label=label,
            )
            ax.axvline(length, color=colour, linestyle="--", linewidth=1)
        ax.set(
            xscale="log",
            yscale="log",
            xlabel="wavelength before the stretch (positions)",
            ylabel="speed divided by",
            title="Which pairs are stretched, and by how much",
        )
        ticks = [1, 2, 4, 8, 16, 32]
        ax.set_yticks(ticks, [str(t) for t in ticks])
        ax.minorticks_off()
        ax.grid(alpha=0.3)
        if narrow:  # below the plot: the phone's plot has no empty corner wide enough
            ax.legend(fontsize=9, loc="upper center", bbox_to_anchor=(0.5, -0.22))
        else:
            ax.legend(fontsize=8, loc="lower right")
        fig.tight_layout()
    return fig


def cache_figure(bars: dict, narrow: bool = False):
    """What one token leaves in one layer's cache: ``bars`` maps a label to the numbers
    cached, drawn to one linear scale so that the sizes compare by eye."""
    import matplotlib.pyplot as plt

    from . import figures  # noqa: F401  (its ink, swapped in the dark variant)

    colours = ("#e8710a", "#1f77b4", "#2ca02c")
    labels, sizes = list(bars), list(bars.values())
    with plt.rc_context({"font.size": 10 if narrow else 9}):
        fig, ax = plt.subplots(figsize=(3.7, 2.8) if narrow else (7.0, 2.4))
        ax.barh(range(len(sizes)), sizes, color=colours[: len(sizes)])
        for i, size in enumerate(sizes):
            ax.annotate(f"{size:,}", (size, i), xytext=(4, 0),
                        textcoords="offset points", va="center")
        ax.set_yticks(range(len(labels)), labels=labels)
        ax.invert_yaxis()  # the first label on top
        ax.set_xlim(0, max(sizes) * (1.3 if narrow else 1.18))
        step = 20_000 if narrow else 10_000
        ticks = range(0, int(max(sizes)) + 1, step)
        ax.set_xticks(ticks, labels=[f"{t:,}" for t in ticks])
        ax.set_xlabel("numbers cached per token, per layer")
        ax.spines[["top", "right"]].set_visible(False)
        fig.patch.set_alpha(0)
        fig.tight_layout()
    return fig
