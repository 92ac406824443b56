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
so every browser shows the widths measured here. Each edge label goes beside its edge
where no edge, box or other label is; where none is free, the edges of that gap leave
their boxes straight for a while and the labels sit beside those parallel runs. A chart
also gets a top-to-bottom variant, which the stylesheet shows instead on a narrow
screen, when it has a left-to-right part or its text would show too small on a phone;
that variant's widest labels are broken into lines until its text is big enough.
Anything outside the subset is a ``ValueError`` that names the line. Not a model
module: it needs matplotlib.
"""

from __future__ import annotations

import functools
import html
import itertools
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
MARGIN = 4.0  # around the drawing
# A phone's content column (390 px screen), in CSS px. Its drawing's labels are broken
# into lines until its smallest text shows at TEXT_PX there (9 px is the floor; the
# rest is headroom), lines narrower than MIN_WRAP points excepted: they read worse
# broken than small.
PHONE_COLUMN_PX, TEXT_PX, MIN_WRAP = 358.0, 10.0, 60.0
# The column from 960 px up (686 CSS px), where the chart as written shows: its labels
# are broken until its smallest text shows at WIDE_TEXT_PX there, nearer the prose's
# 16 px (a chart 1,075 px wide showed its labels at 9.4 px).
WIDE_COLUMN_PX, WIDE_TEXT_PX = 686.0, 12.0
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


@functools.lru_cache(maxsize=4096)
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
    cross = _cross_positions(
        layers, links, {n: s[1 if across else 0] for n, s in sizes.items()}
    )

    # Along the ranks: each rank as deep as its deepest box, plus room for edge labels.
    depth = [
        max((sizes[n][0 if across else 1] for n in layer), default=0)
        for layer in layers
    ]
    gaps = [RANK_GAP] * max(len(layers) - 1, 0)
    stubs: dict[int, float] = {}  # rank -> straight run of the edges leaving it
    fans = _fans(chains)
    for (source, target, label), chain in zip(graph.edges, chains):
        if label:
            label_w, label_h = _text_size(label, LABEL_SIZE)
            need = label_w + 16 if across else (2 if fans(chain) else 1) * label_h + 14
            gaps[rank[source]] = max(gaps[rank[source]], need)
    # A label with no free place beside its edge first makes every edge of its gap
    # leave straight, as far as the label is deep, so that labels sit beside parallel
    # lines; then the gap grows, giving the labels room to slide along their edges.
    for _ in range(4):
        placed, crowded = _place(
            graph, sizes, layers, chains, cross, depth, gaps, stubs
        )
        if not crowded:
            break
        for r in crowded:
            if r in stubs:
                gaps[r] += RANK_GAP
                continue
            stubs[r] = 8 + max(
                _text_size(label, LABEL_SIZE)[0 if across else 1]
                for source, _, label in graph.edges
                if label and rank[source] == r
            )
            gaps[r] = max(gaps[r], stubs[r] + 1.5 * RANK_GAP)
    placed.inner = inner
    return placed


def _place(graph, sizes, layers, chains, cross, depth, gaps, stubs):
    """The layout for given gaps between ranks and straight runs out of ranks, and the
    ranks after which an edge label found no free place."""
    across = graph.direction == "LR"
    main, ends, position = {}, [], 0.0
    for r, layer in enumerate(layers):
        for node_id in layer:
            main[node_id] = position + depth[r] / 2
        ends.append(position + depth[r])
        position += depth[r] + (gaps[r] if r < len(gaps) else 0)
    rank = {n: r for r, layer in enumerate(layers) for n in layer}
    boxes = {}
    for node_id, along in main.items():
        w, h = sizes[node_id]
        x, y = (along, cross[node_id]) if across else (cross[node_id], along)
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
    for route, chain in zip(routes, chains):
        for k in range(len(chain) - 2, -1, -1):
            if rank[chain[k]] in stubs:
                reach = ends[rank[chain[k]]] + stubs[rank[chain[k]]]
                x, y = route[k]
                route.insert(k + 1, (reach, y) if across else (x, reach))
    labels, stuck = _place_labels(
        routes, [e[2] for e in graph.edges], chains, boxes, across
    )
    crowded = {rank[graph.edges[i][0]] for i in stuck}
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
    return Layout(width, height, shown, list(zip(routes, labels)), {}), crowded


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
    align: str = "center"  # lines of a label beside a vertical edge align on it


def _label_at(text: str, segment, t: float, flip: bool, across: bool) -> Label:
    """A label beside the point at ``t`` along ``segment``: above it (left to right) or
    right of it (top to bottom), or on the other side when ``flip``; kept between the
    segment's ends along the ranks, so it never reaches into a rank's boxes. Its
    nearest corner keeps a gap from the segment however steep the segment is."""
    width, height = _text_size(text, LABEL_SIZE)
    (x1, y1), (x2, y2) = segment
    if across:
        x = x1 + t * (x2 - x1)
        x = min(max(x, x1 + width / 2 + 2), x2 - width / 2 - 2)
        ends = [_along(segment, 0, x + d) for d in (-width / 2, width / 2)]
        top = max(ends) + 3 if flip else min(ends) - 3 - height
        return Label(text, (x - width / 2, top, width, height))
    y = y1 + t * (y2 - y1)
    y = min(max(y, y1 + height / 2 + 2), y2 - height / 2 - 2)
    ends = [_along(segment, 1, y + d) for d in (-height / 2, height / 2)]
    left = min(ends) - 6 - width if flip else max(ends) + 6
    align = "right" if flip else "left"
    return Label(text, (left, y - height / 2, width, height), align)


def _along(segment, axis: int, value: float) -> float:
    """The other coordinate of the segment's line where coordinate ``axis`` is
    ``value``, held to the segment's ends."""
    (a, b) = segment
    if a[axis] == b[axis]:
        return (a[1 - axis] + b[1 - axis]) / 2
    t = min(max((value - a[axis]) / (b[axis] - a[axis]), 0.0), 1.0)
    return a[1 - axis] + t * (b[1 - axis] - a[1 - axis])


