"""The explorable attention figure: embedded numbers, still table, errors."""

from __future__ import annotations

import html
import json
import re

import pytest
import torch

from llm_attention_site.explorer import (
    attention_explorer,
    formatted,
    head_map,
    heads_explorer,
    weight_table,
)

TOKENS = ["a", "b", "c"]


def _weights(seed: int) -> torch.Tensor:
    return torch.softmax(torch.randn(3, 3, generator=torch.Generator().manual_seed(seed)), -1)


def test_every_state_is_embedded_with_the_numbers_rounded_by_python():
    one, two = _weights(0), _weights(1)
    page = attention_explorer(TOKENS, {"one": one, "two": two})
    data = json.loads(html.unescape(re.search(r'data-explorer="([^"]*)"', page).group(1)))
    assert data["tokens"] == TOKENS and list(data["states"]) == ["one", "two"]
    for name, weights in (("one", one), ("two", two)):
        got = torch.tensor(data["states"][name], dtype=torch.float64) / 100  # hundredths
        assert torch.allclose(got, weights.double(), atol=0.005 + 1e-9)
        shown = [[f"{n / 100:.2f}" for n in row] for row in data["states"][name]]
        assert shown == formatted(weights)  # what the script writes is the printed text
    assert 'data-scale="0..1"' in page


def test_still_table_shows_the_first_state_and_matches_the_printed_table():
    weights = _weights(2)
    page = attention_explorer(TOKENS, {"first": weights, "second": _weights(3)})
    cells = re.findall(r"<td[^>]*><span>([^<]*)</span></td>", page)
    assert cells == [f"{v:.2f}" for v in weights.flatten().tolist()]
    printed = [line.split()[1:] for line in weight_table(TOKENS, weights).splitlines()[1:]]
    assert printed == formatted(weights)


def test_bad_input_is_refused_with_the_argument_named():
    with pytest.raises(TypeError, match="tokens must be a non-empty sequence of strings"):
        attention_explorer("abc", {"x": _weights(0)})
    with pytest.raises(ValueError, match="states must map labels"):
        attention_explorer(TOKENS, {})
    with pytest.raises(TypeError, match=r"states\['x'\] must be a tensor, got list"):
        attention_explorer(TOKENS, {"x": [[1.0]]})
    with pytest.raises(ValueError, match=r"states\['x'\] must have shape \(3, 3\).*got \(2, 2\)"):
        attention_explorer(TOKENS, {"x": torch.eye(2)})
    with pytest.raises(ValueError, match=r"states\['x'\] must hold weights in \[0, 1\]"):
        attention_explorer(TOKENS, {"x": torch.eye(3) * 2})


def _luminance(rgb) -> float:
    """WCAG 2 relative luminance of an sRGB colour given as 0-255 integers."""
    linear = [c / 255 / 12.92 if c / 255 <= 0.04045 else ((c / 255 + 0.055) / 1.055) ** 2.4 for c in rgb]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def _contrast(one, two) -> float:
    high, low = sorted((_luminance(one), _luminance(two)), reverse=True)
    return (high + 0.05) / (low + 0.05)


@pytest.mark.parametrize("page, dark_page", [((255, 255, 255), False), ((30, 33, 41), True)])
def test_every_cell_shade_keeps_its_text_readable(page, dark_page):
    """Each weight's cell, the light page's blue rgba(33, 102, 172, w) or the dark page's
    lighter one, with the ink the explorer gives it, keeps the 4.5:1 contrast that WCAG AA
    asks of small text, for every weight the explorer can show."""
    from llm_attention_site.explorer import DARK_INK_FROM, DARK_PAGE_BLUE, LIGHT_INK_FROM

    blue, white_below = (DARK_PAGE_BLUE, DARK_INK_FROM) if dark_page else ((33, 102, 172), None)
    worst = 21.0
    for step in range(1001):
        weight = step / 1000
        cell = [round(p * (1 - weight) + c * weight) for p, c in zip(page, blue)]
        if dark_page:
            ink = (255, 255, 255) if weight < white_below else (0, 0, 0)
        else:
            ink = (255, 255, 255) if weight >= LIGHT_INK_FROM else (0, 0, 0)
        worst = min(worst, _contrast(cell, ink))
    assert worst >= 4.5, f"a cell's text falls to {worst:.2f}:1"
    weights = torch.tensor([[1.0, 0.0, 0.0], [0.5, 0.7, 0.0], [0.05, 0.05, 0.9]])
    cells = re.findall(r'<td(?: class="([a-z -]*)")?(?: style="--w:([0-9.]+)")?>',
                       attention_explorer(TOKENS, {"x": weights}))
    assert [float(w or 0) for _, w in cells] == [round(w, 2) for w in weights.flatten().tolist()]
    for (names, _), w in zip(cells, weights.flatten().tolist()):
        assert ("ink-light" in names.split()) == (w >= LIGHT_INK_FROM), (names, w)
        assert ("ink-dark-on-slate" in names.split()) == (w >= DARK_INK_FROM), (names, w)


