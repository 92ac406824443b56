# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""Figures of the linear-attention page, drawn from the tensors it computes.

``recall_figure`` draws how well each stored pair reads back from a state, oldest write
first, for a plain sum of writes and for the delta rule: the page computes the errors,
this draws them, wide or narrow (``figures.wide_and_narrow`` shows the one that fits).
Not a model module: it needs matplotlib.
"""

from __future__ import annotations

import torch


def recall_figure(errors: dict[str, torch.Tensor], d_k: int, narrow: bool = False):
    """One line per way of writing: ``errors`` maps its name to the error of reading
    each key back ``(num_writes,)``, oldest write first; ``d_k`` the key width."""
    import matplotlib.pyplot as plt

    from . import figures  # noqa: F401  (its ink, swapped in the dark variant)

    colours, markers = ("#e8710a", "#1f77b4"), ("o", "^")
    with plt.rc_context({"font.size": 10 if narrow else 9}):
        fig, ax = plt.subplots(figsize=(4.2, 4.0) if narrow else (7.0, 3.0))
        for (label, error), colour, marker in zip(errors.items(), colours, markers):
            writes = range(1, len(error) + 1)
            ax.plot(writes, error.tolist(), marker=marker, markersize=4, color=colour,
                    label=label, clip_on=False)  # an exact read sits on the axis: whole
        count = len(next(iter(errors.values())))
        ax.set(xlabel=f"write number (1 = oldest, {count} = latest)",
               ylabel="error reading it back",
               title=f"{count} writes into a state with keys of {d_k}")
        ax.set_xticks(range(1, count + 1, 2 if narrow and count > 12 else 1))
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        if narrow:  # under the plot: the lines fill the phone's narrow panel
            ax.legend(fontsize=9, loc="upper center", bbox_to_anchor=(0.5, -0.3),
                      ncol=1)
        else:  # the corner the lines leave empty: early writes, small errors
            ax.legend(fontsize=8, loc="lower left")
        fig.patch.set_alpha(0)
        fig.tight_layout()
    return fig
