# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""Explorable attention weights for the site: pick a query token, see its weights over
the keys.

Shapes: T tokens; each state's weights are (T, T), row i holding query i's weights over
the keys, every value in [0, 1].

``attention_explorer(tokens, states)`` returns HTML for a page to print. Every state's
numbers are computed here, in Python, at build, and embedded as data; the site's small
script (``docs/assets/javascripts/attention-explorer.js``) only displays them: a switch
per state (the keys of ``states`` are the labels), and the weights of the query under
the pointer or the keyboard focus. Without JavaScript the HTML is a still table of the
first state. ``weight_table(tokens, weights)`` prints the same numbers as text, with the
same formatting, so a page can show them and a test can compare. Standalone: torch and
the standard library.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence

import torch

_FMT = "{:.2f}"


def _check(tokens: Sequence[str], name: str, weights: object) -> torch.Tensor:
    T = len(tokens)
    if not isinstance(weights, torch.Tensor):
        raise TypeError(
            f"states[{name!r}] must be a tensor, got {type(weights).__name__}"
        )
    if tuple(weights.shape) != (T, T):
        raise ValueError(
            f"states[{name!r}] must have shape ({T}, {T}) to match the {T} tokens, "
            f"got {tuple(weights.shape)}"
        )
    values = weights.detach().to("cpu", torch.float64)
    if not bool(((values >= 0) & (values <= 1)).all()):
        raise ValueError(
            f"states[{name!r}] must hold weights in [0, 1], got {values.tolist()}"
        )
    return values


def formatted(weights: torch.Tensor) -> list[list[str]]:
    """The weights as the explorer shows them: two decimals, a (T, T) list of strings.
    """
    return [[_FMT.format(v) for v in row] for row in weights.tolist()]


def weight_table(tokens: Sequence[str], weights: torch.Tensor) -> str:
    """A text table of the weights, rows = queries, formatted exactly as the explorer
    does.
    """
    values = _check(tokens, "weights", weights)
    width = max(len(t) for t in tokens) + 1
    lines = [" " * width + " ".join(f"{t:>8}" for t in tokens)]
    for token, row in zip(tokens, formatted(values)):
        lines.append(f"{token:<{width}}" + " ".join(f"{v:>8}" for v in row))
    return "\n".join(lines)


# A cell is rgba(33, 102, 172, w) over the page. On the light page, black text keeps
# at least 4.5:1 contrast up to w = 0.875 and white text from there on (the two meet
# near 4.6:1); on the dark page every shade is dark, and the stylesheet makes all text
# white. The script picks the same ink when the reader switches state.
LIGHT_INK_FROM = 0.875


def _cell(value: float, text: str) -> str:
    ink = ' class="ink-light"' if value >= LIGHT_INK_FROM else ""
    return (
        f'<td{ink} style="background: rgba(33, 102, 172, {value:.3f})">{text}</td>'
    )


def attention_explorer(
    tokens: Sequence[str],
    states: Mapping[str, torch.Tensor],
    *,
    caption: str = "",
) -> str:
    """HTML for an explorable figure of attention weights, one switch per entry of
    ``states``.

    ``tokens`` names the T tokens; each value of ``states`` is a ``(T, T)`` tensor of
    weights in [0, 1]. The first state is the default, drawn as a still table without
    JavaScript.
    """
    if (
        isinstance(tokens, str)
        or not tokens
        or not all(isinstance(t, str) for t in tokens)
    ):
        raise TypeError(
            f"tokens must be a non-empty sequence of strings, got {tokens!r}"
        )
    if not isinstance(states, Mapping) or not states:
        raise ValueError(f"states must map labels to (T, T) weights, got {states!r}")
    data = {name: formatted(_check(tokens, name, w)) for name, w in states.items()}
    default = next(iter(data))
    head = "".join(f'<th scope="col">{html.escape(t)}</th>' for t in tokens)
    body = []
    for i, token in enumerate(tokens):
        cells = "".join(
            _cell(float(v), v) for v in data[default][i]
        )
        body.append(f'<tr><th scope="row">{html.escape(token)}</th>{cells}</tr>')
    payload = html.escape(
        json.dumps({"tokens": list(tokens), "states": data}), quote=True
    )
    return (
        '<figure class="attention-explorer" data-scale="0..1" '
        f'data-light-ink-from="{LIGHT_INK_FROM}" data-explorer="{payload}">'
        '<table class="explorer-table"><thead><tr>'
        f'<th scope="col">query \\ key</th>{head}'
        f"</tr></thead><tbody>{''.join(body)}</tbody></table>"
        f"<figcaption>{html.escape(caption or default)}</figcaption></figure>"
    )
