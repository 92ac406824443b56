# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""Figures for the site, drawn with matplotlib from the tensors a page has just computed.

A page prints ``to_html(fig)``; the build inserts the printed ``<img>`` (an SVG inlined as a
data URI, so figures need no files and no network). Not a model module: it needs matplotlib.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence

import matplotlib.pyplot as plt
import torch

plt.rcParams.update({"svg.fonttype": "none", "figure.dpi": 100})

def heatmap(
    matrix: torch.Tensor,
    row_labels: Sequence[str] | None = None,
    col_labels: Sequence[str] | None = None,
    *,
    title: str = "",
    xlabel: str = "key (attended to)",
    ylabel: str = "query (attending)",
    annotate: bool = True,
    fmt: str = "{:.2f}",
    cmap: str = "Blues",
    ax: plt.Axes | None = None,
    vmin: float | None = None,
    vmax: float | None = None,
) -> plt.Figure:
    """Draw a 2-D tensor as a labelled heatmap, each cell annotated with its value.

    ``matrix`` has shape ``(rows, cols)``; labels, when given, must match those sizes.
    """
    if not isinstance(matrix, torch.Tensor) or matrix.dim() != 2:
        raise ValueError(f"matrix must be a 2-D tensor, got {getattr(matrix, 'shape', type(matrix).__name__)}")
    values = matrix.detach().to("cpu", torch.float32)
    rows, cols = values.shape
    for name, labels, size in (("row_labels", row_labels, rows), ("col_labels", col_labels, cols)):
        if labels is not None and len(labels) != size:
            raise ValueError(f"{name} must have {size} entries to match the matrix, got {len(labels)}")
    if ax is None:
        fig, ax = plt.subplots(figsize=(0.75 * cols + 2.2, 0.6 * rows + 1.6))
    else:
        fig = ax.figure
    finite = values[torch.isfinite(values)]
    low = float(finite.min()) if vmin is None and finite.numel() else vmin
    high = float(finite.max()) if vmax is None and finite.numel() else vmax
    image = ax.imshow(values.numpy(), cmap=cmap, vmin=low, vmax=high)
    ax.set_xticks(range(cols), labels=list(col_labels) if col_labels else range(cols), rotation=45, ha="right")
    ax.set_yticks(range(rows), labels=list(row_labels) if row_labels else range(rows))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    if annotate:
        middle = (low + high) / 2 if low is not None and high is not None else 0.0
        for i in range(rows):
            for j in range(cols):
                value = float(values[i, j])
                text = fmt.format(value) if torch.isfinite(values[i, j]) else str(value)
                color = "white" if torch.isfinite(values[i, j]) and value > middle else "black"
                ax.text(j, i, text, ha="center", va="center", fontsize=8, color=color)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    fig.tight_layout()
    return fig

def to_html(fig: plt.Figure, alt: str) -> str:
    """Render a figure as an ``<img>`` tag holding the SVG as a data URI, then close the figure.

    ``alt`` describes the figure for readers who cannot see it; it is required.
    """
    if not alt:
        raise ValueError("alt must describe the figure, got an empty string")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="svg", facecolor="white", bbox_inches="tight")
    plt.close(fig)
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f'<img class="figure" alt="{html.escape(alt)}" src="data:image/svg+xml;base64,{data}">'
