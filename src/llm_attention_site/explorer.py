# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""Explorable attention weights for the site: pick a query, see its weights over the
keys; pick a head among all the layers' heads.

Shapes: T tokens; each state's weights are (T, T), row i holding query i's weights over
the keys, every value in [0, 1]; a model's heads are (L, H, T, T).

``attention_explorer(tokens, states)`` returns HTML for a page to print. Every state's
numbers are computed here, in Python, at build, rounded to two decimals and embedded as
whole hundredths; the site's small script
(``docs/assets/javascripts/attention-explorer.js``) only displays them: a switch per
state (the keys of ``states`` are the labels), and the weights of the query whose row
is under the pointer, tapped, or chosen with the arrow keys. Without JavaScript the
HTML is a still table of the first state. From ``COMPACT_FROM`` tokens on the cells
are shades without digits (the readout beside the grid prints the chosen row), so
that the grid fits a phone's width.

``heads_explorer(tokens, phases, scores)`` draws every layer x head as a small map on
the same 0..1 scale, with its scores written under it, one set per phase (before and
after training, say); choosing a map opens that head in a row explorer below.

``weight_table(tokens, weights)`` and ``heads_table(tokens, phases, scores, head)``
print the same numbers as text, with the same formatting, so a page can show them and a
test can compare.

Every figure carries ``data-search-exclude``: the site's search (Material's plugin)
leaves its digits and labels out of the index, as ``hooks/search_clean.py`` leaves out
listings and printed outputs; the index is part of every page's first visit.

Standalone: torch and the standard library.
"""

from __future__ import annotations

import base64
import html
import json
import struct
import zlib
from collections.abc import Mapping, Sequence

import torch

_FMT = "{:.2f}"
COMPACT_FROM = 9  # tokens: from here on the cells hold no digits
BLUE = (33, 102, 172)  # the cells' colour; its opacity is the weight
MARK = (230, 97, 1)  # the lines that mark positions on the small maps
ONE_ROW = 8  # heads of every layer: at most this many sit in one row from 960 px


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


def _check_tokens(tokens: object) -> None:
    if (
        isinstance(tokens, str)
        or not isinstance(tokens, Sequence)
        or not tokens
        or not all(isinstance(t, str) for t in tokens)
    ):
        raise TypeError(
            f"tokens must be a non-empty sequence of strings, got {tokens!r}"
        )


def formatted(weights: torch.Tensor) -> list[list[str]]:
    """The weights as the explorer shows them: two decimals, a (T, T) list of strings.
    """
    return [[_FMT.format(v) for v in row] for row in weights.tolist()]


def hundredths(weights: torch.Tensor) -> list[list[int]]:
    """The shown weights as whole hundredths (0 to 100): what the page embeds. The
    script writes ``n`` back as ``n / 100`` with two decimals: the text of
    ``formatted``.
    """
    return [[round(float(v) * 100) for v in row] for row in formatted(weights)]


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


# A cell is rgba(33, 102, 172, w) over the light page. There, black text keeps at least
# 4.5:1 contrast up to w = 0.875 and white text from there on (the two meet near 4.6:1).
# Over the dark page that blue stays so dark that small weights look alike (0.10 and
# 0.24 differ by 4 units of lightness), so the cells take a lighter blue there,
# DARK_PAGE_BLUE (8 units, as on the light page); white text keeps 4.5:1 on it up to
# w = 0.67 and black text from 0.65, and the ink turns black from DARK_INK_FROM on.
# The script picks the same inks when the reader switches state.
LIGHT_INK_FROM = 0.875
DARK_PAGE_BLUE = (110, 165, 225)
DARK_INK_FROM = 0.66


def ink_classes(value: float) -> list[str]:
    """The classes that give a cell of shade ``value`` its ink: ``ink-light`` (white
    on the light page) and ``ink-dark-on-slate`` (black on the dark page)."""
    starts = {"ink-light": LIGHT_INK_FROM, "ink-dark-on-slate": DARK_INK_FROM}
    return [name for name, start in starts.items() if value >= start]


def _cell(hundredth: int, digits: bool = True) -> str:
    """A cell: its weight as the opacity ``--w`` of its blue (the stylesheet paints
    ``rgba(33, 102, 172, var(--w, 0))``, DARK_PAGE_BLUE on the dark page) and, unless
    ``digits`` is False (a compact grid, whose readout prints the row), as text."""
    value = hundredth / 100
    classes = ink_classes(value)
    ink = f' class="{" ".join(classes)}"' if classes else ""
    shade = f' style="--w:{value:.2f}"' if hundredth else ""
    text = f"<span>{value:.2f}</span>" if digits else ""
    return f"<td{ink}{shade}>{text}</td>"


def _corner() -> str:
    """The table's corner cell: which axis is which."""
    return (
        '<th scope="col" class="explorer-corner"><span>query \u2193</span> '
        "<span>key \u2192</span></th>"
    )


