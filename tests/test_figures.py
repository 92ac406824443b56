"""The figure helpers the pages use."""

from __future__ import annotations

import base64
import re

import matplotlib.pyplot as plt
import pytest
import torch

from llm_attention_site.figures import (
    DARK_INK,
    INK,
    figure_scale,
    heatmap,
    row,
    to_html,
)


def _svgs(tag: str) -> list[str]:
    return [base64.b64decode(d).decode() for d in re.findall(r'src="data:image/svg\+xml;base64,([^"]+)"', tag)]


def test_heatmap_renders_a_light_and_a_dark_svg_with_the_labels():
    tag = to_html(heatmap(torch.eye(2), ["a", "b"], ["c", "d"], title="t"), alt="two by two")
    light, dark = _svgs(tag)
    assert 'class="figure-link figure-light"' in tag and 'class="figure-link figure-dark"' in tag
    assert tag.count('alt="two by two"') == 2
    for svg in (light, dark):
        assert "<svg" in svg and ">c<" in svg and ">d<" in svg
    assert INK in light and DARK_INK not in light
    assert DARK_INK in dark and INK not in dark


def test_figure_background_is_transparent():
    light = _svgs(to_html(heatmap(torch.eye(2)), alt="eye"))[0]
    patch = re.search(r'<g id="patch_1">\s*<path d="[^"]*"\s*style="([^"]*)"', light)
    assert patch is not None and "fill: none" in patch.group(1)


def test_weights_are_drawn_on_the_fixed_zero_to_one_scale():
    weights = torch.softmax(torch.tensor([[0.0, 0.1], [0.2, 0.0]]), dim=-1)
    assert weights.max() < 0.6  # the data alone would span far less than 0..1
    fig = heatmap(weights)
    assert figure_scale(fig) == "0..1"
    assert fig.axes[0].images[0].get_clim() == (0.0, 1.0)
    assert to_html(fig, alt="w").count('data-scale="0..1"') == 2


def test_values_outside_zero_one_span_their_own_range():
    scores = torch.tensor([[-2.0, 3.0], [float("-inf"), 1.0]])
    assert figure_scale(heatmap(scores)) == "-2..3"


def test_panels_on_different_scales_are_refused():
    fig, (left, right) = plt.subplots(1, 2)
    heatmap(torch.eye(2) * 0.5, ax=left)
    heatmap(torch.eye(2) * 5.0, ax=right)
    with pytest.raises(ValueError, match="share a colour scale, got 0..1, 0..5"):
        to_html(fig, alt="two panels")
    plt.close(fig)


def test_heatmap_handles_minus_infinity():
    masked = torch.tensor([[0.0, float("-inf")], [1.0, 2.0]])
    assert "<svg" in _svgs(to_html(heatmap(masked), alt="masked"))[0]


def test_heatmap_rejects_a_matrix_that_is_not_2d():
    with pytest.raises(ValueError, match=r"matrix must be a 2-D tensor, got torch.Size\(\[3\]\)"):
        heatmap(torch.ones(3))


def test_heatmap_rejects_labels_of_the_wrong_length():
    with pytest.raises(ValueError, match="row_labels must have 2 entries"):
        heatmap(torch.eye(2), ["only one"])


def test_to_html_requires_alt_text():
    with pytest.raises(ValueError, match="alt must describe the figure, got ''"):
        to_html(heatmap(torch.eye(2)), alt="")


def test_row_wraps_figures_and_refuses_anything_else():
    one = to_html(heatmap(torch.eye(2)), alt="one")
    assert row(one, one).startswith('<div class="figure-row">')
    with pytest.raises(ValueError, match="row needs one or more figures made by to_html"):
        row("<p>not a figure</p>")


def test_benchmark_plots_stack_their_panels_for_a_phone_and_refuse_other_html():
    """The narrow variant stacks the two panels (one above the other) in a narrower figure;
    wide_and_narrow wraps two figures from to_html and nothing else."""
    import json
    import pathlib

    from llm_attention_site.benchmark_plots import decode_figure, kv_cache_figure
    from llm_attention_site.figures import to_html, wide_and_narrow

    root = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"
    for draw, results in ((kv_cache_figure, "kv_cache_results.json"), (decode_figure, "decode_results.json")):
        report = json.loads((root / results).read_text())
        wide, narrow = draw(report), draw(report, narrow=True)
        (w1, w2), (n1, n2) = ([ax.get_position() for ax in f.axes if ax.axison] for f in (wide, narrow))
        assert w2.x0 > w1.x1 and abs(w1.y0 - w2.y0) < 0.05, "wide: side by side"
        assert n1.y0 > n2.y1 and abs(n1.x0 - n2.x0) < 0.05, "narrow: stacked"
        assert narrow.get_figwidth() < 0.5 * wide.get_figwidth()
        html = wide_and_narrow(to_html(wide, alt="w"), to_html(narrow, alt="n"))
        assert html.count("figure-pair") == 2 and 'class="figure-narrow"' in html
    with pytest.raises(ValueError, match="narrow must be a figure made by figures.to_html"):
        wide_and_narrow(html, "<img>")