def test_the_stylesheet_paints_the_dark_page_with_the_colours_checked_here():
    """The dark page's blue and orange in explorer.css are the ones whose contrast the tests
    above and in test_stepper.py check."""
    import pathlib

    from llm_attention_site.explorer import DARK_PAGE_BLUE
    from llm_attention_site.stepper import DARK_PAGE_ORANGE

    css = (pathlib.Path(__file__).parents[1] / "docs/assets/stylesheets/explorer.css").read_text()
    slate = " ".join(rule for rule in css.split("}") if 'data-md-color-scheme="slate"' in rule)
    for colour in (DARK_PAGE_BLUE, DARK_PAGE_ORANGE):
        assert "rgba({}, {}, {}, var(--w, 0))".format(*colour) in slate, colour
    assert "rgba(33, 102, 172, var(--w, 0))" not in slate


def test_many_tokens_make_a_compact_grid_and_few_do_not():
    few = attention_explorer(TOKENS, {"x": _weights(0)})
    many = attention_explorer([str(i % 3) for i in range(12)], {"x": torch.eye(12)})
    assert "explorer-compact" not in few and "explorer-compact" in many
    shades = re.findall(r'<td(?: class="[a-z -]*")?(?: style="--w:([0-9.]+)")?></td>', many)
    assert [float(w or 0) for w in shades] == torch.eye(12).flatten().tolist()
    assert "query \u2193" in few and "key \u2192" in few  # the axes are named


def _png_pixels(url: str):
    """Decode the 8-bit RGBA PNG of a data URL: its width and rows of (r, g, b, a)."""
    import base64
    import struct
    import zlib

    raw = base64.b64decode(url.split(",", 1)[1])
    assert raw[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", raw[16:24])
    data, at = b"", 8
    while at < len(raw):
        length, kind = struct.unpack(">I4s", raw[at : at + 8])
        if kind == b"IDAT":
            data += raw[at + 8 : at + 8 + length]
        at += 12 + length
    rows = zlib.decompress(data)
    stride = 1 + 4 * width
    assert all(rows[y * stride] == 0 for y in range(height))  # no filter
    return width, [[tuple(rows[y * stride + 1 + 4 * x : y * stride + 5 + 4 * x]) for x in range(width)]
                   for y in range(height)]


def test_a_head_map_is_the_weights_as_the_opacity_of_the_blue():
    weights = torch.tensor([[1.0, 0.0, 0.0], [0.25, 0.75, 0.0], [0.2, 0.3, 0.5]])
    width, pixels = _png_pixels(head_map(weights, scale=2))
    assert width == 6 and len(pixels) == 6
    for y in range(6):
        for x in range(6):
            assert pixels[y][x] == (33, 102, 172, round(weights[y // 2, x // 2].item() * 255))
    _, marked = _png_pixels(head_map(weights, marks=(1,), scale=2))
    assert any(p[:3] == (230, 97, 1) for p in marked[2] + [row[2] for row in marked])


def test_heads_explorer_writes_each_heads_scores_and_opens_the_chosen_head():
    weights = torch.softmax(torch.randn(2, 2, 3, 3, generator=torch.Generator().manual_seed(4)), -1)
    scores = {"late": {"s": torch.tensor([[0.1, 0.2], [0.3, 0.456]])},
              "early": {"s": torch.zeros(2, 2)}}
    page = heads_explorer(TOKENS, {"late": weights, "early": weights.flip(0)}, scores,
                          open_head=(1, 1))
    late = page.split('data-phase="early"')[0]
    assert re.findall(r'class="head-score">s ([0-9.]+)<', late) == ["0.10", "0.20", "0.30", "0.46"]
    data = json.loads(html.unescape(re.search(r'data-explorer="([^"]*)"', page).group(1)))
    assert list(data["states"])[0] == "layer 1, head 1, late"  # the open head first
    assert len(data["states"]) == 8
    got = torch.tensor(data["states"]["layer 0, head 1, early"], dtype=torch.float64) / 100
    assert torch.allclose(got, weights[1, 1].double(), atol=0.005 + 1e-9)
    with pytest.raises(ValueError, match="scores must have the phases' labels"):
        heads_explorer(TOKENS, {"late": weights}, {"other": {}})
    with pytest.raises(ValueError, match=r"phases must have shape \(L, H, 3, 3\)"):
        heads_explorer(TOKENS, {"late": weights[0]}, {"late": {}})
    with pytest.raises(ValueError, match=r"open_head must be a \(layer, head\)"):
        heads_explorer(TOKENS, {"late": weights}, {"late": {}}, open_head=(2, 0))


def test_every_figure_is_left_out_of_the_search_index():
    """Its digits and labels are printed output: Material's search skips an element marked
    data-search-exclude (tests/test_site_browser.py checks the built index)."""
    from llm_attention_site.live_model import Example, live_explorer
    from llm_attention_site.stepper import DecodeStep, Stage, decode_explorer, stepper
    from llm_attention_site.stepper import temperature_explorer
    from llm_attention.gpt import GPTModel

    weights = _weights(0)
    torch.manual_seed(0)
    figures = [
        attention_explorer(TOKENS, {"x": weights}),
        heads_explorer(TOKENS, {"p": weights[None, None]}, {"p": {}}),
        stepper(TOKENS, [Stage("s", "S", weights, TOKENS)]),
        decode_explorer(TOKENS, weights.tril(), [DecodeStep(2, 0, 0, 8)]),
        temperature_explorer(TOKENS, torch.zeros(3), [1.0], [None], shown=2),
        live_explorer(GPTModel(32, 24, 64, 4, 2).eval(), [Example("e", "ABA")], "f", 1),
    ]
    for page in figures:
        assert re.match(r"<figure data-search-exclude class=\"explorer ", page), page[:80]
