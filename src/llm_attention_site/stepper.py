# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""Figures a reader steps through: the stages of attention, decoding one token at a
time, and the next-token probabilities at several temperatures.

Every number is computed in Python at build; the site's small script
(``docs/assets/javascripts/attention-explorer.js``) only shows one step at a time, with
Previous and Next buttons and a slider. Without JavaScript each figure is a still
table: every stage one under the other, the last decoding step, the default
temperature. A text function beside each prints the same numbers with the same
formatting, so a page can show them and a test can compare.

- ``stepper(rows, stages)``: one table per stage (scores, scaled, masked, softmax,
  dropout, context vectors), its formula above it; rows are the queries.
- ``decode_explorer(tokens, weights, steps)``: the weights each new query reads from
  the cache, the cache's rows held, added and dropped, and its bytes, step by step.
- ``temperature_explorer(labels, logits, temperatures, top_ks)``: the probabilities of
  the next token after dividing the logits by each temperature and keeping the top k.

Standalone: torch, the standard library and ``explorer.py`` of this package.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import NamedTuple

import torch

from .explorer import (
    COMPACT_FROM,
    DARK_INK_FROM,
    LIGHT_INK_FROM,
    _cell,
    _check,
    _check_tokens,
    _corner,
    _payload,
    hundredths,
    ink_classes,
)

_FMT = "{:.2f}"
MINUS_INFINITY = "\u2212\u221e"
STRONGEST = 0.8  # opacity of the largest value of a stage
# Below zero: orange, and on the dark page a lighter orange whose inks change where the
# blue's do (white keeps 4.5:1 up to 0.67, black from 0.66: explorer.DARK_INK_FROM).
ORANGE = (214, 96, 77)
DARK_PAGE_ORANGE = (230, 135, 115)


class Stage(NamedTuple):
    """One stage of a ``stepper``: a title, its formula in TeX, an ``(R, C)`` matrix
    (rows = the queries) and the labels of its C columns."""

    title: str
    formula: str
    matrix: torch.Tensor
    columns: Sequence[str]


def number(value: float) -> str:
    """A value as the figures show it: two decimals, or a minus infinity sign."""
    if value == -math.inf:
        return MINUS_INFINITY
    return _FMT.format(value)


def _check_stages(rows: Sequence[str], stages: Sequence[Stage]) -> None:
    _check_tokens(rows)
    if (
        isinstance(stages, (str, bytes))
        or not isinstance(stages, Sequence)
        or not stages
    ):
        raise ValueError(
            f"stages must be a non-empty sequence of Stage, got {stages!r}"
        )
    for k, stage in enumerate(stages):
        if not isinstance(stage, Stage):
            raise TypeError(f"stages[{k}] must be a Stage, got {type(stage).__name__}")
        matrix = stage.matrix
        if not isinstance(matrix, torch.Tensor) or matrix.dim() != 2:
            raise ValueError(
                f"stages[{k}].matrix must be a 2-d tensor, got {matrix!r:.80}"
            )
        shape = (len(rows), len(stage.columns))
        if tuple(matrix.shape) != shape:
            raise ValueError(
                f"stages[{k}].matrix must have shape {shape} for {len(rows)} rows and "
                f"{len(stage.columns)} columns, got {tuple(matrix.shape)}"
            )
        values = matrix.detach().double()
        if bool(torch.isnan(values).any() | (values == math.inf).any()):
            raise ValueError(f"stages[{k}].matrix may hold -inf but no nan or +inf")


def stage_tables(rows: Sequence[str], stages: Sequence[Stage]) -> str:
    """The stages as text tables, formatted as the stepper shows them."""
    _check_stages(rows, stages)
    width = max(len(r) for r in rows) + 1
    parts = []
    for k, stage in enumerate(stages):
        lines = [f"{k + 1}. {stage.title}"]
        lines.append(" " * width + " ".join(f"{c:>8}" for c in stage.columns))
        for label, values in zip(rows, stage.matrix.detach().double().tolist()):
            lines.append(
                f"{label:<{width}}" + " ".join(f"{number(v):>8}" for v in values)
            )
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def _stage_cell(value: float, largest: float) -> str:
    if value == -math.inf:
        return f'<td class="masked">{MINUS_INFINITY}</td>'
    shade = round(STRONGEST * abs(value) / largest, 3) if largest > 0 else 0.0
    classes = (["negative"] if value < 0 else []) + ink_classes(shade)
    names = f' class="{" ".join(classes)}"' if classes else ""
    return f'<td{names} style="--w: {shade:.3f}">{number(value)}</td>'