def test_the_attention_benchmark_plot_has_four_panels_stacked_for_a_phone():
    import json
    import pathlib

    from llm_attention_site.benchmark_plots import attention_figure

    root = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"
    report = json.loads((root / "results.json").read_text())
    wide, narrow = attention_figure(report), attention_figure(report, narrow=True)
    w, n = ([ax.get_position() for ax in f.axes if ax.axison] for f in (wide, narrow))
    assert len(w) == len(n) == 4  # the phone's legend has a row of its own, not a panel
    assert w[1].x0 > w[0].x1 and w[0].y0 > w[2].y1, "wide: two by two"
    assert all(a.y0 > b.y1 and abs(a.x0 - b.x0) < 0.2 for a, b in zip(n, n[1:])), "narrow: stacked"
    assert wide.get_facecolor()[3] == narrow.get_facecolor()[3] == 0  # transparent: both palettes


def test_a_zero_one_matrix_gets_two_colours_and_a_legend_not_a_colour_bar():
    mask = torch.ones(4, 4).tril()
    fig = heatmap(mask, fmt="{:.0f}", legend=("hidden", "may attend"))
    labels = [text.get_text() for text in fig.axes[0].get_legend().get_texts()]
    assert labels == ["0: hidden", "1: may attend"]
    assert len(fig.axes) == 1, "no colour bar beside the legend"
    assert figure_scale(fig) == "0..1"
    with pytest.raises(ValueError, match="legend is for a matrix of zeros and ones, got values such as 0.5"):
        heatmap(mask / 2, legend=("a", "b"))
    with pytest.raises(ValueError, match="legend must name what 0 and what 1 mean"):
        heatmap(mask, legend=("only one",))
    plt.close("all")


def test_panels_draws_side_by_side_and_stacked():
    """Two layouts of the same panels: side by side as wide as the wide column, stacked as
    wide as a 360 px phone's column, so that a page shows both at their drawn size."""
    from llm_attention_site.figures import PHONE_COLUMN_IN, WIDE_COLUMN_IN, panels

    shapes, sizes_in = [], []

    def draw(fig, axes):
        shapes.append(len(axes))
        sizes_in.append(tuple(fig.get_size_inches()))
        for ax in axes:
            ax.plot([0, 1], [0, 1])

    html = panels(draw, 2, alt="two lines", height=3, narrow_height=2.9)
    assert shapes == [2, 2]
    assert sizes_in == [(WIDE_COLUMN_IN, 3), (PHONE_COLUMN_IN, 5.8)]
    assert re.findall(r'<div class="figure-(wide|narrow)">', html) == ["wide", "narrow"]
    sizes = [tuple(map(float, m)) for m in re.findall(r'<img [^>]*width="([\d.]+)" height="([\d.]+)"', html)]
    (wide_w, wide_h), (narrow_w, narrow_h) = sizes[0], sizes[2]  # light variants
    assert wide_w > wide_h and narrow_h > narrow_w and narrow_w <= 328 and wide_w <= 686, sizes
    with pytest.raises(ValueError, match="count must be a number of panels, 1 or more, got 0"):
        panels(draw, 0, alt="none")
    with pytest.raises(ValueError, match="narrow_height must be a height in inches above 0, got -1"):
        panels(draw, 1, alt="one", narrow_height=-1)


def test_an_image_keeps_the_room_of_its_own_shape_before_it_loads():
    """Its width and height are the SVG's, points to CSS px, to a thousandth of a pixel: a
    whole-pixel size changed the room by a fraction of a pixel when the image arrived."""
    html = to_html(heatmap(torch.rand(5, 7)), alt="shape")
    svg = _svgs(html)[0]
    drawn = [float(v) for v in re.search(r'<svg[^>]*\bwidth="([\d.]+)pt"[^>]*\bheight="([\d.]+)pt"', svg).groups()]
    for width, height in re.findall(r'<img [^>]*width="([\d.]+)" height="([\d.]+)"', html):
        assert abs(float(width) - drawn[0] * 4 / 3) <= 5e-4 and abs(float(height) - drawn[1] * 4 / 3) <= 5e-4
    assert not all(v * 4 / 3 == round(v * 4 / 3) for v in drawn)  # a size a whole pixel would round


