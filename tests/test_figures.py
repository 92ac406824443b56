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
        (w1, w2), (n1, n2) = ([ax.get_position() for ax in f.axes] for f in (wide, narrow))
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
    """Two layouts of the same panels: a wide one twice as wide as high, a narrow one
    stacked, no wider than a phone's column at 11-point text."""
    from llm_attention_site.figures import panels

    shapes = []

    def draw(fig, axes):
        shapes.append(len(axes))
        for ax in axes:
            ax.plot([0, 1], [0, 1])

    html = panels(draw, 2, alt="two lines", size=(4, 3), narrow_size=(3.7, 2.9))
    assert shapes == [2, 2]
    assert re.findall(r'<div class="figure-(wide|narrow)">', html) == ["wide", "narrow"]
    sizes = [tuple(map(int, m)) for m in re.findall(r'<img [^>]*width="(\d+)" height="(\d+)"', html)]
    (wide_w, wide_h), (narrow_w, narrow_h) = sizes[0], sizes[2]  # light variants
    assert wide_w > wide_h and narrow_h > narrow_w and narrow_w <= 358, sizes
    with pytest.raises(ValueError, match="count must be a number of panels, 1 or more, got 0"):
        panels(draw, 0, alt="none")


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
