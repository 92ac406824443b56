"""The explorable attention figure: embedded numbers, still table, errors."""

from __future__ import annotations

import html
import json
import re

import pytest
import torch

from llm_attention_site.explorer import attention_explorer, formatted, weight_table

TOKENS = ["a", "b", "c"]


def _weights(seed: int) -> torch.Tensor:
    return torch.softmax(torch.randn(3, 3, generator=torch.Generator().manual_seed(seed)), -1)


def test_every_state_is_embedded_with_the_numbers_rounded_by_python():
    one, two = _weights(0), _weights(1)
    page = attention_explorer(TOKENS, {"one": one, "two": two})
    data = json.loads(html.unescape(re.search(r'data-explorer="([^"]*)"', page).group(1)))
    assert data["tokens"] == TOKENS and list(data["states"]) == ["one", "two"]
    for name, weights in (("one", one), ("two", two)):
        got = torch.tensor([[float(v) for v in row] for row in data["states"][name]])
        assert torch.allclose(got, weights, atol=0.005)
    assert 'data-scale="0..1"' in page


def test_still_table_shows_the_first_state_and_matches_the_printed_table():
    weights = _weights(2)
    page = attention_explorer(TOKENS, {"first": weights, "second": _weights(3)})
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", page)
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
    """Each weight's cell, rgba(33, 102, 172, w) over the light or the dark page, with the ink
    the explorer gives it (the stylesheet makes all ink white on the dark page), keeps the 4.5:1
    contrast that WCAG AA asks of small text, for every weight the explorer can show."""
    from llm_attention_site.explorer import LIGHT_INK_FROM

    worst = 21.0
    for step in range(1001):
        weight = step / 1000
        cell = [round(p * (1 - weight) + c * weight) for p, c in zip(page, (33, 102, 172))]
        ink = (255, 255, 255) if dark_page or weight >= LIGHT_INK_FROM else (0, 0, 0)
        worst = min(worst, _contrast(cell, ink))
    assert worst >= 4.5, f"a cell's text falls to {worst:.2f}:1"
    weights = torch.tensor([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.05, 0.05, 0.9]])
    cells = re.findall(r'<td( class="ink-light")? style="background: rgba\(33, 102, 172, ([0-9.]+)\)"',
                       attention_explorer(TOKENS, {"x": weights}))
    assert [float(w) for _, w in cells] == [round(w, 3) for w in weights.flatten().tolist()]
    assert [bool(light) for light, _ in cells] == [w >= LIGHT_INK_FROM for w in weights.flatten().tolist()]
