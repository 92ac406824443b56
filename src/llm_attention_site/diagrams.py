# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""Flowcharts for the site, drawn at build time with matplotlib, so that no page loads a
diagram library.

A page writes its diagram in a small subset of mermaid's flowchart syntax::

    flowchart LR                      (or TB / TD: top to bottom)
        a["label"] --> b["two<br/>lines"] --> c
        b -->|"edge label"| d["<i>italic line</i><br/><b>bold line</b>"]
        subgraph g["title"]
            direction LR
            e --> f
        end

and the site's Markdown configuration hands each ``mermaid`` fence to ``fence_format``.
The layout is the classic layered one: each node sits one rank after its furthest
predecessor, a long edge passes through invisible points on the ranks it crosses, each
rank is ordered to avoid crossings and placed to keep edges straight. The chart is drawn
with ``figures.to_html`` (one variant per palette), its text as outlines
so every browser shows the widths measured here. A left-to-right chart also gets a
top-to-bottom variant, which the stylesheet shows instead on a narrow screen. Anything
outside the subset is a ``ValueError`` that names the line. Not a model module: it needs
matplotlib.
"""

from __future__ import annotations

import functools
import html
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import matplotlib.pyplot as plt
from matplotlib.font_manager import FontProperties
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle
from matplotlib.path import Path
from matplotlib.textpath import TextToPath

from .figures import INK, to_html

FONT_SIZE = 11.0  # points
LINE_HEIGHT = 1.35 * FONT_SIZE
LABEL_SIZE = 0.9 * FONT_SIZE
PAD_X, PAD_Y = 9.0, 6.0  # text to box edge
NODE_GAP = 16.0  # between boxes of one rank
RANK_GAP = 26.0  # between ranks, before room for edge labels
CLUSTER_PAD = 10.0
BOX_FILL = (0.31, 0.42, 0.93, 0.13)  # a tint that reads on light and dark pages alike

_HEADER = re.compile(r"flowchart\s+(LR|TB|TD)$")
_NODE = re.compile(r'([A-Za-z_]\w*)(?:\["([^"]*)"\])?\s*')
_ARROW = re.compile(r'-->\s*(?:\|"([^"]*)"\|\s*)?')
_SUBGRAPH = re.compile(r'subgraph\s+([A-Za-z_]\w*)(?:\["([^"]*)"\])?$')
_DIRECTION = re.compile(r"direction\s+(LR|TB|TD)$")
_WHOLE_LINE_STYLE = re.compile(r"<(i|b)>(.*)</\1>$")
_MEASURE = TextToPath()


@dataclass
class Graph:
    """Nodes in order of first appearance; a node with a ``Graph`` is a subgraph."""

    direction: str
    nodes: dict[str, str] = field(default_factory=dict)  # id -> label
    children: dict[str, Graph] = field(default_factory=dict)  # subgraph id -> graph
    edges: list[tuple[str, str, str]] = field(default_factory=list)  # (from, to, label)


# ---- parsing -------------------------------------------------------------------------


def parse(source: str) -> Graph:
    """Read a flowchart into a ``Graph`` (its edges kept at the top level for now)."""
    lines = [(n, line.strip()) for n, line in enumerate(source.splitlines(), 1)]
    lines = [(n, line) for n, line in lines if line and not line.startswith("%%")]
    if not lines or not _HEADER.match(lines[0][1]):
        got = lines[0][1] if lines else "nothing"
        raise ValueError(f"a diagram must start with 'flowchart LR|TB|TD', got {got!r}")
    direction = _HEADER.match(lines[0][1]).group(1)
    top = Graph("TB" if direction == "TD" else direction)  # TD and TB are the same
    stack = [top]
    owner: dict[str, Graph] = {}
    edges: list[tuple[str, str, str]] = []

    def declare(node_id: str, label: str | None, line_no: int) -> None:
        if any(node_id in g.children for g in _walk(top)):
            if label is not None:
                raise ValueError(
                    f"line {line_no}: {node_id!r} is a subgraph, not a node"
                )
            return
        if node_id not in owner:
            owner[node_id] = stack[-1]
            stack[-1].nodes[node_id] = node_id
        if label is not None:
            owner[node_id].nodes[node_id] = label

    for line_no, line in lines[1:]:
        if match := _SUBGRAPH.match(line):
            graph = Graph(stack[-1].direction)
            stack[-1].children[match.group(1)] = graph
            stack[-1].nodes[match.group(1)] = match.group(2) or match.group(1)
            stack.append(graph)
        elif match := _DIRECTION.match(line):
            if len(stack) == 1:
                raise ValueError(
                    f"line {line_no}: 'direction' belongs inside a subgraph"
                )
            stack[-1].direction = "TB" if match.group(1) == "TD" else match.group(1)
        elif line == "end":
            if len(stack) == 1:
                raise ValueError(f"line {line_no}: 'end' without a subgraph")
            stack.pop()
        else:
            chain = _parse_chain(line, line_no)
            for node_id, label in chain[::2]:
                declare(node_id, label, line_no)
            for i in range(1, len(chain), 2):
                edges.append((chain[i - 1][0], chain[i + 1][0], chain[i]))
    if len(stack) > 1:
        raise ValueError("a subgraph is not closed with 'end'")
    _place_edges(top, edges)
    return top


def _parse_chain(line: str, line_no: int) -> list:
    """``a["x"] -->|"l"| b`` -> ``[("a", "x"), "l", ("b", None)]``."""
    chain, position, expect_node = [], 0, True
    while position < len(line):
        pattern = _NODE if expect_node else _ARROW
        match = pattern.match(line, position)
        if not match:
            raise ValueError(
                f"line {line_no}: cannot read {line[position:]!r} in {line!r} "
                f"(expected {'a node' if expect_node else 'an arrow -->'})"
            )
        chain.append(match.groups() if expect_node else (match.group(1) or ""))
        position, expect_node = match.end(), not expect_node
    if expect_node:
        raise ValueError(f"line {line_no}: {line!r} ends with an arrow")
    return chain


def _walk(graph: Graph):
    yield graph
    for child in graph.children.values():
        yield from _walk(child)


def _place_edges(top: Graph, edges: list[tuple[str, str, str]]) -> None:
    """Give each edge to the innermost graph holding both ends, each end lifted to the
    node or subgraph of that graph that contains it."""

    def path_to(node_id: str) -> list[tuple[Graph, str]]:
        # [(graph, id in that graph of what holds node_id), ...], from the top down
        # Each id is a node of exactly one graph.
        graph = next(g for g in _walk(top) if node_id in g.nodes)
        trail = [(graph, node_id)]
        while trail[0][0] is not top:
            parent = next(g for g in _walk(top) if trail[0][0] in g.children.values())
            parent_id = next(k for k, v in parent.children.items() if v is trail[0][0])
            trail.insert(0, (parent, parent_id))
        return trail

    for source, target, label in edges:
        a, b = path_to(source), path_to(target)
        depth = 0
        while (
            depth + 1 < min(len(a), len(b))
            and a[depth + 1][0] is b[depth + 1][0]
            and a[depth][1] == b[depth][1]
        ):
            depth += 1
        graph, ends = a[depth][0], (a[depth][1], b[depth][1])
        if ends[0] == ends[1]:
            raise ValueError(
                f"the edge {source} --> {target} joins a subgraph to itself"
            )
        graph.edges.append((*ends, label))


# ---- text ----------------------------------------------------------------------------


def _lines(label: str) -> list[tuple[str, str]]:
    """A label's lines as (text, style), style one of "", "i", "b"."""
    lines = []
    for part in re.split(r"<br\s*/?>", label):
        style = ""
        if match := _WHOLE_LINE_STYLE.match(part):
            style, part = match.groups()
        if "<" in part and re.search(r"<[A-Za-z/]", part):
            raise ValueError(
                f"label {label!r}: only <br/> and whole-line <i>/<b> are supported"
            )
        lines.append((html.unescape(part), style))
    return lines


