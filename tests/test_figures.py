"""The figure helpers the pages use."""

from __future__ import annotations

import base64

import pytest
import torch

from llm_attention.figures import heatmap, to_html


def test_heatmap_renders_an_svg_image_tag_with_the_labels():
    fig = heatmap(torch.eye(2), ["a", "b"], ["c", "d"], title="t")
    tag = to_html(fig, alt="two by two")
    assert tag.startswith('<img class="figure" alt="two by two" src="data:image/svg+xml;base64,')
    svg = base64.b64decode(tag.split("base64,", 1)[1].rstrip('">')).decode()
    assert "<svg" in svg and ">c<" in svg and ">d<" in svg


def test_heatmap_handles_minus_infinity():
    masked = torch.tensor([[0.0, float("-inf")], [1.0, 2.0]])
    assert "<svg" in base64.b64decode(to_html(heatmap(masked), alt="masked").split("base64,")[1][:-2]).decode()


def test_heatmap_rejects_labels_of_the_wrong_length():
    with pytest.raises(ValueError, match="row_labels must have 2 entries"):
        heatmap(torch.eye(2), ["only one"])


def test_to_html_requires_alt_text():
    with pytest.raises(ValueError, match="alt"):
        to_html(heatmap(torch.eye(2)), alt="")