def _overlap(a, b) -> bool:
    return (
        a[0] < b[0] + b[2]
        and b[0] < a[0] + a[2]
        and a[1] < b[1] + b[3]
        and b[1] < a[1] + a[3]
    )


def _crosses(p, q, rect, margin: float = 0.0) -> bool:
    """Whether the segment p-q passes through ``rect`` grown by ``margin`` on every
    side (clipping the segment to the rectangle)."""
    left, top = rect[0] - margin, rect[1] - margin
    right, bottom = rect[0] + rect[2] + margin, rect[1] + rect[3] + margin
    (x1, y1), (x2, y2) = p, q
    dx, dy = x2 - x1, y2 - y1
    low, high = 0.0, 1.0
    for step, room in (
        (-dx, x1 - left),
        (dx, right - x1),
        (-dy, y1 - top),
        (dy, bottom - y1),
    ):
        if step == 0:
            if room <= 0:
                return False
        elif step < 0:
            low = max(low, room / step)
        else:
            high = min(high, room / step)
    return low < high


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


# Clearance of a label from its own edge's line, and the larger one from any other
# edge, so that a label reads as its own edge's. Beyond ROOMY, more room is no better.
OWN_CLEARANCE, OTHER_CLEARANCE, ROOMY = 1.5, 5.0, 30.0


def _distance(p, q, rect) -> float:
    """The distance between the segment p-q and a rectangle (0 where they meet)."""
    if _crosses(p, q, rect):
        return 0.0
    left, top, width, height = rect
    corners = [(left, top), (left + width, top), (left, top + height)]
    corners.append((left + width, top + height))

    def to_segment(point) -> float:
        (x1, y1), (x2, y2), (x, y) = p, q, point
        length = (x2 - x1) ** 2 + (y2 - y1) ** 2
        t = ((x - x1) * (x2 - x1) + (y - y1) * (y2 - y1)) / length if length else 0.0
        t = min(max(t, 0.0), 1.0)
        return ((x - x1 - t * (x2 - x1)) ** 2 + (y - y1 - t * (y2 - y1)) ** 2) ** 0.5

    def to_rect(point) -> float:
        x, y = point
        dx = max(left - x, 0.0, x - left - width)
        dy = max(top - y, 0.0, y - top - height)
        return (dx * dx + dy * dy) ** 0.5

    return min([to_segment(c) for c in corners] + [to_rect(p), to_rect(q)])


