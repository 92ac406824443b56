"""The figures a reader steps through: stages, decoding, temperature. Their still HTML
holds the numbers their text tables print; bad input is refused with the argument named."""

from __future__ import annotations

import html
import json
import math
import re

import pytest
import torch

from llm_attention_site.explorer import DARK_PAGE_BLUE, ink_classes
from llm_attention_site.stepper import (
    DARK_PAGE_ORANGE,
    ORANGE,
    STRONGEST,
    DecodeStep,
    Stage,
    decode_explorer,
    next_token_probabilities,
    probability_table,
    stage_tables,
    step_table,
    stepper,
    temperature_explorer,
)
from tests.test_explorer import _contrast

ROWS = ["a", "b", "c"]


def _stages():
    scores = torch.tensor([[1.0, -2.0, 0.5], [0.25, 0.0, -0.125], [3.0, 1.5, -1.0]])
    masked = scores.masked_fill(torch.ones(3, 3, dtype=torch.bool).triu(1), -math.inf)
    return [
        Stage("scores", r"\Omega", scores, ROWS),
        Stage("masked", r"\Omega + M", masked, ROWS),
        Stage("context", "Z", torch.tensor([[0.5], [1.0], [-0.25]]), ["dim 1"]),
    ]


def test_each_stage_shows_the_numbers_its_table_prints():
    stages = _stages()
    page = stepper(ROWS, stages, query=1)
    printed = stage_tables(ROWS, stages).split("\n\n")
    shown = re.findall(r'<div class="stepper-stage".*?</table>', page)
    assert len(shown) == len(printed) == 3
    for stage, block, text in zip(stages, shown, printed):
        cells = re.findall(r"<td[^>]*>([^<]*)</td>", block)
        values = [v for line in text.splitlines()[2:] for v in line.split()[-len(stage.columns):]]
        assert cells == values
        assert f"\\({stage.formula}\\)" in block  # typeset at build
    assert printed[1].splitlines()[2].split()[1:] == ["1.00", "\u2212\u221e", "\u2212\u221e"]
    assert 'data-query="1"' in page and 'class="explorer stepper"' in page


def test_stage_shades_scale_to_the_stage_and_mark_the_sign():
    page = stepper(ROWS, _stages())
    first = re.search(r'<div class="stepper-stage".*?</table>', page).group(0)
    shades = re.findall(r'<td(?: class="([a-z -]*)")? style="--w: ([0-9.]+)">([^<]*)<', first)
    by_text = {text: ("negative" in names, float(w)) for names, w, text in shades}
    assert by_text["3.00"] == (False, STRONGEST)  # the stage's largest size
    assert by_text["-2.00"] == (True, round(STRONGEST * 2 / 3, 3))
    assert '<td class="masked">\u2212\u221e</td>' in page


@pytest.mark.parametrize("colour", ["blue", "orange"])
@pytest.mark.parametrize("dark_page", [False, True])
def test_every_stage_shade_keeps_its_text_readable(colour, dark_page):
    """Over every shade up to the strongest, blue or orange: black ink on the light page;
    on the dark page (its lighter colours) white ink, black from DARK_INK_FROM on, as the
    cells' classes say. At least the 4.5:1 WCAG AA asks of small text."""
    colours = {(False, "blue"): (33, 102, 172), (False, "orange"): ORANGE,
               (True, "blue"): DARK_PAGE_BLUE, (True, "orange"): DARK_PAGE_ORANGE}
    page = (30, 33, 41) if dark_page else (255, 255, 255)
    worst = 21.0
    for a in [STRONGEST * k / 1000 for k in range(1001)]:
        cell = [round(p * (1 - a) + c * a) for p, c in zip(page, colours[dark_page, colour])]
        black = not dark_page or "ink-dark-on-slate" in ink_classes(round(a, 3))
        worst = min(worst, _contrast(cell, (0, 0, 0) if black else (255, 255, 255)))
    assert worst >= 4.5, f"{worst:.2f}:1"
    page = stepper(ROWS, [Stage("s", "S", torch.tensor([[1.0], [-0.85], [0.5]]), ["x"])])
    cells = re.findall(r'<td class="([a-z -]*)" style="--w: ([0-9.]+)"|<td style', page)
    assert cells[:2] == [("ink-dark-on-slate", "0.800"), ("negative ink-dark-on-slate", "0.680")]


def test_stepper_refuses_bad_stages():
    with pytest.raises(ValueError, match="stages must be a non-empty sequence"):
        stepper(ROWS, [])
    with pytest.raises(TypeError, match=r"stages\[0\] must be a Stage"):
        stepper(ROWS, [("scores", "x", torch.eye(3), ROWS)])
    with pytest.raises(ValueError, match=r"stages\[0\].matrix must have shape \(3, 2\)"):
        stepper(ROWS, [Stage("s", "x", torch.eye(3), ["p", "q"])])
    with pytest.raises(ValueError, match="no nan or \\+inf"):
        stepper(ROWS, [Stage("s", "x", torch.full((3, 3), math.nan), ROWS)])
    with pytest.raises(ValueError, match="query must be a row index below 3"):
        stepper(ROWS, _stages(), query=3)