def stepper(
    rows: Sequence[str],
    stages: Sequence[Stage],
    *,
    query: int = 0,
    caption: str = "",
) -> str:
    """HTML for a figure that steps through ``stages``, one table at a time, the row of
    ``query`` highlighted in each.

    Each stage's cells are shaded by their size against the stage's largest finite
    size (blue above zero, orange below); ``-inf`` shows as a minus infinity sign.
    """
    _check_stages(rows, stages)
    if not isinstance(query, int) or not 0 <= query < len(rows):
        raise ValueError(f"query must be a row index below {len(rows)}, got {query!r}")
    blocks = []
    for k, stage in enumerate(stages):
        values = stage.matrix.detach().double()
        finite = values[torch.isfinite(values)]
        largest = float(finite.abs().max()) if finite.numel() else 0.0
        head = "".join(f'<th scope="col">{html.escape(c)}</th>' for c in stage.columns)
        body = "".join(
            f'<tr><th scope="row">{html.escape(label)}</th>'
            + "".join(_stage_cell(v, largest) for v in row)
            + "</tr>"
            for label, row in zip(rows, values.tolist())
        )
        blocks.append(
            f'<div class="stepper-stage" data-title="{html.escape(stage.title)}">'
            f'<p class="stepper-title"><strong>{k + 1}. {html.escape(stage.title)}'
            "</strong> "
            f'<span class="arithmatex">\\({stage.formula}\\)</span></p>'
            '<div class="explorer-grid"><table class="explorer-table stepper-table">'
            f"<thead><tr>{_corner()}{head}</tr></thead><tbody>{body}</tbody>"
            "</table></div>"
            "</div>"
        )
    return (
        '<figure data-search-exclude class="explorer stepper" '
        f'data-query="{query}">{"".join(blocks)}'
        f"<figcaption>{html.escape(caption)}</figcaption></figure>"
    )


class DecodeStep(NamedTuple):
    """One step of decoding: the position of the newest query (at the prefill, the
    prompt's last token), the first key position it reads, the first position the cache
    still holds after the step, and the bytes the cache holds then."""

    last: int
    reads_from: int
    holds_from: int
    nbytes: int


def _check_steps(tokens, weights, steps) -> None:
    _check_tokens(tokens)
    _check(tokens, "weights", weights)
    if isinstance(steps, (str, bytes)) or not isinstance(steps, Sequence) or not steps:
        raise ValueError(
            f"steps must be a non-empty sequence of DecodeStep, got {steps!r}"
        )
    previous = -1
    for k, step in enumerate(steps):
        if not isinstance(step, DecodeStep):
            raise TypeError(
                f"steps[{k}] must be a DecodeStep, got {type(step).__name__}"
            )
        ok = (
            previous < step.last < len(tokens)
            and 0 <= step.reads_from <= step.last
            and 0 <= step.holds_from <= step.last + 1
        )
        if not ok:
            raise ValueError(
                f"steps[{k}] = {step} must have previous last < last < {len(tokens)}, "
                "0 <= reads_from <= last and 0 <= holds_from <= last + 1"
            )
        previous = step.last


def step_table(
    tokens: Sequence[str], weights: torch.Tensor, steps: Sequence[DecodeStep]
) -> str:
    """The decoding steps as text: for each, the query, the keys it reads with their
    weights (formatted as the figure shows them), the rows held and the bytes."""
    _check_steps(tokens, weights, steps)
    shown = hundredths(weights)
    lines = []
    for k, step in enumerate(steps):
        read = " ".join(
            f"{v / 100:.2f}" for v in shown[step.last][step.reads_from : step.last + 1]
        )
        lines.append(
            f"step {k + 1}: query {step.last} reads {step.reads_from}-{step.last}, "
            f"cache holds {step.holds_from}-{step.last} ({step.nbytes} bytes): {read}"
        )
    return "\n".join(lines)


_CACHE_MARKS = {"held": "\u2022", "added": "+", "dropped": "\u00d7", "empty": ""}


