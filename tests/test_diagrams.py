"""Flowcharts drawn at build time (llm_attention_site.diagrams): every chart of the site, in both
orientations, is laid out with no box or label on top of another and no edge through a label or
through a box other than its own ends, each edge runs from its source's box to its target's, its
smallest text shows at 9 CSS px or more in the content column of a desktop and of a phone, and
anything outside the supported syntax is a clear error."""

from __future__ import annotations

import base64
import itertools
import pathlib
import re

import markdown
import pytest
import torch
from pymdownx.superfences import SuperFencesException

from llm_attention_site import diagrams
from llm_attention_site.diagrams import _turned, describe, layout, parse, pipeline, pipeline_source, render, variants

ROOT = pathlib.Path(__file__).resolve().parents[1]
SITE_CHARTS = {
    f"{page.relative_to(ROOT / 'docs')}#{i}": source
    for page in sorted((ROOT / "docs").rglob("*.md"))
    for i, source in enumerate(re.findall(r"```mermaid\n(.*?)```", page.read_text(encoding="utf8"), re.DOTALL))
}
SAMPLE_SHAPES = [("x: a batch", (2, 6, 3)), ("split into heads", (2, 2, 6, 1)), ("merged", (2, 6, 2))]
# Content column, in CSS px, as measured in the built site: a 1280 px window, and a 390 px phone.
DESKTOP_COLUMN_PX, PHONE_COLUMN_PX = 688, 358
SMALLEST_TEXT_PX = 9.0


def test_the_pages_hold_charts():
    assert len(SITE_CHARTS) >= 8, sorted(SITE_CHARTS)


def _rects(placed, dx=0.0, dy=0.0):
    """Every box and label of a layout and its subgraphs, as (kind, name, left, top, w, h)."""
    found = []
    for name, box in placed.boxes.items():
        found.append(("box", name, dx + box.x - box.w / 2, dy + box.y - box.h / 2, box.w, box.h))
    for _, label in placed.routes:
        if label:
            left, top, w, h = label.rect
            found.append(("label", label.text, dx + left, dy + top, w, h))
    return found


def _overlaps(a, b) -> bool:
    return a[2] < b[2] + b[4] and b[2] < a[2] + a[4] and a[3] < b[3] + b[5] and b[3] < a[3] + a[5]


def _on_border(point, box, tolerance=0.5) -> bool:
    x, y = point
    left, right, top, bottom = box.x - box.w / 2, box.x + box.w / 2, box.y - box.h / 2, box.y + box.h / 2
    inside = left - tolerance <= x <= right + tolerance and top - tolerance <= y <= bottom + tolerance
    near_edge = min(abs(x - left), abs(x - right), abs(y - top), abs(y - bottom)) <= tolerance
    return inside and near_edge


def _enters(p, q, rect) -> bool:
    """Whether the segment p-q passes through the inside of rect (left, top, w, h): the segment,
    clipped to the rectangle's slabs in x and in y, keeps a piece of non-zero length."""
    (x1, y1), (x2, y2) = p, q
    low, high = 0.0, 1.0
    for start, delta, lo, hi in ((x1, x2 - x1, rect[0], rect[0] + rect[2]), (y1, y2 - y1, rect[1], rect[1] + rect[3])):
        if delta == 0:
            if not lo < start < hi:
                return False
            continue
        t1, t2 = sorted(((lo - start) / delta, (hi - start) / delta))
        low, high = max(low, t1), min(high, t2)
    return high - low > 1e-9


def _crossings(graph, placed) -> list[str]:
    """Every edge segment that runs through an edge label (its own included) or through a box
    other than its edge's two ends."""
    problems = []
    boxes = {name: (b.x - b.w / 2, b.y - b.h / 2, b.w, b.h) for name, b in placed.boxes.items()}
    labels = [(f"{s} --> {t}", label.rect) for (_, label), (s, t, _) in zip(placed.routes, graph.edges) if label]
    for (points, _), (source, target, _) in zip(placed.routes, graph.edges):
        for p, q in itertools.pairwise(points):
            problems += [f"the edge {source} --> {target} runs through the box {name!r}"
                         for name, rect in boxes.items() if name not in (source, target) and _enters(p, q, rect)]
            problems += [f"the edge {source} --> {target} runs through the label of {owner}"
                         for owner, rect in labels if _enters(p, q, rect)]
    return sorted(set(problems))


def _check(graph, placed) -> list[str]:
    problems = []
    for a, b in itertools.combinations(_rects(placed), 2):
        if _overlaps(a, b):
            problems.append(f"{a[0]} {a[1]!r} overlaps {b[0]} {b[1]!r}")
    problems += _crossings(graph, placed)
    for (points, _), (source, target, _) in zip(placed.routes, graph.edges):
        if not _on_border(points[0], placed.boxes[source]):
            problems.append(f"the edge {source} --> {target} does not start on {source}'s box")
        if not _on_border(points[-1], placed.boxes[target]):
            problems.append(f"the edge {source} --> {target} does not end on {target}'s box")
    for x, y in (p for points, _ in placed.routes for p in points):
        if not (-0.5 <= x <= placed.width + 0.5 and -0.5 <= y <= placed.height + 0.5):
            problems.append(f"an edge leaves the chart at ({x:.1f}, {y:.1f})")
    for name, inner in placed.inner.items():
        problems += _check(graph.children[name], inner)
    return problems