def _font(style: str, size: float = FONT_SIZE) -> FontProperties:
    return FontProperties(
        size=size,
        style="italic" if style == "i" else "normal",
        weight="bold" if style == "b" else "normal",
    )


def _text_size(label: str, size: float = FONT_SIZE) -> tuple[float, float]:
    lines = _lines(label)
    width = max(
        _MEASURE.get_text_width_height_descent(text or " ", _font(style, size), False)[
            0
        ]
        for text, style in lines
    )
    return width, len(lines) * LINE_HEIGHT * size / FONT_SIZE


# ---- layout --------------------------------------------------------------------------


@dataclass
class Box:
    x: float  # centre
    y: float
    w: float
    h: float


@dataclass
class Layout:
    width: float
    height: float
    boxes: dict[str, Box]
    routes: list[tuple[list[tuple[float, float]], Label | None]]  # edge points, label
    inner: dict[str, Layout]  # layouts of the subgraphs, in their own coordinates


def layout(graph: Graph) -> Layout:
    """Place every node of ``graph`` (x right, y down, in points)."""
    across = graph.direction == "LR"  # ranks run along x
    inner = {name: layout(child) for name, child in graph.children.items()}
    sizes = {}
    for node_id, label in graph.nodes.items():
        if node_id in inner:
            title_w, title_h = _text_size(f"<b>{label}</b>")
            sizes[node_id] = (
                max(inner[node_id].width, title_w) + 2 * CLUSTER_PAD,
                inner[node_id].height + title_h + 2 * CLUSTER_PAD,
            )
        else:
            text_w, text_h = _text_size(label)
            sizes[node_id] = (text_w + 2 * PAD_X, text_h + 2 * PAD_Y)

    rank = _ranks(graph)
    layers: list[list[str]] = [[] for _ in range(max(rank.values(), default=0) + 1)]
    for node_id in graph.nodes:
        layers[rank[node_id]].append(node_id)
    # Long edges pass through one invisible point per rank they cross.
    chains = []
    for index, (source, target, label) in enumerate(graph.edges):
        chain = [source]
        for r in range(rank[source] + 1, rank[target]):
            point = f"\0{index}:{r}"
            layers[r].append(point)
            sizes[point] = (0.0, 0.0)
            chain.append(point)
        chains.append(chain + [target])
    links = [(c[i], c[i + 1]) for c in chains for i in range(len(c) - 1)]
    _order(layers, links)

    # Along the ranks: each rank as deep as its deepest box, plus room for edge labels.
    depth = [
        max((sizes[n][0 if across else 1] for n in layer), default=0)
        for layer in layers
    ]
    gaps = [RANK_GAP] * max(len(layers) - 1, 0)
    fans = _fans(chains)
    for (source, target, label), chain in zip(graph.edges, chains):
        if label:
            label_w, label_h = _text_size(label, LABEL_SIZE)
            need = label_w + 16 if across else (2 if fans(chain) else 1) * label_h + 14
            gaps[rank[source]] = max(gaps[rank[source]], need)
    main, position = {}, 0.0
    for r, layer in enumerate(layers):
        for node_id in layer:
            main[node_id] = position + depth[r] / 2
        position += depth[r] + (gaps[r] if r < len(gaps) else 0)

    cross = _cross_positions(
        layers, links, {n: s[1 if across else 0] for n, s in sizes.items()}
    )
    boxes = {}
    for node_id in main:
        w, h = sizes[node_id]
        x, y = (
            (main[node_id], cross[node_id])
            if across
            else (cross[node_id], main[node_id])
        )
        boxes[node_id] = Box(x, y, w, h)
    routes = []
    for chain in chains:
        first, last = boxes[chain[0]], boxes[chain[-1]]
        middle = [(boxes[p].x, boxes[p].y) for p in chain[1:-1]]
        if across:
            start, end = (first.x + first.w / 2, first.y), (last.x - last.w / 2, last.y)
        else:
            start, end = (first.x, first.y + first.h / 2), (last.x, last.y - last.h / 2)
        routes.append([start, *middle, end])
    _spread_ports(routes, chains, boxes, across)
    labels = _place_labels(routes, [e[2] for e in graph.edges], chains, boxes, across)
    shown = {n: b for n, b in boxes.items() if not n.startswith("\0")}
    # Shift everything, labels included, to start at (0, 0).
    rects = [(b.x - b.w / 2, b.y - b.h / 2, b.w, b.h) for b in shown.values()]
    rects += [label.rect for label in labels if label]
    left = min(r[0] for r in rects)
    top = min(r[1] for r in rects)
    for b in shown.values():
        b.x, b.y = b.x - left, b.y - top
    routes = [[(x - left, y - top) for x, y in route] for route in routes]
    for label in labels:
        if label:
            x, y, w, h = label.rect
            label.rect = (x - left, y - top, w, h)
    width = max(r[0] + r[2] for r in rects) - left
    height = max(r[1] + r[3] for r in rects) - top
    return Layout(width, height, shown, list(zip(routes, labels)), inner)


