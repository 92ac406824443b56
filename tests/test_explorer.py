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