@pytest.mark.parametrize("name", sorted(SITE_CHARTS) + ["pipeline"])
def test_each_chart_of_the_site_is_laid_out_cleanly_both_ways(name):
    source = SITE_CHARTS.get(name) or pipeline_source(SAMPLE_SHAPES)
    graph = parse(source)
    drawn = variants(graph)
    assert len(drawn) <= 2 and drawn[0].direction == graph.direction
    assert describe(drawn[0]) == describe(graph), "a broken line reads the same"
    checked = []
    for variant in [graph, _turned(graph), *drawn]:
        if variant in checked:
            continue
        checked.append(variant)
        placed = layout(variant)
        assert placed.boxes.keys() == variant.nodes.keys()
        assert not _check(variant, placed), (variant.direction, _check(variant, placed))


def test_the_overlap_check_sees_an_edge_through_a_label_or_a_box():
    graph = parse('flowchart LR\n  a -->|"x"| b')
    placed = layout(graph)
    [(points, label)] = placed.routes
    middle = ((points[0][0] + points[-1][0]) / 2, (points[0][1] + points[-1][1]) / 2)
    label.rect = (middle[0] - 5, middle[1] - 5, 10, 10)  # moved onto its edge
    assert _crossings(graph, placed) == ["the edge a --> b runs through the label of a --> b"]
    assert _enters((0, 5), (20, 5), (5, 0, 10, 10)) and not _enters((0, 0), (20, 0), (5, 0, 10, 10))
    assert not _enters((0, 12), (20, 12), (5, 0, 10, 10)) and _enters((5.5, -5), (5.5, 20), (5, 0, 10, 10))


def _shown(html: str) -> tuple[str, str]:
    """The figures of a chart as the site shows them, light palette: (desktop, phone) as
    (img tag, SVG). The stylesheet shows the narrow variant, where there is one, on a phone."""
    tags = re.findall(r'<img class="figure"[^>]*>', html)
    found = list(zip(tags, _svgs(html)))[::2]  # light, dark per variant: keep light
    return found[0], found[-1]


def _smallest_text_px(tag: str, svg: str, column_px: float, font_pt: float) -> float:
    """How big the chart's smallest text shows, in CSS px: the image is drawn at its width
    attribute, shrunk to the column when wider (max-width: 100%), and its text is font_pt units
    of the SVG's viewBox."""
    width = float(re.search(r'\bwidth="([\d.]+)"', tag).group(1))
    view_width = float(re.search(r'viewBox="[-\d.]+ [-\d.]+ ([\d.]+) [\d.]+"', svg).group(1))
    return font_pt * min(width, column_px) / view_width


@pytest.mark.parametrize("name", sorted(SITE_CHARTS))
def test_each_chart_of_the_site_shows_its_text_at_9_css_px_or_more_on_desktop_and_phone(name):
    """And at diagrams.WIDE_TEXT_PX (12) or more on desktop, nearer the prose's 16 px: the
    widest chart showed its labels at 9.4 px before its lines were broken for that column."""
    graph = parse(SITE_CHARTS[name])
    labelled = any(label for g in diagrams._walk(graph) for _, _, label in g.edges)
    smallest = diagrams.LABEL_SIZE if labelled else diagrams.FONT_SIZE  # points = SVG units
    desktop, phone = _shown(render(SITE_CHARTS[name]))
    sizes = {
        "desktop": _smallest_text_px(*desktop, DESKTOP_COLUMN_PX, smallest),
        "phone": _smallest_text_px(*phone, PHONE_COLUMN_PX, smallest),
    }
    assert min(sizes.values()) >= SMALLEST_TEXT_PX, {k: round(v, 2) for k, v in sizes.items()}
    assert sizes["desktop"] >= diagrams.WIDE_TEXT_PX, {k: round(v, 2) for k, v in sizes.items()}


def test_a_chart_too_wide_for_a_phone_gets_a_narrow_variant_with_its_widest_labels_broken():
    source = "flowchart TD\n" + "\n".join(f'  x --> h{i}["head {i}: CausalAttention"]' for i in range(1, 5))
    graph = parse(source)
    wide, narrow = variants(graph)
    assert wide.direction == graph.direction and narrow.direction == "TB"
    assert [narrow.nodes[f"h{i}"] for i in range(1, 5)] == [f"head {i}:<br/>CausalAttention" for i in range(1, 5)]
    assert describe(narrow) == describe(graph), "a broken line reads the same"
    html = render(source)
    assert html.count('class="diagram diagram-wide"') == 1 and html.count('class="diagram diagram-narrow"') == 1
    assert diagrams._wrap("<i>one two three four</i>", diagrams.FONT_SIZE, 0) == "<i>one two</i><br/><i>three four</i>"