def _spread_ports(routes, chains, boxes, across: bool) -> None:
    """Where several edges leave (or enter) one side of a box, spread their ends over
    the middle of that side instead of stacking them on one point."""
    axis = 1 if across else 0  # the coordinate that runs along the side
    for end in (0, -1):
        neighbour = 1 if end == 0 else -2
        by_node: dict[str, list[int]] = {}
        for index, chain in enumerate(chains):
            by_node.setdefault(chain[end], []).append(index)
        for node_id, indices in by_node.items():
            if len(indices) < 2:
                continue
            box = boxes[node_id]
            side = box.h if across else box.w
            step = min(12.0, 0.6 * side / (len(indices) - 1))
            indices.sort(key=lambda i: routes[i][neighbour][axis])
            for rank, i in enumerate(indices):
                point = list(routes[i][end])
                point[axis] += (rank - (len(indices) - 1) / 2) * step
                routes[i][end] = tuple(point)


@dataclass
class Label:
    text: str
    rect: tuple[float, float, float, float]  # left, top, width, height


def _label_at(text: str, segment, t: float, flip: bool, across: bool) -> Label:
    """A label beside the point at ``t`` along ``segment``: above it (left to right) or
    right of it (top to bottom), or on the other side when ``flip``; kept between the
    segment's ends along the ranks, so it never reaches into a rank's boxes."""
    width, height = _text_size(text, LABEL_SIZE)
    (x1, y1), (x2, y2) = segment
    x, y = x1 + t * (x2 - x1), y1 + t * (y2 - y1)
    if across:
        x = min(max(x, x1 + width / 2 + 2), x2 - width / 2 - 2)
        y = y1 + (x - x1) / (x2 - x1) * (y2 - y1) if x2 != x1 else y
        top = y + 3 if flip else y - 3 - height
        return Label(text, (x - width / 2, top, width, height))
    y = min(max(y, y1 + height / 2 + 2), y2 - height / 2 - 2)
    x = x1 + (y - y1) / (y2 - y1) * (x2 - x1) if y2 != y1 else x
    left = x - 6 - width if flip else x + 6
    return Label(text, (left, y - height / 2, width, height))