def decode_explorer(
    tokens: Sequence[str],
    weights: torch.Tensor,
    steps: Sequence[DecodeStep],
    *,
    caption: str = "",
) -> str:
    """HTML for decoding step by step: a grid of queries x keys that fills row by row,
    the cache's row of each key position (held, added, dropped), the weights of the
    newest query over the keys it reads, and the bytes held.

    ``weights`` is ``(T, T)``: row t holds what the query at position t put on each key
    (zero for keys it did not read). Without JavaScript the figure shows the last step.
    """
    _check_steps(tokens, weights, steps)
    shown = hundredths(weights)
    final = steps[-1]
    compact = len(tokens) >= COMPACT_FROM
    head = "".join(f'<th scope="col">{html.escape(t)}</th>' for t in tokens)
    body = []
    for i, token in enumerate(tokens):
        cells = []
        for j in range(len(tokens)):
            if i > final.last:
                cells.append("<td></td>")
            else:
                cells.append(_cell(shown[i][j], not compact))
        future = ' class="decode-future"' if i > final.last else ""
        body.append(
            f'<tr{future}><th scope="row">{html.escape(token)}</th>'
            f'{"".join(cells)}</tr>'
        )
    cache = []
    prefill = len(steps) == 1  # the prompt's rows all arrive at once
    for j in range(len(tokens)):
        state = (
            "dropped" if j < final.holds_from
            else "added" if j == final.last or (prefill and j <= final.last)
            else "held" if j <= final.last
            else "empty"
        )  # fmt: skip
        cache.append(f'<td class="cache-{state}">{_CACHE_MARKS[state]}</td>')
    payload = _payload(
        {
            "tokens": list(tokens),
            "weights": shown[: final.last + 1],
            "steps": [list(step) for step in steps],
        }
    )
    kind = " explorer-compact" if compact else ""
    return (
        f'<figure data-search-exclude class="explorer decode-explorer{kind}" '
        f'data-light-ink-from="{LIGHT_INK_FROM}" data-dark-ink-from="{DARK_INK_FROM}" '
        f'data-decode="{payload}">'
        '<div class="explorer-grid"><table class="explorer-table decode-table">'
        f"<thead><tr>{_corner()}{head}</tr></thead><tbody>{''.join(body)}</tbody>"
        f'<tfoot><tr><th scope="row">cache</th>{"".join(cache)}</tr></tfoot>'
        "</table></div>"
        '<p class="decode-legend">cache row: \u2022 held, + added at this step, '
        "\u00d7 dropped</p>"
        # Under the grid: its changing length never moves the grid under a pointer.
        f'<p class="decode-status">{_status(tokens, len(steps), len(steps), final)}</p>'
        f"<figcaption>{html.escape(caption)}</figcaption></figure>"
    )


def _status(tokens, k: int, n: int, step: DecodeStep) -> str:
    """The line above the grid; the script writes the same words."""
    held = step.last + 1 - step.holds_from
    prompt = " (the prompt, all at once)" if k == 1 and step.last > 0 else ""
    return html.escape(
        f"Step {k} of {n}{prompt}: the query at position {step.last} "
        f"(\u201c{tokens[step.last]}\u201d) reads keys {step.reads_from} to "
        f"{step.last}; "
        f"the cache holds {held} row{'' if held == 1 else 's'}, {step.nbytes:,} bytes."
    )


def next_token_probabilities(
    logits: torch.Tensor, temperature: float, top_k: int | None
) -> torch.Tensor:
    """``softmax(logits / temperature)`` over the ``top_k`` largest logits (all when
    None), zero elsewhere: the distribution that sampling draws from. ``(V,)``."""
    scaled = logits.double() / temperature  # (V,)
    if top_k is not None:
        kth = torch.topk(scaled, top_k).values[-1]
        scaled = scaled.masked_fill(scaled < kth, -math.inf)  # (V,)
    return torch.softmax(scaled, dim=-1)  # (V,)


def _check_temperatures(labels, logits, temperatures, top_ks, shown) -> None:
    _check_tokens(labels)
    if not isinstance(logits, torch.Tensor) or tuple(logits.shape) != (len(labels),):
        got = tuple(logits.shape) if isinstance(logits, torch.Tensor) else logits
        raise ValueError(
            f"logits must be a ({len(labels)},) tensor, one per label, got {got!r}"
        )
    if not temperatures or not all(
        isinstance(t, (int, float)) and not isinstance(t, bool) and t > 0
        for t in temperatures
    ):
        raise ValueError(f"temperatures must be numbers above 0, got {temperatures!r}")
    if not top_ks or not all(
        k is None
        or (isinstance(k, int) and not isinstance(k, bool) and 1 <= k <= len(labels))
        for k in top_ks
    ):
        raise ValueError(
            f"top_ks must be None or ints from 1 to {len(labels)}, got {top_ks!r}"
        )
    if not isinstance(shown, int) or not 1 <= shown < len(labels):
        raise ValueError(
            f"shown must be an int from 1 to {len(labels) - 1}, got {shown!r}"
        )