def test_outlined_text_names_its_size():
    html = to_html(heatmap(torch.eye(2)), alt="eye", text_pt=9.9)
    assert html.count('data-text-pt="9.9"') == 2
    with pytest.raises(ValueError, match="text_pt must be a size in points above 0, got -1"):
        to_html(heatmap(torch.eye(2)), alt="eye", text_pt=-1)


def test_heatmap_labels_long_position_axes_sparsely_and_puts_the_legend_above():
    fig = heatmap(torch.eye(16), annotate=False, legend=("no", "yes"), title="t")
    ax = fig.axes[0]
    assert list(ax.get_xticks()) == list(range(0, 16, 2)) == list(ax.get_yticks())
    fig.canvas.draw()
    legend, grid = ax.get_legend().get_window_extent(), ax.get_window_extent()
    assert legend.y0 >= grid.y1 and legend.width <= grid.width  # above, no wider
    plt.close(fig)


def _cells(svg: str) -> str:
    """The base64 PNG of the heatmap's cells inside an SVG."""
    return re.search(r'xlink:href="data:image/png;base64,([^"]+)"', svg).group(1)


def _png_pixels(data: str):
    import io

    from matplotlib.image import imread

    return imread(io.BytesIO(base64.b64decode(data)), format="png")


def _luminance(rgb) -> float:
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb[:3]]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def test_the_dark_variant_draws_low_weights_dark_and_no_cell_light():
    """Light variant: 0 is near white and 1 navy. Dark variant: 0 is near the dark page
    and 1 a mid blue, never light (the explorer grids on the dark page: dark for low)."""
    weights = torch.tensor([[0.0, 1.0], [0.0, 1.0]])  # a column of 0s, a column of 1s
    light, dark = _svgs(to_html(heatmap(weights, annotate=False), alt="w"))
    lit, dim = _png_pixels(_cells(light)), _png_pixels(_cells(dark))
    w = lit.shape[1]
    zero, one = (0, 0), (0, w - 1)
    assert _luminance(lit[zero]) > 0.9 and _luminance(lit[one]) < 0.05
    assert _luminance(dim[zero]) < 0.03 and 0.15 < _luminance(dim[one]) < 0.6
    assert max(_luminance(px) for px in dim.reshape(-1, dim.shape[-1])) < 0.6


def test_the_numbers_on_the_cells_keep_4_5_to_1_in_both_palettes():
    from llm_attention_site.figures import _contrast, _luminance as luminance

    for cmap in ("Blues", "RdBu"):
        values = torch.linspace(0, 1, 21).reshape(3, 7)
        fig = heatmap(values, cmap=cmap)
        image = fig.axes[0].images[0]
        for palette in ("light", "dark"):
            from llm_attention_site.figures import _use_palette

            _use_palette(fig, palette)
            for text, value in image._cells:
                cell = image.cmap(image.norm(value))
                assert _contrast(luminance(cell), luminance(text.get_color())) >= 4.5, (
                    cmap, palette, value, text.get_color())
        plt.close(fig)


def test_a_zero_one_legend_changes_colour_with_the_palette():
    mask = torch.ones(3, 3).tril()
    light, dark = _svgs(to_html(heatmap(mask, fmt="{:.0f}", legend=("no", "yes")), alt="m"))
    assert "#e3eef8" in light and "#e3eef8" not in dark  # the legend's 0 patch
    assert "#2b3242" in dark and "#5a9ae0" in dark


def test_colour_maps_without_a_dark_variant_are_refused():
    with pytest.raises(ValueError, match=r"cmap must be one of \['Blues', 'RdBu'\].*got 'viridis'"):
        heatmap(torch.eye(2), cmap="viridis")
    fig, ax = plt.subplots()
    ax.imshow(torch.eye(2).numpy(), cmap="viridis")
    with pytest.raises(ValueError, match="uses the colour map 'viridis', which has no dark variant"):
        to_html(fig, alt="viridis")
    plt.close(fig)
    fig, ax = plt.subplots()  # an image drawn directly with a known scale gets its dark one
    ax.imshow(torch.eye(2).numpy(), cmap="Blues")
    light, dark = _svgs(to_html(fig, alt="blues"))
    assert _cells(light) != _cells(dark)