def _overlap(a, b) -> bool:
    return (
        a[0] < b[0] + b[2]
        and b[0] < a[0] + a[2]
        and a[1] < b[1] + b[3]
        and b[1] < a[1] + a[3]
    )


def _fans(chains: list[list[str]]):
    """For an edge: "out" if its source has several edges out, "in" if its target has
    several edges in, else None."""
    outs = [c[0] for c in chains]
    ins = [c[-1] for c in chains]

    def fan(chain: list[str]) -> str | None:
        if outs.count(chain[0]) > 1:
            return "out"
        return "in" if ins.count(chain[-1]) > 1 else None

    return fan


def _place_labels(routes, texts, chains, boxes, across: bool) -> list[Label | None]:
    """Put each edge label beside the first segment of its edge, at the first of a few
    points along it that overlaps no box and no label placed before."""
    fans = _fans(chains)
    taken = [
        (b.x - b.w / 2, b.y - b.h / 2, b.w, b.h)
        for n, b in boxes.items()
        if not n.startswith("\0")
    ]
    labels: list[Label | None] = []
    for route, text, chain in zip(routes, texts, chains):
        if not text:
            labels.append(None)
            continue
        # Beside a fan of edges, a label goes where the edges are furthest apart.
        preferred = {"out": 0.7, "in": 0.3, None: 0.5}[fans(chain)]
        candidates = [
            _label_at(text, route[:2], t, flip, across)
            for flip in (False, True)
            for t in (preferred, 0.5, 0.35, 0.65, 0.2, 0.8)
        ]
        free = [c for c in candidates if not any(_overlap(c.rect, r) for r in taken)]
        label = free[0] if free else candidates[0]
        taken.append(label.rect)
        labels.append(label)
    return labels


