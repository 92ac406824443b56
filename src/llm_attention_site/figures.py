# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""Figures for the site, drawn with matplotlib from the tensors a page has just
computed.

A page prints ``to_html(fig, alt=...)``; the build inserts the printed HTML. The figure
is drawn on a transparent background and published in two variants, one per palette
(dark text for the light palette, light text for the dark one); the site's stylesheet
shows the one that fits. In the dark variant a heatmap takes the dark palette's colour
scale: dark for low values, as the explorer grids on the dark page, and no lighter than
a mid blue at the top, so that no cell is a light block on the dark page. Each variant
is an SVG inlined as a data URI, so the printed HTML works anywhere; the site's build
hook (``hooks/figures.py``) moves each SVG into a file of its own, loaded lazily and
linked for viewing at full size. ``row(...)`` puts several figures side by side,
wrapping them onto separate lines on a narrow screen. A notebook shows a figure with
``shown(fig, alt)``: the same two variants. Not a model module: it needs matplotlib.

Attention weights lie between 0 and 1, and ``heatmap`` draws any matrix whose values all
lie there on the fixed 0..1 colour scale, so two figures of weights can be compared by
eye. The figure records its scale, and ``to_html`` writes it into a ``data-scale``
attribute (a test of the built site checks every figure of weights against it).