TOKENS = ["p", "q", "r", "s"]


def _decoding():
    weights = torch.tensor([
        [1.0, 0.0, 0.0, 0.0],
        [0.5, 0.5, 0.0, 0.0],
        [0.0, 0.25, 0.75, 0.0],
        [0.0, 0.0, 0.4, 0.6],
    ])  # fmt: skip
    steps = [DecodeStep(1, 0, 0, 200), DecodeStep(2, 1, 1, 200), DecodeStep(3, 2, 2, 200)]
    return weights, steps


def test_decoding_embeds_every_step_and_shows_the_last_one_still():
    weights, steps = _decoding()
    page = decode_explorer(TOKENS, weights, steps)
    data = json.loads(html.unescape(re.search(r'data-decode="([^"]*)"', page).group(1)))
    assert data["steps"] == [list(s) for s in steps] and data["tokens"] == TOKENS
    assert data["weights"] == [[round(v * 100) for v in row] for row in weights.tolist()]
    cache = re.findall(r'<td class="cache-(\w+)">', page)
    assert cache == ["dropped", "dropped", "held", "added"]
    assert "Step 3 of 3: the query at position 3" in html.unescape(page)
    assert "the cache holds 2 rows, 200 bytes." in page
    printed = step_table(TOKENS, weights, steps).splitlines()
    assert printed[0] == "step 1: query 1 reads 0-1, cache holds 0-1 (200 bytes): 0.50 0.50"
    assert printed[2].endswith(": 0.40 0.60")


def test_a_prefill_step_alone_adds_every_prompt_row():
    weights, _ = _decoding()
    page = decode_explorer(TOKENS, weights, [DecodeStep(2, 0, 0, 300)])
    assert re.findall(r'<td class="cache-(\w+)">', page) == ["added"] * 3 + ["empty"]
    assert "(the prompt, all at once)" in page and "3 rows" in page


def test_decoding_refuses_steps_out_of_order():
    weights, steps = _decoding()
    with pytest.raises(ValueError, match=r"steps\[1\] = .* must have previous last < last"):
        decode_explorer(TOKENS, weights, [steps[1], steps[0]])
    with pytest.raises(TypeError, match=r"steps\[0\] must be a DecodeStep"):
        decode_explorer(TOKENS, weights, [(1, 0, 0, 8)])
    with pytest.raises(ValueError, match="steps must be a non-empty sequence"):
        decode_explorer(TOKENS, weights, [])


LOGITS = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0, -3.0])
LABELS = ["u", "v", "w", "x", "y", "z"]


def test_probabilities_follow_temperature_and_top_k():
    plain = next_token_probabilities(LOGITS, 1.0, None)
    assert torch.allclose(plain, torch.softmax(LOGITS.double(), -1))
    hot, cold = next_token_probabilities(LOGITS, 4.0, None), next_token_probabilities(LOGITS, 0.25, None)
    assert cold.max() > plain.max() > hot.max()  # colder is sharper
    top = next_token_probabilities(LOGITS, 1.0, 2)
    assert (top[2:] == 0).all() and torch.isclose(top.sum(), torch.tensor(1.0, dtype=torch.float64))
    assert torch.allclose(top[:2], torch.softmax(LOGITS[:2].double(), -1))


def test_temperature_explorer_shows_the_printed_row_and_never_a_negative_rest():
    temperatures, top_ks = [0.5, 1.0, 3.0], [None, 2]
    page = temperature_explorer(LABELS, LOGITS, temperatures, top_ks, shown=3)
    printed = probability_table(LABELS, LOGITS, temperatures, top_ks, shown=3).splitlines()
    assert printed[0].split()[-5:] == ["u", "v", "w", "other", "3"]
    start = next(line for line in printed if line.startswith("1 ") and "all 6" in line)
    assert re.findall(r'class="temperature-value">([^<]*)<', page) == start.split()[3:]
    for line in printed[1:]:
        values = [float(v) for v in line.split()[3:]]
        assert not any(v.startswith("-") for v in line.split()[3:])
        assert abs(sum(values) - 1) <= 0.005 * len(values)
    data = json.loads(html.unescape(re.search(r'data-temperature="([^"]*)"', page).group(1)))
    assert data["keeps"] == ["all 6", "top 2"] and data["start"] == [1, 0]


def test_temperature_explorer_refuses_bad_settings():
    with pytest.raises(ValueError, match="temperatures must be numbers above 0"):
        temperature_explorer(LABELS, LOGITS, [0.0], [None])
    with pytest.raises(ValueError, match="top_ks must be None or ints from 1 to 6"):
        temperature_explorer(LABELS, LOGITS, [1.0], [7])
    with pytest.raises(ValueError, match=r"logits must be a \(6,\) tensor"):
        temperature_explorer(LABELS, LOGITS[:3], [1.0], [None])
    with pytest.raises(ValueError, match="start must be one of"):
        temperature_explorer(LABELS, LOGITS, [2.0], [None], shown=3)