def _ranks(graph: Graph) -> dict[str, int]:
    """Longest-path ranks; a cycle is an error."""
    incoming = {n: [] for n in graph.nodes}
    for source, target, _ in graph.edges:
        incoming[target].append(source)
    rank: dict[str, int] = {}
    visiting: set[str] = set()

    def visit(node_id: str) -> int:
        if node_id in rank:
            return rank[node_id]
        if node_id in visiting:
            raise ValueError(f"the diagram has a cycle through {node_id!r}")
        visiting.add(node_id)
        rank[node_id] = max((visit(p) + 1 for p in incoming[node_id]), default=0)
        return rank[node_id]

    for node_id in graph.nodes:
        visit(node_id)
    return rank


def _crossings(layers: list[list[str]], links: list[tuple[str, str]]) -> int:
    where = {n: (r, i) for r, layer in enumerate(layers) for i, n in enumerate(layer)}
    pairs = [(where[a][1], where[b][1], where[a][0]) for a, b in links]
    return sum(
        1
        for i, (a1, b1, r1) in enumerate(pairs)
        for a2, b2, r2 in pairs[i + 1 :]
        if r1 == r2 and (a1 - a2) * (b1 - b2) < 0
    )


def _order(layers: list[list[str]], links: list[tuple[str, str]]) -> None:
    """Barycentre sweeps, down then up, keeping the order with the fewest crossings."""
    best, best_crossings = [list(layer) for layer in layers], _crossings(layers, links)
    for sweep in range(6):
        downward = sweep % 2 == 0
        indices = range(1, len(layers)) if downward else range(len(layers) - 2, -1, -1)
        for r in indices:
            fixed = {n: i for i, n in enumerate(layers[r - 1 if downward else r + 1])}
            neighbours = {n: [] for n in layers[r]}
            for a, b in links:
                near, far = (b, a) if downward else (a, b)
                if near in neighbours and far in fixed:
                    neighbours[near].append(fixed[far])
            current = {n: i for i, n in enumerate(layers[r])}
            layers[r].sort(
                key=lambda n: (
                    sum(neighbours[n]) / len(neighbours[n])
                    if neighbours[n]
                    else current[n]
                )
            )
        crossings = _crossings(layers, links)
        if crossings < best_crossings:
            best, best_crossings = [list(layer) for layer in layers], crossings
    layers[:] = best