Sizes: the browser test measures every figure's text as shown, at every width from a
360 px phone up, and wants 9 CSS px or more, superscripts and legends included. A page
shows a figure at its drawn size or, in a narrower column, shrunk to fit: the narrowest
columns it meets are PHONE_COLUMN_IN (a figure shown at every width) and WIDE_COLUMN_IN
(the wide variant of ``wide_and_narrow``, shown from 960 px up).
"""

from __future__ import annotations

import base64
import html
import io
import math
import re
from collections.abc import Callable, Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib.colors import Colormap, LinearSegmentedColormap, ListedColormap, to_rgba
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, NullFormatter

# Text and axes are drawn in INK, a near-black no figure uses for anything else, so the
# dark-palette variant can swap it for a light grey without touching the cells' own
# colours.
INK = "#010101"
DARK_INK = "#d6d6d6"
plt.rcParams.update(
    {
        "svg.fonttype": "none",
        "figure.dpi": 100,
        "text.color": INK,
        "axes.labelcolor": INK,
        "axes.edgecolor": INK,
        "axes.titlecolor": INK,
        "xtick.color": INK,
        "ytick.color": INK,
        "xtick.labelcolor": INK,
        "ytick.labelcolor": INK,
        "legend.labelcolor": INK,
        "legend.framealpha": 0.0,
        "font.size": 11,
        # The fonts a browser may draw the SVG's text with, the one it was measured in
        # first (matplotlib's own list repeats a dozen names on every text: 20 % of a
        # heatmap's file).
        "font.sans-serif": ["DejaVu Sans", "Arial", "Helvetica"],
    }
)

# The narrowest columns a figure is shown in, in inches at 96 CSS px an inch: a 360 px
# phone's (328 px), and, for the wide variant of wide_and_narrow (shown from 960 px up),
# the column beside the navigation and the table of contents (686 px).
PHONE_COLUMN_IN = 328 / 96
WIDE_COLUMN_IN = 686 / 96

# The pages' backgrounds, light and dark (the theme's slate), that cells without a
# colour show through.
_PAGES = {"light": "#ffffff", "dark": "#1e2129"}
# Colours of the numbers written in the cells: black on light cells, white on dark ones,
# whichever reads better on the cell (at least 4.5:1 either way). Neither is INK, so the
# dark variant keeps them.
_CELL_DARK_TEXT = "#000000"
_CELL_LIGHT_TEXT = "#ffffff"
# The colour scales a heatmap may use, each with its dark palette's counterpart: on the
# dark page low values are dark, as in the explorer grids, and the lightest colour is a
# mid blue (or red), never a light block.
_SCALES = {
    "Blues": (
        plt.get_cmap("Blues"),
        LinearSegmentedColormap.from_list(
            "Blues_dark", ["#252b3a", "#1f4f94", "#4a89d0", "#8fc0ee"]
        ),
    ),
    "RdBu": (
        plt.get_cmap("RdBu"),
        LinearSegmentedColormap.from_list(
            "RdBu_dark", ["#f0a283", "#b4463c", "#252b3a", "#2e6db3", "#8fc0ee"]
        ),
    ),
}
# The two colours of a 0/1 matrix in each palette: the ends of the weights' scales.
_ZERO_ONE = {"light": ("#e3eef8", "#1764ab"), "dark": ("#2b3242", "#5a9ae0")}


def _scale_label(low: float, high: float) -> str:
    return f"{low:g}..{high:g}"


def _tick_step(count: int) -> int:
    return 1 if count <= 10 else -(-count // 8)


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
    legend: tuple[str, str] | None = None,
) -> plt.Figure:
    """Draw a 2-D tensor as a labelled heatmap, each cell annotated with its value.

    ``matrix`` has shape ``(rows, cols)``; labels, when given, must match those sizes.
    When neither ``vmin`` nor ``vmax`` is given and every finite value lies in ``[0,
    1]`` (attention weights, a mask), the colour scale is the fixed ``0..1``; otherwise
    it spans the values. The scale used is recorded on the figure for ``to_html``.
    ``legend`` names what 0 and 1 mean in a matrix of zeros and ones (a mask, a
    reach): it is drawn in two colours with that legend instead of a colour bar.
    ``cmap`` is one of the scales with a dark counterpart: ``"Blues"`` (weights, the
    default) or ``"RdBu"`` (values either side of zero).
    """
    if not isinstance(matrix, torch.Tensor) or matrix.dim() != 2:
        shape = getattr(matrix, "shape", type(matrix).__name__)
        raise ValueError(f"matrix must be a 2-D tensor, got {shape}")
    if cmap not in _SCALES:
        raise ValueError(
            f"cmap must be one of {sorted(_SCALES)} (scales with a dark variant), "
            f"got {cmap!r}"
        )
    values = matrix.detach().to("cpu", torch.float32)
    rows, cols = values.shape
    for name, labels, size in (
        ("row_labels", row_labels, rows),
        ("col_labels", col_labels, cols),
    ):
        if labels is not None and len(labels) != size:
            raise ValueError(
                f"{name} must have {size} entries to match the matrix, "
                f"got {len(labels)}"
            )
    if legend is not None:
        if (
            not isinstance(legend, (tuple, list))
            or len(legend) != 2
            or not all(isinstance(name, str) and name for name in legend)
        ):
            raise ValueError(
                f"legend must name what 0 and what 1 mean, got {legend!r}"
            )
        odd = values[(values != 0) & (values != 1)]
        if odd.numel():
            raise ValueError(
                "legend is for a matrix of zeros and ones, got values such as "
                f"{odd[0].item():g}"
            )
        vmin, vmax = 0.0, 1.0
    if ax is None:
        # The grid at most 2.8 inches wide: with its labels and scale the figure shows
        # at 70 % of its drawn size or more in a 360 px phone's column, its 10-point
        # numbers at 9 CSS px or more.
        cell = min(0.5, 2.8 / cols)
        fig, ax = plt.subplots(figsize=(cell * cols + 2.0, cell * rows + 1.5))
    else:
        fig = ax.figure
    finite = values[torch.isfinite(values)]
    if (
        vmin is None
        and vmax is None
        and finite.numel()
        and 0 <= finite.min() <= finite.max() <= 1
    ):
        low, high = 0.0, 1.0
    else:
        low = float(finite.min()) if vmin is None and finite.numel() else vmin
        high = float(finite.max()) if vmax is None and finite.numel() else vmax
    scales = (
        tuple(ListedColormap(_ZERO_ONE[palette]) for palette in ("light", "dark"))
        if legend is not None
        else _SCALES[cmap]
    )
    image = ax.imshow(values.numpy(), cmap=scales[0], vmin=low, vmax=high)
    image._palette_scales = scales  # the light and dark scales, for to_html
    if col_labels:
        ax.set_xticks(range(cols), labels=list(col_labels), rotation=45, ha="right")
    else:  # positions: upright, and every other one past ten, so they do not collide
        ax.set_xticks(range(0, cols, _tick_step(cols)))
    if row_labels:
        ax.set_yticks(range(rows), labels=list(row_labels))
    else:
        ax.set_yticks(range(0, rows, _tick_step(rows)))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    cells = []  # (text, value): each number written on the grid
    if annotate:
        for i in range(rows):
            for j in range(cols):
                value = float(values[i, j])
                finite_cell = bool(torch.isfinite(values[i, j]))
                text = fmt.format(value) if finite_cell else str(value)
                label = ax.text(j, i, text, ha="center", va="center", fontsize=10)
                cells.append((label, value))
    image._cells = cells
    _ink_cells(image, "light")
    if legend is None:
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    else:
        labels = [f"{value}: {name}" for value, name in zip((0, 1), legend)]
        # Side by side where the grid is wide enough (about 0.55 em a character, 0.45 in
        # for a swatch and its gap), else one above the other.
        size_in = plt.rcParams["font.size"] / 72
        needed = sum(0.55 * size_in * len(label) + 0.45 for label in labels)
        room = ax.get_position().width * fig.get_figwidth()
        ax.legend(
            handles=[
                Patch(facecolor=colour, edgecolor=INK, label=label)
                for label, colour in zip(labels, _ZERO_ONE["light"])
            ],
            loc="lower center",
            bbox_to_anchor=(0.5, 1.0),
            ncol=2 if needed <= room else 1,
            frameon=False,
            borderaxespad=0.2,
            handlelength=1.2,
            columnspacing=1.0,
        )
        ax._zero_one_legend = True  # its two colours change with the palette
    if title:  # a legend goes between the title and the grid, in one row or two
        rows_of_legend = 0 if legend is None else 1 if needed <= room else 2
        ax.set_title(title, fontsize=11, pad=6 + 20 * rows_of_legend)
    if low is not None and high is not None:
        scales = getattr(fig, "_attention_scales", [])
        fig._attention_scales = [*scales, (float(low), float(high))]
    fig.tight_layout()
    return fig


def _luminance(colour) -> float:
    """WCAG relative luminance of a matplotlib colour."""
    channels = [
        c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4
        for c in to_rgba(colour)[:3]
    ]
    return 0.2126 * channels[0] + 0.7152 * channels[1] + 0.0722 * channels[2]


def _contrast(a: float, b: float) -> float:
    return (max(a, b) + 0.05) / (min(a, b) + 0.05)


def _ink_cells(image, palette: str) -> None:
    """Colour each number on the grid black or white, whichever reads better on its cell
    as drawn in ``palette`` (a cell with no colour shows the page)."""
    page = to_rgba(_PAGES[palette])
    for label, value in getattr(image, "_cells", []):
        red, green, blue, alpha = image.cmap(image.norm(value))
        cell = [alpha * c + (1 - alpha) * p for c, p in zip((red, green, blue), page)]
        behind = _luminance(cell)
        black, white = (_contrast(behind, _luminance(ink))
                        for ink in (_CELL_DARK_TEXT, _CELL_LIGHT_TEXT))
        label.set_color(_CELL_DARK_TEXT if black >= white else _CELL_LIGHT_TEXT)


def _use_palette(fig: plt.Figure, palette: str) -> bool:
    """Give every image of the figure its colour scale for ``palette`` ("light" or
    "dark"), the numbers on it their ink and the 0/1 legends their colours; return
    whether anything changed. An image drawn with a scale that has no dark counterpart
    is refused: its light cells would be a light block on the dark page."""
    changed = False
    for ax in fig.axes:
        for image in ax.get_images():
            scales = getattr(image, "_palette_scales", None)
            if scales is None:
                name = image.get_cmap().name.removesuffix("_r")
                if name not in _SCALES:
                    raise ValueError(
                        f"an image of the figure uses the colour map {name!r}, which "
                        f"has no dark variant; draw it with heatmap(cmap=...) and one "
                        f"of {sorted(_SCALES)}"
                    )
                scales = _SCALES[name]
            image.set_cmap(scales[palette == "dark"])
            _ink_cells(image, palette)
            changed = True
        if getattr(ax, "_zero_one_legend", False):
            for patch, colour in zip(ax.get_legend().get_patches(), _ZERO_ONE[palette]):
                patch.set_facecolor(colour)
    return changed


_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def plain_log_labels(axis) -> None:
    """Label a log axis with plain numbers (0.01, 1, 1,000, 10k, 1M, 10T) where they
    stay short, and with powers of ten only beyond: a power's exponent is drawn at 70 %
    of the label's size, too small on a phone. Minor ticks go unlabelled."""

    def label(value: float, _position) -> str:
        if value <= 0:
            return ""
        if value < 1e-3 or value >= 1e18:
            return f"$10^{{{round(math.log10(value))}}}$"
        if value < 1:
            return f"{value:.10g}"
        if value < 1e4:
            return f"{value:,.10g}"
        size, prefix = next((size, p) for size, p in _PREFIXES if value >= size)
        return f"{value / size:.10g}{prefix}"

    axis.set_major_formatter(FuncFormatter(label))
    axis.set_minor_formatter(NullFormatter())