def test_log_axes_are_labelled_with_plain_numbers_and_powers_only_far_out():
    from llm_attention_site.figures import plain_log_labels

    fig, ax = plt.subplots()
    ax.set_yscale("log")
    plain_log_labels(ax.yaxis)
    label = ax.yaxis.get_major_formatter()
    shown = [label(v, 0) for v in (1e-12, 1e-3, 0.5, 1, 2048, 1e4, 3e5, 1e6, 1e9, 2e13, 1e18)]
    assert shown == ["$10^{-12}$", "0.001", "0.5", "1", "2,048", "10k", "300k", "1M", "1G",
                     "20T", "$10^{18}$"]
    assert ax.yaxis.get_minor_formatter()(20, 0) == ""
    plt.close(fig)


def test_a_notebook_shows_the_light_variant_unless_the_site_shows_the_dark():
    from llm_attention_site.figures import notebook_html, shown

    fig = heatmap(torch.eye(2))
    html = notebook_html(fig, alt="eye")
    assert html.count('class="figure-link figure-dark" style="display: none"') == 1
    assert 'class="figure-link figure-light" href' in html  # the light one as it is
    assert not plt.fignum_exists(fig.number)  # closed: not shown a second time
    fig = heatmap(torch.eye(2))
    assert shown(fig, alt="eye") is None  # no value for a notebook to print as Out[n]
    assert not plt.fignum_exists(fig.number)


def _legend_covers(fig) -> list[str]:
    """Points of the plotted lines that fall inside a legend of the same figure."""
    import numpy as np

    fig.canvas.draw()
    covered = []
    legends = [(ax.get_legend(), ax.get_title()) for ax in fig.axes if ax.get_legend()]
    for legend, where in legends + [(legend, "the figure") for legend in fig.legends]:
        box = legend.get_window_extent()
        for ax in fig.axes:
            for line in ax.get_lines():
                points = line.get_transform().transform(line.get_xydata())  # its own axes
                along = [points[:1]]  # each segment sampled, not only its ends
                for a, b in zip(points, points[1:]):
                    along.append(a + (b - a) * np.linspace(0, 1, 20)[:, None])
                inside = [p for p in np.concatenate(along) if box.contains(*p)]
                if inside:
                    covered.append(f"{line.get_label()} under the legend of {where!r}")
    return covered


@pytest.mark.parametrize("name", ["kv_cache", "decode", "latent_decode", "sparse_decode", "mamba2",
                                  "linear_decode", "compressed_decode", "attention"])
def test_benchmark_plots_fit_their_column_and_their_legends_cover_no_line(name):
    """Each variant is drawn as wide as the narrowest column that shows it, so its 9-point
    text shows at 12 CSS px; no legend hides a line."""
    import json
    import pathlib

    from llm_attention_site import benchmark_plots

    results = {"attention": "results.json"}.get(name, f"{name}_results.json")
    report = json.loads((pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / results).read_text())
    draw = getattr(benchmark_plots, f"{name}_figure")
    for narrow, column_px in ((False, 686), (True, 328)):
        fig = draw(report, narrow=narrow)
        assert not _legend_covers(fig), (narrow, _legend_covers(fig))
        html = to_html(fig, alt=name)
        width = float(re.search(r'width="([\d.]+)"', html).group(1))
        assert width <= column_px * 1.02, (narrow, width)  # a line of legend may stick out
        for svg in _svgs(html):  # sizes in points; 4/3 CSS px a point at the drawn size
            sizes = [float(v) for v in re.findall(r"font(?:-size)?: ([\d.]+)px", svg)]
            shown_px = min(sizes) * 4 / 3 * min(1.0, column_px / width)
            assert shown_px >= 9, (narrow, min(sizes), width)


def test_a_figure_drawn_elsewhere_is_refitted_to_its_column_with_its_legend_below():
    from llm_attention_site.figures import PHONE_COLUMN_IN, WIDE_COLUMN_IN, fit_columns

    for narrow, width in ((False, WIDE_COLUMN_IN), (True, PHONE_COLUMN_IN)):
        fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
        for ax in (left, right):
            ax.plot([1, 10, 100], [1e9, 1e11, 1e13], label="rises")
            ax.set(xscale="log", yscale="log")
        left.legend(loc="upper left")  # inside the panel, over the line's corner
        fit_columns(fig, narrow=narrow, legend_below=True)
        assert fig.get_figwidth() == width
        assert left.get_legend() is None and len(fig.legends) == 1
        assert not _legend_covers(fig)
        assert left.yaxis.get_major_formatter()(1e12, 0) == "1T"
        plt.close(fig)