def _cross_positions(
    layers: list[list[str]], links: list[tuple[str, str]], breadth: dict[str, float]
) -> dict[str, float]:
    """Across the ranks: each node as near the mean of its neighbours as the rank's
    order and the gaps allow (down and up passes, each a least-squares placement)."""
    position: dict[str, float] = {}
    for layer in layers:
        offset = -sum(breadth[n] + NODE_GAP for n in layer) / 2
        for n in layer:
            position[n] = offset + breadth[n] / 2
            offset += breadth[n] + NODE_GAP
    for sweep in range(6):
        downward = sweep % 2 == 0
        for layer in layers if downward else reversed(layers):
            wanted = []
            for n in layer:
                near = (
                    [position[b] for a, b in links if a == n]
                    if not downward
                    else [position[a] for a, b in links if b == n]
                )
                wanted.append(sum(near) / len(near) if near else position[n])
            for n, p in zip(layer, _spread(wanted, [breadth[n] for n in layer])):
                position[n] = p
    return position


def _spread(wanted: list[float], breadth: list[float]) -> list[float]:
    """Positions in the given order, at least NODE_GAP apart, nearest ``wanted`` in the
    least-squares sense (pool-adjacent-violators on the offsets)."""
    offsets = [0.0]
    for i in range(1, len(wanted)):
        offsets.append(offsets[-1] + (breadth[i - 1] + breadth[i]) / 2 + NODE_GAP)
    blocks: list[list[float]] = []  # [sum, count]
    for target in (w - o for w, o in zip(wanted, offsets)):
        blocks.append([target, 1])
        while (
            len(blocks) > 1
            and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]
        ):
            total, count = blocks.pop()
            blocks[-1][0] += total
            blocks[-1][1] += count
    base = [value for total, count in blocks for value in [total / count] * count]
    return [b + o for b, o in zip(base, offsets)]


# ---- drawing -------------------------------------------------------------------------


def _draw(ax: plt.Axes, graph: Graph, placed: Layout, dx: float, dy: float) -> None:
    for node_id, box in placed.boxes.items():
        x0, y0 = dx + box.x - box.w / 2, dy + box.y - box.h / 2
        label = graph.nodes[node_id]
        if node_id in placed.inner:
            ax.add_patch(
                Rectangle(
                    (x0, y0),
                    box.w,
                    box.h,
                    fill=False,
                    edgecolor=INK,
                    linewidth=0.9,
                    linestyle=(0, (4, 3)),
                )
            )
            title_h = _text_size(f"<b>{label}</b>")[1]
            ax.text(
                x0 + CLUSTER_PAD,
                y0 + CLUSTER_PAD / 2 + title_h / 2,
                label,
                ha="left",
                va="center",
                fontproperties=_font("b"),
                color=INK,
                parse_math=False,
            )
            inner = placed.inner[node_id]
            _draw(
                ax,
                graph.children[node_id],
                inner,
                x0 + (box.w - inner.width) / 2,
                y0 + CLUSTER_PAD + title_h,
            )
            continue
        ax.add_patch(
            FancyBboxPatch(
                (x0, y0),
                box.w,
                box.h,
                boxstyle="round,pad=0,rounding_size=5",
                facecolor=BOX_FILL,
                edgecolor=INK,
                linewidth=1.0,
            )
        )
        lines = _lines(label)
        top = dy + box.y - len(lines) * LINE_HEIGHT / 2
        for i, (text, style) in enumerate(lines):
            ax.text(
                dx + box.x,
                top + (i + 0.5) * LINE_HEIGHT,
                text,
                ha="center",
                va="center_baseline",
                fontproperties=_font(style),
                color=INK,
                parse_math=False,
            )
    across = graph.direction == "LR"
    for points, label in placed.routes:
        shifted = [(dx + x, dy + y) for x, y in points]
        ax.add_patch(
            FancyArrowPatch(
                path=Path(shifted),
                arrowstyle="-|>",
                color=INK,
                mutation_scale=11,
                linewidth=1.0,
            )
        )
        if label:
            left, top, width, height = label.rect
            ax.text(
                dx + left + width / 2,
                dy + top + height / 2,
                label.text,
                color=INK,
                fontsize=LABEL_SIZE,
                ha="center",
                va="center",
                parse_math=False,
            )


def _plain(label: str) -> str:
    return " ".join(text for text, _ in _lines(label))