def fit_columns(
    fig: plt.Figure,
    narrow: bool,
    height: float | None = None,
    legend_below: bool = False,
) -> plt.Figure:
    """Redraw a figure made elsewhere for the column that shows it: as wide as the wide
    column (WIDE_COLUMN_IN) or, with ``narrow``, a phone's (PHONE_COLUMN_IN), ``height``
    inches high (its own by default), every log axis labelled in plain numbers. Its text
    keeps its size in points, so the page shows it at that size. ``legend_below`` moves
    the legends drawn inside the panels into one row of their own under them, where they
    cover no line."""
    width = PHONE_COLUMN_IN if narrow else WIDE_COLUMN_IN
    fig.set_size_inches(width, height or fig.get_figheight())
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            if axis.get_scale() == "log" and not isinstance(
                axis.get_major_formatter(), FuncFormatter
            ):
                plain_log_labels(axis)
    below = 0.0
    if legend_below:
        handles, labels, size = [], [], plt.rcParams["font.size"]
        for ax in fig.axes:
            if ax.get_legend() is not None:
                found = ax.get_legend_handles_labels()
                handles, labels = handles + found[0], labels + found[1]
                size = ax.get_legend().get_texts()[0].get_fontsize()
                ax.get_legend().remove()
        columns = 1 if narrow else 2
        rows = -(-len(labels) // columns)
        below = rows * 1.5 * size / 72 + 0.15  # in inches
        fig.set_size_inches(width, fig.get_figheight() + below)
        fig.legend(handles, labels, loc="lower center", ncol=columns, frameon=False,
                   fontsize=size)
    fig.tight_layout(rect=(0, below / fig.get_figheight(), 1, 1))
    return fig

def bars(
    values: torch.Tensor,
    labels: Sequence[str],
    *,
    title: str = "",
    ylabel: str = "",
    fmt: str = "{:.2f}",
    color: str = "tab:blue",
    ax: plt.Axes | None = None,
    weights: bool = False,
) -> plt.Figure:
    """Draw a 1-D tensor as labelled bars, each with its value written above it.

    ``values`` has shape ``(n,)`` and ``labels`` ``n`` entries. With ``weights=True``
    the values must lie in ``[0, 1]`` and the axis runs over the fixed ``0..1``,
    recorded on the figure like a heatmap's scale.
    """
    if not isinstance(values, torch.Tensor) or values.dim() != 1:
        shape = getattr(values, "shape", type(values).__name__)
        raise ValueError(f"values must be a 1-D tensor, got {shape}")
    if len(labels) != values.numel():
        raise ValueError(
            f"labels must have {values.numel()} entries to match values, "
            f"got {len(labels)}"
        )
    data = values.detach().to("cpu", torch.float32)
    if weights and not bool(((data >= 0) & (data <= 1)).all()):
        raise ValueError(f"weights must lie in [0, 1], got {data.tolist()}")
    if ax is None:  # shown at 75 % of its drawn size or more on a phone, as a heatmap
        fig, ax = plt.subplots(figsize=(0.5 * len(labels) + 1.4, 3.0))
    else:
        fig = ax.figure
    ax.bar(range(len(labels)), data.numpy(), color=color)
    ax.set_xticks(range(len(labels)), labels=list(labels), rotation=45, ha="right")
    for j, value in enumerate(data.tolist()):
        ax.annotate(
            fmt.format(value),
            (j, value),
            xytext=(0, 2),
            textcoords="offset points",
            ha="center",
            va="bottom",
            fontsize=10,
        )
    ax.axhline(0, color=INK, linewidth=0.8)
    if weights:
        ax.set_ylim(0, 1.1)
        scales = getattr(fig, "_attention_scales", [])
        fig._attention_scales = [*scales, (0.0, 1.0)]
    else:
        ax.set_ylim(
            min(0.0, float(data.min())) * 1.15, max(0.0, float(data.max())) * 1.15
        )
    ax.spines[["top", "right"]].set_visible(False)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize=11)
    fig.tight_layout()
    return fig