def _place_labels(routes, texts, chains, boxes, across: bool):
    """Put each edge label beside the first segment of its edge, at one of many points
    along it and on either side, where it meets no box, no label placed before and no
    edge: the one with most room from other edges (up to ROOMY), else the first in
    order of preference. Returns the labels and the indices of the edges whose label
    found no such place (each of those is put at its first choice)."""
    fans = _fans(chains)
    taken = [
        (b.x - b.w / 2, b.y - b.h / 2, b.w, b.h)
        for n, b in boxes.items()
        if not n.startswith("\0")
    ]
    placed: list[tuple[float, float, float, float]] = []  # labels, with a margin
    segments = [list(itertools.pairwise(route)) for route in routes]

    def room(rect, own: int) -> float:
        """Room from other edges, or -1 where the label may not go."""
        if any(_overlap(rect, r) for r in taken + placed):
            return -1.0
        if any(_crosses(p, q, rect, OWN_CLEARANCE) for p, q in segments[own]):
            return -1.0
        nearest = min(
            (
                _distance(p, q, rect)
                for index, route in enumerate(segments)
                if index != own
                for p, q in route
            ),
            default=ROOMY,
        )
        return min(nearest, ROOMY) if nearest >= OTHER_CLEARANCE else -1.0

    labels: list[Label | None] = []
    stuck = []
    for index, (route, text, chain) in enumerate(zip(routes, texts, chains)):
        if not text:
            labels.append(None)
            continue
        # Beside a fan of edges, a label goes where the edges are furthest apart.
        preferred = {"out": 0.7, "in": 0.3, None: 0.5}[fans(chain)]
        steps = sorted(range(21), key=lambda k: (abs(k / 20 - preferred), k))
        candidates = [
            _label_at(text, route[:2], k / 20, flip, across)
            for flip in (False, True)
            for k in steps
        ]
        rooms = [room(c.rect, index) for c in candidates]
        best = max(range(len(candidates)), key=lambda i: (rooms[i], -i))
        if rooms[best] < 0:
            stuck.append(index)
            best = 0
        x, y, w, h = candidates[best].rect
        margin = OTHER_CLEARANCE
        placed.append((x - margin, y - margin, w + 2 * margin, h + 2 * margin))
        labels.append(candidates[best])
    return labels, stuck


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
            lines = _lines(label.text)
            x = left + {"left": 0, "center": width / 2, "right": width}[label.align]
            for i, (text, style) in enumerate(lines):
                ax.text(
                    dx + x,
                    dy + top + (i + 0.5) * height / len(lines),
                    text,
                    color=INK,
                    fontproperties=_font(style, LABEL_SIZE),
                    ha=label.align,
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
    width, height = placed.width + 2 * MARGIN, placed.height + 2 * MARGIN
    fig = plt.figure(figsize=(width / 72, height / 72))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(height, 0)
    ax.set_axis_off()
    _draw(ax, graph, placed, MARGIN, MARGIN)
    return fig


def _turned(graph: Graph) -> Graph:
    """The same chart with every left-to-right part drawn top to bottom."""
    children = {name: _turned(child) for name, child in graph.children.items()}
    return Graph("TB", dict(graph.nodes), children, list(graph.edges))


def _smallest_font(graph: Graph) -> float:
    labelled = any(label for g in _walk(graph) for _, _, label in g.edges)
    return LABEL_SIZE if labelled else FONT_SIZE


def _split_line(part: str, size: float) -> str | None:
    """One line of a label broken in two at the space that balances the halves best,
    or None when it has no space."""
    style, body = "", part
    if match := _WHOLE_LINE_STYLE.match(part):
        style, body = match.groups()

    def styled(text: str) -> str:
        return f"<{style}>{text}</{style}>" if style else text

    spaces = [i for i, char in enumerate(body) if char == " "]
    if not spaces:
        return None
    cut = min(
        spaces,
        key=lambda i: (
            max(
                _text_size(styled(body[:i]), size)[0],
                _text_size(styled(body[i + 1 :]), size)[0],
            ),
            i,
        ),
    )
    return styled(body[:cut]) + "<br/>" + styled(body[cut + 1 :])


def _wrap(label: str, size: float, threshold: float) -> str:
    """The label with each line at least ``threshold`` wide broken in two."""
    parts = re.split(r"<br\s*/?>", label)
    return "<br/>".join(
        (_split_line(part, size) or part)
        if _text_size(part, size)[0] >= threshold
        else part
        for part in parts
    )


def _texts(graph: Graph):
    """Every wrappable label as (label, size): node labels and edge labels (a
    subgraph's title stays one line)."""
    for g in _walk(graph):
        for node_id, label in g.nodes.items():
            if node_id not in g.children:
                yield label, FONT_SIZE
        for _, _, label in g.edges:
            if label:
                yield label, LABEL_SIZE


def _relabelled(graph: Graph, new: dict[tuple[str, float], str]) -> Graph:
    return Graph(
        graph.direction,
        {
            n: label if n in graph.children else new.get((label, FONT_SIZE), label)
            for n, label in graph.nodes.items()
        },
        {name: _relabelled(child, new) for name, child in graph.children.items()},
        [
            (a, b, new.get((label, LABEL_SIZE), label) if label else label)
            for a, b, label in graph.edges
        ],
    )


def _fit(graph: Graph, column_px: float, text_px: float = TEXT_PX) -> Graph:
    """The chart with as few label lines broken in two as lets its smallest text show
    at ``text_px`` or more in a column ``column_px`` wide (or as near as breaking lines
    gets), the widest lines broken first. Same labels break alike."""
    limit = _smallest_font(graph) * column_px / text_px  # drawing width, in points

    def width(g: Graph) -> float:  # as to_html saves it: a tight box, padded
        pad = 72 * plt.rcParams["savefig.pad_inches"]
        return layout(g).width + 2 * (MARGIN + pad)

    best, best_width = graph, width(graph)
    if best_width <= limit:
        return graph
    texts = list(dict.fromkeys(_texts(graph)))
    widths = sorted(
        {
            _text_size(part, size)[0]
            for label, size in texts
            for part in re.split(r"<br\s*/?>", label)
            if _text_size(part, size)[0] >= MIN_WRAP and _split_line(part, size)
        },
        reverse=True,
    )
    new: dict[tuple[str, float], str] = {}
    for threshold in widths:
        trial_new = {
            (label, size): _wrap(label, size, threshold) for label, size in texts
        }
        trial = _relabelled(graph, trial_new)
        trial_width = width(trial)
        if trial_width < best_width:
            best, best_width, new = trial, trial_width, trial_new
        if trial_width <= limit:
            break
    # Undo the breaks the fit does not need, so that labels stay whole where they can.
    goal = max(limit, best_width)
    for key in [k for k, v in new.items() if v != k[0]]:
        trial_new = {**new, key: key[0]}
        trial = _relabelled(graph, trial_new)
        if width(trial) <= goal:
            best, new = trial, trial_new
    return best


def variants(graph: Graph) -> list[Graph]:
    """The charts drawn for ``graph``: itself, fitted to the column from 960 px up,
    then, where it differs, the chart for narrow screens: turned top to bottom and
    fitted to a phone's column."""
    wide = _fit(graph, WIDE_COLUMN_PX, WIDE_TEXT_PX)
    narrow = _fit(_turned(graph), PHONE_COLUMN_PX)
    return [wide] if narrow == wide else [wide, narrow]


@functools.lru_cache(maxsize=256)
def render(source: str) -> str:
    """HTML for a chart: a figure pair from ``to_html``; where a narrow screen needs
    another drawing (a left-to-right part, or labels too wide for its column), a
    top-to-bottom pair for narrow screens follows."""
    graph = parse(source)
    alt = "Diagram: " + describe(graph)
    with plt.rc_context({"svg.fonttype": "path"}):
        drawn = [
            to_html(figure(g), alt, text_pt=_smallest_font(g)) for g in variants(graph)
        ]
    if len(drawn) == 1:
        return f'<div class="diagram">{drawn[0]}</div>'
    return (
        f'<div class="diagram diagram-wide">{drawn[0]}</div>'
        f'<div class="diagram diagram-narrow">{drawn[1]}</div>'
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