def test_every_node_and_edge_label_is_in_the_alt_text():
    source = 'flowchart LR\n  a["one<br/><i>two</i>"] -->|"via"| b["three &amp; four"]\n  b --> c'
    assert describe(parse(source)) == "one two to three & four (via); three & four to c"


def test_subgraphs_hold_their_nodes_and_edges_between_them_go_up_a_level():
    graph = parse(
        'flowchart TB\n  subgraph enc["Encoder"]\n    direction LR\n    h1 --> h2\n  end\n'
        '  subgraph dec["Decoder"]\n    direction LR\n    s1 --> s2\n  end\n  h2 --> s1\n  enc --> dec'
    )
    assert list(graph.nodes) == ["enc", "dec"]
    assert graph.children["enc"].direction == "LR" and list(graph.children["enc"].nodes) == ["h1", "h2"]
    assert graph.children["enc"].edges == [("h1", "h2", "")]
    assert graph.edges == [("enc", "dec", ""), ("enc", "dec", "")]


def test_ranks_follow_the_longest_path_and_long_edges_bend_around():
    graph = parse("flowchart LR\n  a --> b --> c --> d\n  a --> d")
    placed = layout(graph)
    xs = [placed.boxes[n].x for n in "abcd"]
    assert xs == sorted(xs) and len(set(xs)) == 4
    long_edge = placed.routes[-1][0]
    assert len(long_edge) == 4, "the edge a --> d passes one point on each rank between"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("graph LR\n a --> b", "must start with 'flowchart LR|TB|TD', got 'graph LR'"),
        ("flowchart LR\n a -> b", r"line 2: cannot read '-> b'"),
        ("flowchart LR\n a -->", "line 2: 'a -->' ends with an arrow"),
        ("flowchart LR\n a --> b --> a", "cycle through"),
        ("flowchart LR\n subgraph g\n a --> b", "not closed with 'end'"),
        ("flowchart LR\n end", "line 2: 'end' without a subgraph"),
        ("flowchart LR\n direction TB", "line 2: 'direction' belongs inside a subgraph"),
        ('flowchart LR\n a["<u>x</u>"] --> b', "only <br/> and whole-line <i>/<b> are supported"),
    ],
)
def test_anything_outside_the_subset_is_an_error_naming_it(source, message):
    with pytest.raises(ValueError, match=message):
        render(source)


def _svgs(html: str) -> list[str]:
    return [base64.b64decode(uri).decode() for uri in re.findall(r'src="data:image/svg\+xml;base64,([^"]+)"', html)]


def test_left_to_right_charts_get_a_narrow_variant_and_text_is_drawn_as_outlines():
    wide = render("flowchart LR\n  a --> b")
    assert wide.count('class="diagram diagram-wide"') == 1 and wide.count('class="diagram diagram-narrow"') == 1
    assert len(_svgs(wide)) == 4, "two orientations, each in two palettes"
    tall = render("flowchart TD\n  a --> b")
    assert tall.count('class="diagram"') == 1 and len(_svgs(tall)) == 2
    for svg in _svgs(wide) + _svgs(tall):
        assert "<text" not in svg, "text left to the browser's fonts would not match the measured boxes"
        assert 'alt="Diagram: a to b"' in wide


def test_a_bad_chart_stops_the_markdown_build_instead_of_showing_its_source():
    md = markdown.Markdown(
        extensions=["pymdownx.superfences"],
        extension_configs={"pymdownx.superfences": {"custom_fences": [
            {"name": "mermaid", "class": "diagram", "format": diagrams.fence_format}
        ]}},
    )
    assert 'class="diagram' in md.convert("```mermaid\nflowchart TD\n  a --> b\n```\n")
    with pytest.raises(SuperFencesException, match="cannot draw the diagram: line 2"):
        md.convert("```mermaid\nflowchart TD\n  a ==> b\n```\n")


def test_pipeline_draws_each_step_with_its_shape_in_order():
    x = torch.zeros(2, 6, 3)
    lines = pipeline_source([("x", x.shape), ("x.transpose(1, 2)", x.transpose(1, 2).shape)]).splitlines()
    assert lines[0] == "flowchart TD"
    assert '    s0["x<br/><b>(2, 6, 3)</b>"]' in lines
    assert '    s1["x.transpose(1, 2)<br/><b>(2, 3, 6)</b>"]' in lines
    assert "    s0 --> s1" in lines
    drawn = pipeline([("x", x.shape), ("x.transpose(1, 2)", x.transpose(1, 2).shape)])
    assert 'alt="Diagram: x (2, 6, 3) to x.transpose(1, 2) (2, 3, 6)"' in drawn


def test_pipeline_rejects_bad_steps():
    with pytest.raises(ValueError, match="direction must be 'TD' or 'LR', got 'up'"):
        pipeline([("x", (1,))], direction="up")
    with pytest.raises(ValueError, match=r"steps\[0\] must be a \(label, shape\) pair"):
        pipeline([("x", "shape")])
    with pytest.raises(ValueError, match="at least one"):
        pipeline([])
