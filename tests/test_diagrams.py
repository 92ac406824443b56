"""Flowcharts drawn at build time (llm_attention_site.diagrams): every chart of the site, in both
orientations, is laid out with no box or label on top of another, each edge runs from its
source's box to its target's, and anything outside the supported syntax is a clear error."""

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
from llm_attention_site.diagrams import _turned, describe, layout, parse, pipeline, pipeline_source, render

ROOT = pathlib.Path(__file__).resolve().parents[1]
SITE_CHARTS = {
    f"{page.relative_to(ROOT / 'docs')}#{i}": source
    for page in sorted((ROOT / "docs").rglob("*.md"))
    for i, source in enumerate(re.findall(r"```mermaid\n(.*?)```", page.read_text(encoding="utf8"), re.DOTALL))
}
SAMPLE_SHAPES = [("x: a batch", (2, 6, 3)), ("split into heads", (2, 2, 6, 1)), ("merged", (2, 6, 2))]


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


def _check(graph, placed) -> list[str]:
    problems = []
    for a, b in itertools.combinations(_rects(placed), 2):
        if _overlaps(a, b):
            problems.append(f"{a[0]} {a[1]!r} overlaps {b[0]} {b[1]!r}")
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
    for variant in (graph, _turned(graph)):
        placed = layout(variant)
        assert placed.boxes.keys() == variant.nodes.keys()
        assert not _check(variant, placed), _check(variant, placed)


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