def figure_scale(fig: plt.Figure) -> str | None:
    """The colour scale shared by the figure's heatmaps, as ``"low..high"``, or
    ``None``.

    Raises ``ValueError`` when panels of the figure were drawn on different scales:
    cells of the same colour would then mean different numbers.
    """
    scales = set(getattr(fig, "_attention_scales", []))
    if len(scales) > 1:
        listed = ", ".join(sorted(_scale_label(*s) for s in scales))
        raise ValueError(
            f"the panels of one figure must share a colour scale, got {listed}"
        )
    return _scale_label(*scales.pop()) if scales else None


def _svg(fig: plt.Figure) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="svg", transparent=True, bbox_inches="tight")
    return buffer.getvalue().decode("utf-8")


def _data_uri(svg: str) -> str:
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode("utf-8")).decode(
        "ascii"
    )


def to_html(fig: plt.Figure, alt: str, *, text_pt: float | None = None) -> str:
    """Render a figure as two linked ``<img>`` tags, one per palette, then close the
    figure.

    ``alt`` describes the figure for readers who cannot see it; it is required. The tags
    carry the figure's colour scale in ``data-scale`` when it holds heatmaps. A figure
    whose text is drawn as outlines (the flowcharts) names its smallest text size in
    points with ``text_pt``, written into ``data-text-pt``: a test measures how large
    it shows on a phone, as it does from the ``<text>`` of other figures.
    """
    if not isinstance(alt, str) or not alt:
        raise ValueError(f"alt must describe the figure, got {alt!r}")
    if text_pt is not None and not (isinstance(text_pt, (int, float)) and text_pt > 0):
        raise ValueError(f"text_pt must be a size in points above 0, got {text_pt!r}")
    scale = figure_scale(fig)
    light = _svg(fig)
    # The dark variant: the heatmaps redrawn on the dark palette's scales, every INK
    # line and text made light.
    dark = (_svg(fig) if _use_palette(fig, "dark") else light).replace(INK, DARK_INK)
    plt.close(fig)
    scale_attr = f' data-scale="{scale}"' if scale else ""
    if text_pt is not None:
        scale_attr += f' data-text-pt="{text_pt:g}"'
    # The drawn size, so that a page keeps the figure's room before the image loads:
    # to a thousandth of a pixel, not a whole one, so that the room is the image's own
    # shape (a rounded size moved the text below each figure by a fraction of a pixel
    # as it loaded).
    size = re.search(r'<svg[^>]*\bwidth="([\d.]+)pt"[^>]*\bheight="([\d.]+)pt"', light)
    size_attr = ""
    if size:
        width, height = (  # pt -> CSS px
            f"{float(v) * 4 / 3:.3f}".rstrip("0").rstrip(".") for v in size.groups())
        size_attr = f' width="{width}" height="{height}"'
    tags = []
    for variant, svg in (("light", light), ("dark", dark)):
        uri = _data_uri(svg)
        tags.append(
            f'<a class="figure-link figure-{variant}" href="{uri}" '
            f'title="Open the figure at full size">'
            f'<img class="figure" alt="{html.escape(alt)}"{scale_attr}{size_attr} '
            f'src="{uri}"></a>'
        )
    return '<span class="figure-pair">' + "".join(tags) + "</span>"