def _payload(data: object) -> str:
    return html.escape(json.dumps(data, separators=(",", ":")), quote=True)


def attention_explorer(
    tokens: Sequence[str],
    states: Mapping[str, torch.Tensor],
    *,
    caption: str = "",
    switches: bool = True,
) -> str:
    """HTML for an explorable figure of attention weights, one switch per entry of
    ``states``.

    ``tokens`` names the T tokens; each value of ``states`` is a ``(T, T)`` tensor of
    weights in [0, 1]. The first state is the default, drawn as a still table without
    JavaScript. ``switches=False`` leaves out the switches (a figure around this one
    chooses the state).
    """
    _check_tokens(tokens)
    if not isinstance(states, Mapping) or not states:
        raise ValueError(f"states must map labels to (T, T) weights, got {states!r}")
    data = {name: hundredths(_check(tokens, name, w)) for name, w in states.items()}
    default = next(iter(data))
    compact = len(tokens) >= COMPACT_FROM
    head = "".join(f'<th scope="col">{html.escape(t)}</th>' for t in tokens)
    body = []
    for i, token in enumerate(tokens):
        cells = "".join(_cell(v, not compact) for v in data[default][i])
        body.append(f'<tr><th scope="row">{html.escape(token)}</th>{cells}</tr>')
    payload = _payload({"tokens": list(tokens), "states": data})
    kind = " explorer-compact" if compact else ""
    choose = "" if switches else ' data-switches="none"'
    return (
        "<figure data-search-exclude "
        f'class="explorer attention-explorer{kind}" data-scale="0..1" '
        f'data-light-ink-from="{LIGHT_INK_FROM}" data-dark-ink-from="{DARK_INK_FROM}"'
        f'{choose} data-explorer="{payload}">'
        '<div class="explorer-grid"><table class="explorer-table">'
        f"<thead><tr>{_corner()}{head}</tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table></div>"
        f"<figcaption>{html.escape(caption or default)}</figcaption></figure>"
    )


def _png(pixels: list[list[tuple[int, int, int, int]]]) -> bytes:
    """An RGBA PNG of ``pixels`` (rows of (r, g, b, a) bytes), from the standard
    library."""
    raw = b"".join(b"\x00" + bytes(c for p in row for c in p) for row in pixels)

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    height, width = len(pixels), len(pixels[0])
    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)  # 8-bit RGBA
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")
    )  # fmt: skip