def describe(graph: Graph) -> str:
    """The chart in words, for the image's alt text."""
    parts = []
    for name, child in graph.children.items():
        parts.append(f"{_plain(graph.nodes[name])}: {describe(child)}")
    for source, target, label in graph.edges:
        words = f" ({_plain(label)})" if label else ""
        parts.append(
            f"{_plain(graph.nodes[source])} to {_plain(graph.nodes[target])}{words}"
        )
    if not graph.edges and not graph.children:
        parts.extend(_plain(label) for label in graph.nodes.values())
    return "; ".join(parts)


def figure(graph: Graph) -> plt.Figure:
    """Lay out and draw a parsed chart."""
    placed = layout(graph)
    margin = 4.0
    width, height = placed.width + 2 * margin, placed.height + 2 * margin
    fig = plt.figure(figsize=(width / 72, height / 72))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(height, 0)
    ax.set_axis_off()
    _draw(ax, graph, placed, margin, margin)
    return fig


def _turned(graph: Graph) -> Graph:
    """The same chart with every left-to-right part drawn top to bottom."""
    children = {name: _turned(child) for name, child in graph.children.items()}
    return Graph("TB", dict(graph.nodes), children, list(graph.edges))


def _has_left_to_right(graph: Graph) -> bool:
    return any(g.direction == "LR" for g in _walk(graph))


@functools.lru_cache(maxsize=256)
def render(source: str) -> str:
    """HTML for a chart: a figure pair from ``to_html``; a chart with a left-to-right
    part adds a top-to-bottom pair for narrow screens."""
    graph = parse(source)
    alt = "Diagram: " + describe(graph)
    with plt.rc_context({"svg.fonttype": "path"}):
        wide = to_html(figure(graph), alt)
        if not _has_left_to_right(graph):
            return f'<div class="diagram">{wide}</div>'
        narrow = to_html(figure(_turned(graph)), alt)
    return (
        f'<div class="diagram diagram-wide">{wide}</div>'
        f'<div class="diagram diagram-narrow">{narrow}</div>'
    )


def pipeline_source(
    steps: Sequence[tuple[str, Sequence[int]]], *, direction: str = "TD"
) -> str:
    """The flowchart of tensor steps, each box naming its step and its real shape.

    ``steps`` holds ``(label, shape)`` pairs in order, shapes taken from the tensors a
    page computed (``tensor.shape``). Returns the chart's source; ``pipeline`` draws it.
    """
    if direction not in ("TD", "LR"):
        raise ValueError(f"direction must be 'TD' or 'LR', got {direction!r}")
    if not steps:
        raise ValueError("steps must hold at least one (label, shape) pair, got none")
    lines = [f"flowchart {direction}"]
    for i, step in enumerate(steps):
        if len(step) != 2 or not all(isinstance(n, int) for n in step[1]):
            raise ValueError(f"steps[{i}] must be a (label, shape) pair, got {step!r}")
        label, shape = step
        text = html.escape(str(label)).replace('"', "&quot;")
        lines.append(f'    s{i}["{text}<br/><b>{tuple(shape)}</b>"]')
        if i:
            lines.append(f"    s{i - 1} --> s{i}")
    return "\n".join(lines)


def pipeline(
    steps: Sequence[tuple[str, Sequence[int]]], *, direction: str = "TD"
) -> str:
    """HTML of the flowchart of tensor steps (``pipeline_source``), for a page to
    print."""
    return render(pipeline_source(steps, direction=direction))


def fence_format(source, language, class_name, options, md, **kwargs) -> str:
    """The Markdown fence formatter (pymdownx.superfences ``custom_fences``).

    A chart that cannot be drawn stops the build: the Markdown extension would otherwise
    show its source as plain text, silently.
    """
    from pymdownx.superfences import SuperFencesException

    try:
        return render(source)
    except ValueError as error:
        raise SuperFencesException(f"cannot draw the diagram: {error}") from error