def notebook_html(fig: plt.Figure, alt: str) -> str:
    """A figure as a notebook shows it: the two variants of ``to_html``, the dark one
    hidden by a style of its own, so that Jupyter, without the site's stylesheet, shows
    the light one; the site's stylesheet shows the one of its palette. Closes the
    figure."""
    dark = 'class="figure-link figure-dark"'
    return to_html(fig, alt).replace(dark, dark + ' style="display: none"')


def shown(fig: plt.Figure, alt: str) -> None:
    """Show a figure in a notebook, in a light and a dark variant (``notebook_html``),
    as a display, not as the cell's value (which would print an ``Out`` prompt); closes
    the figure, so the notebook does not show it a second time. Run as a plain script,
    outside IPython, it only closes the figure."""
    html = notebook_html(fig, alt)
    try:
        from IPython import get_ipython
        from IPython.display import HTML, display
    except ImportError:  # a Python without IPython: nothing to show on
        return
    if get_ipython() is not None:
        display(HTML(html))


def row(*figures: str) -> str:
    """Put figures from ``to_html`` side by side; on a narrow screen they wrap one per
    line.
    """
    if not figures or not all(
        isinstance(f, str) and "figure-pair" in f for f in figures
    ):
        raise ValueError(
            "row needs one or more figures made by to_html, "
            f"got {[type(f).__name__ for f in figures]}"
        )
    return '<div class="figure-row">' + "".join(figures) + "</div>"