def _probability_rows(labels, logits, temperatures, top_ks, shown):
    order = torch.argsort(logits.double(), descending=True)[:shown].tolist()
    names = [labels[i] for i in order] + [f"other {len(labels) - shown}"]
    table = []
    for t in temperatures:
        for k in top_ks:
            p = next_token_probabilities(logits, t, k)  # (V,)
            rest = p.clone()
            rest[order] = (
                0.0  # the tokens without a bar of their own: a sum of zeros or more
            )
            kept = [float(p[i]) for i in order]
            table.append([_FMT.format(v) for v in [*kept, float(rest.sum())]])
    return names, table


def _top_k_name(k: int | None, vocab: int) -> str:
    return f"all {vocab}" if k is None else f"top {k}"


def probability_table(
    labels: Sequence[str],
    logits: torch.Tensor,
    temperatures: Sequence[float],
    top_ks: Sequence[int | None],
    *,
    shown: int = 8,
) -> str:
    """The probabilities as text, one line per temperature and top-k, formatted as the
    temperature explorer shows them."""
    _check_temperatures(labels, logits, temperatures, top_ks, shown)
    names, table = _probability_rows(labels, logits, temperatures, top_ks, shown)
    lines = ["temperature  keep    " + " ".join(f"{n:>8}" for n in names)]
    combos = [(t, k) for t in temperatures for k in top_ks]
    for (t, k), row in zip(combos, table):
        keep = _top_k_name(k, len(labels))
        lines.append(f"{t:<12g} {keep:<7} " + " ".join(f"{v:>8}" for v in row))
    return "\n".join(lines)


def temperature_explorer(
    labels: Sequence[str],
    logits: torch.Tensor,
    temperatures: Sequence[float],
    top_ks: Sequence[int | None],
    *,
    shown: int = 8,
    start: tuple[float, int | None] = (1.0, None),
    caption: str = "",
) -> str:
    """HTML for the next token's probabilities with a slider over ``temperatures`` and
    a switch per entry of ``top_ks`` (None keeps every token).

    ``logits`` ``(V,)`` are the model's for one position; ``labels`` name the V tokens.
    The ``shown`` most likely tokens get a bar each, the rest one bar together.
    Without JavaScript the figure shows the ``start`` temperature and top-k.
    """
    _check_temperatures(labels, logits, temperatures, top_ks, shown)
    if start[0] not in temperatures or start[1] not in top_ks:
        raise ValueError(
            f"start must be one of the temperatures and top_ks, got {start!r}"
        )
    names, table = _probability_rows(labels, logits, temperatures, top_ks, shown)
    first = list(temperatures).index(start[0]) * len(top_ks) + list(top_ks).index(
        start[1]
    )
    bars = "".join(
        f'<tr><th scope="row">{html.escape(name)}</th><td class="temperature-track">'
        f'<span style="width: {float(v) * 100:.0f}%"></span></td>'
        f'<td class="temperature-value">{v}</td></tr>'
        for name, v in zip(names, table[first])
    )
    payload = _payload(
        {
            "temperatures": list(temperatures),
            "keeps": [_top_k_name(k, len(labels)) for k in top_ks],
            "probs": [[round(float(v) * 100) for v in row] for row in table],
            "start": [list(temperatures).index(start[0]), list(top_ks).index(start[1])],
        }
    )
    setting = f"temperature {start[0]:g}, keep {_top_k_name(start[1], len(labels))}"
    return (
        '<figure data-search-exclude class="explorer temperature-explorer" '
        f'data-temperature="{payload}">'
        f'<p class="temperature-setting">{html.escape(setting)}</p>'
        '<table class="temperature-table"><thead><tr><th scope="col">next token</th>'
        '<th scope="col">probability</th><th scope="col"><span class="explorer-hidden">'
        f"value</span></th></tr></thead><tbody>{bars}</tbody></table>"
        f"<figcaption>{html.escape(caption)}</figcaption></figure>"
    )