def head_map(weights: torch.Tensor, marks: Sequence[int] = (), scale: int = 2) -> str:
    """A data URL of a small PNG of ``weights`` ``(T, T)``: each cell ``scale`` pixels
    of the explorer's blue at the weight's opacity, so that the page's own background
    shows through in either palette; a line before each position in ``marks``."""
    T = weights.shape[0]
    size = T * scale
    shade = [[round(v * 255) for v in row] for row in weights.tolist()]
    lines = {m * scale for m in marks if 0 < m < T}
    pixels = []
    for y in range(size):
        row = []
        for x in range(size):
            on_line = (x in lines or y in lines) and (x + y) % 4 == 0  # dotted, faint
            row.append(
                (*MARK, 170) if on_line else (*BLUE, shade[y // scale][x // scale])
            )
        pixels.append(row)
    return "data:image/png;base64," + base64.b64encode(_png(pixels)).decode("ascii")


def head_state(layer: int, head: int, phase: str) -> str:
    """The name of one head's state in the heads explorer's row explorer."""
    return f"layer {layer}, head {head}, {phase}"


def heads_explorer(
    tokens: Sequence[str],
    phases: Mapping[str, torch.Tensor],
    scores: Mapping[str, Mapping[str, torch.Tensor]],
    *,
    marks: Sequence[int] = (),
    open_head: tuple[int, int] = (0, 0),
    caption: str = "",
) -> str:
    """HTML for every head at a glance: one small map per layer x head, a switch per
    phase, and a row explorer of the head chosen.

    ``phases`` maps a label (``"after training"``) to the weights of every head,
    ``(L, H, T, T)``; ``scores`` maps the same labels to named ``(L, H)`` scores,
    written under each map with two decimals. ``marks`` are positions to draw a dotted
    line before on the maps (where a repeat starts, say). ``open_head`` is the
    ``(layer, head)`` shown first in the row explorer. Without JavaScript the page shows
    every phase's maps and the first phase's open head.
    """
    _check_tokens(tokens)
    if not isinstance(phases, Mapping) or not phases:
        raise ValueError(
            f"phases must map labels to (L, H, T, T) weights, got {phases!r}"
        )
    shapes = {
        name: tuple(w.shape)
        for name, w in phases.items()
        if isinstance(w, torch.Tensor)
    }
    if len(shapes) != len(phases) or len(set(shapes.values())) != 1:
        raise ValueError(
            f"phases must all be tensors of one shape (L, H, T, T), got {shapes}"
        )
    shape = next(iter(shapes.values()))
    T = len(tokens)
    if len(shape) != 4 or shape[2:] != (T, T):
        raise ValueError(
            f"phases must have shape (L, H, {T}, {T}) for the {T} tokens, got {shape}"
        )
    L, H = shape[:2]
    if not isinstance(scores, Mapping) or set(scores) != set(phases):
        raise ValueError(
            f"scores must have the phases' labels {list(phases)}, got {list(scores)}"
        )
    for phase, named in scores.items():
        for score, values in named.items():
            if not isinstance(values, torch.Tensor) or tuple(values.shape) != (L, H):
                got = (
                    tuple(values.shape) if isinstance(values, torch.Tensor) else values
                )
                raise ValueError(
                    f"scores[{phase!r}][{score!r}] must be an (L, H) = ({L}, {H}) "
                    f"tensor, got {got!r}"
                )
    if open_head[0] not in range(L) or open_head[1] not in range(H):
        raise ValueError(
            f"open_head must be a (layer, head) of ({L}, {H}), got {open_head}"
        )
    states = {}
    blocks = []
    # A row per layer; from 960 px, every head in one row where they fit (explorer.css),
    # so that the figure fits a window 800 px high.
    grid = "heads-grid heads-grid--one-row" if L * H <= ONE_ROW else "heads-grid"
    for phase, weights in phases.items():
        tiles = []
        for layer in range(L):
            for head in range(H):
                state = head_state(layer, head, phase)
                states[state] = weights[layer, head]
                _check(tokens, state, weights[layer, head])
                written = "".join(
                    f'<span class="head-score">{html.escape(name)} '
                    f"{_FMT.format(float(values[layer, head]))}</span>"
                    for name, values in scores[phase].items()
                )
                image = head_map(weights[layer, head].detach().float(), marks)
                tiles.append(
                    f'<button type="button" class="head-tile" data-layer="{layer}" '
                    f'data-head="{head}" data-state="{html.escape(state)}">'
                    f'<span class="head-map" role="img" aria-label="map of the weights '
                    f'of {html.escape(state)}" style="background-image: url({image})">'
                    f'</span><span class="head-name">layer {layer}, head {head}</span>'
                    f"{written}</button>"
                )
        blocks.append(
            f'<div class="heads-phase" data-phase="{html.escape(phase)}">'
            f'<p class="heads-title">{html.escape(phase)}</p>'
            f'<div class="{grid}" style="--heads: {H}; --row: {L * H}">'
            f'{"".join(tiles)}</div></div>'
        )
    first = head_state(*open_head, next(iter(phases)))
    ordered = {first: states.pop(first), **states}
    rows = attention_explorer(tokens, ordered, caption=first, switches=False)
    return (
        '<figure data-search-exclude class="explorer heads-explorer" '
        f'data-open-layer="{open_head[0]}" '
        f'data-open-head="{open_head[1]}">{"".join(blocks)}{rows}'
        f"<figcaption>{html.escape(caption)}</figcaption></figure>"
    )


def heads_table(
    tokens: Sequence[str],
    phases: Mapping[str, torch.Tensor],
    scores: Mapping[str, Mapping[str, torch.Tensor]],
    head: tuple[int, int],
) -> str:
    """The numbers of a ``heads_explorer`` as text: every head's scores in every phase,
    then the weights of one ``(layer, head)`` in each phase, formatted as the figure
    shows them."""
    names = list(next(iter(scores.values())))
    lines = [f"{'phase':16} layer head  " + "  ".join(f"{n:>9}" for n in names)]
    for phase, named in scores.items():
        L, H = next(iter(named.values())).shape
        for layer in range(L):
            for h in range(H):
                values = "  ".join(
                    f"{_FMT.format(float(named[n][layer, h])):>9}" for n in names
                )
                lines.append(f"{phase:16} {layer:5d} {h:4d}  {values}")
    for phase, weights in phases.items():
        lines.append("")
        lines.append(head_state(*head, phase))
        lines.append(weight_table(tokens, weights[head]))
    return "\n".join(lines)