def wide_and_narrow(wide: str, narrow: str) -> str:
    """Two ``to_html`` outputs of one figure: the wide one where the column is at least
    WIDE_COLUMN_IN wide (960 px and up), the narrow one below (the stylesheet swaps them
    at 60em)."""
    for name, part in (("wide", wide), ("narrow", narrow)):
        if not isinstance(part, str) or "figure-pair" not in part:
            raise ValueError(
                f"{name} must be a figure made by figures.to_html, got {part!r:.60}"
            )
    return (
        f'<div class="figure-wide">{wide}</div>'
        f'<div class="figure-narrow">{narrow}</div>'
    )


def panels(
    draw: Callable[[plt.Figure, Sequence[plt.Axes]], None],
    count: int,
    alt: str,
    *,
    height: float = 3.2,
    narrow_height: float = 2.9,
) -> str:
    """HTML of ``count`` panels drawn side by side on a wide screen and stacked on a
    phone, where side by side they would shrink until their text is too small to read.

    ``draw(fig, axes)`` draws into ``count`` axes; it is called once per layout. Side by
    side the panels share the wide column (WIDE_COLUMN_IN) and are ``height`` inches
    high; stacked, each is as wide as a 360 px phone's column (PHONE_COLUMN_IN) and
    ``narrow_height`` high. Drawn at the width a page shows them, their text shows at
    its drawn size: 11 points, 14.7 CSS px.
    """
    if not isinstance(count, int) or count < 1:
        raise ValueError(f"count must be a number of panels, 1 or more, got {count!r}")
    for name, value in (("height", height), ("narrow_height", narrow_height)):
        if not isinstance(value, (int, float)) or value <= 0:
            raise ValueError(
                f"{name} must be a height in inches above 0, got {value!r}"
            )
    drawn = []
    for (rows, cols), (width, high) in (
        ((1, count), (WIDE_COLUMN_IN, height)),
        ((count, 1), (PHONE_COLUMN_IN, narrow_height * count)),
    ):
        fig, axes = plt.subplots(rows, cols, figsize=(width, high), squeeze=False)
        draw(fig, list(axes.flat))
        fig.tight_layout()
        drawn.append(to_html(fig, alt))
    return wide_and_narrow(*drawn)
