"""Checks of the figures of a built page, run inside its one browser visit (tests/test_site_browser.py).

Every explorable figure (tests of each kind: rows, heads, stages, decoding, temperature) shows
the numbers its page prints for every control, driven by pointer, tap and keyboard, fits a
phone's column with text of at least 9 CSS px; every figure of attention weights is drawn on the 0..1 colour scale and its
full-size link opens its SVG; a chapter does not scroll sideways on a phone; a chapter's figures
load lazily, in one palette; the home page's map links every page of the navigation. Each check
raises AssertionError saying what is wrong.
"""

from __future__ import annotations

from tests import axe_checks

CHAPTERS = [
    "chapters/why-attention/",
    "chapters/simple-self-attention/",
    "chapters/trainable-self-attention/",
    "chapters/causal-attention/",
    "chapters/multi-head-attention/",
    "chapters/summary/",
]
FIGURE_PAGES = [*CHAPTERS, "beyond/pitfalls/"]
EXPLORER_PAGES = [
    *CHAPTERS[1:5],
    "at-work/watching-attention-learn/",
    "at-work/generating-with-a-kv-cache/",
    "modern/sliding-window/",
    "modern/combined/",
]
NO_WEIGHTS_HEATMAP = ("chapters/why-attention/", "chapters/summary/")

# The text of the first listing after a figure: what the page printed for it.
_PRINTED = """figure => {
  const after = [...document.querySelectorAll('pre')].find(
    pre => figure.compareDocumentPosition(pre) & Node.DOCUMENT_POSITION_FOLLOWING);
  return after.textContent;
}"""

_READOUT = """figure => ({
  title: figure.querySelector('.explorer-readout-title').textContent,
  values: [...figure.querySelectorAll('.explorer-readout .explorer-value')].map(e => e.textContent),
  selected: [...figure.querySelectorAll('tbody tr')].findIndex(r => r.classList.contains('explorer-selected')),
})"""

# The cells of the first table inside an element, row by row: the digits, or where a compact
# grid shows none, the weight its shade is drawn with (none: 0).
_CELLS = """root => [...root.querySelector('table').tBodies[0].rows]
    .map(r => [...r.cells].slice(1).map(c => !c.closest('.explorer-compact') ? c.textContent
        : (c.style.getPropertyValue('--w') || '0.00')))"""

# Every figure of the page that is not inside another one.
_TOP = ".md-content figure.explorer:not(.heads-explorer .explorer)"


def _printed(figure) -> list[str]:
    return figure.evaluate(_PRINTED).strip("\n").splitlines()


def _quoted(token: str) -> str:
    return f"\u201c{token}\u201d"


# Point at every row of a row explorer in turn (a pointerover on one of its cells, as a mouse
# or a finger sends) and read what the readout shows: one round trip for the whole grid.
_EVERY_ROW = """figure => [...figure.querySelectorAll('tbody tr')].map((row, i) => {
  const cell = row.cells[1 + (i % (row.cells.length - 1))], box = cell.getBoundingClientRect();
  cell.dispatchEvent(new PointerEvent('pointerover', {
    bubbles: true, clientX: box.left + box.width / 2, clientY: box.top + box.height / 2}));
  return (READOUT)(figure);
})""".replace("READOUT", _READOUT)


def _check_rows(page, figure, tokens: list[str], rows: list[list[str]], state: str,
                inputs: bool = True) -> None:
    """The table is the printed one; pointing at each row shows that row's printed weights;
    with ``inputs``, a real pointer on a row's label and on a cell, a tap (click) and the
    arrow keys choose rows too."""
    compact = "explorer-compact" in (figure.get_attribute("class") or "")
    table = figure.locator("table").first
    assert figure.evaluate(_CELLS) == rows, f"{state}: the table is not the printed weights"
    for i, shown in enumerate(figure.evaluate(_EVERY_ROW)):
        where = f" at position {i}" if compact else ""
        assert f"{_quoted(tokens[i])}{where}" in shown["title"] and state in shown["title"], (i, shown["title"])
        assert shown["values"] == rows[i], (state, i, shown["values"], rows[i])
        assert shown["selected"] == i, (state, i, shown["selected"])
    if not inputs:
        return
    last = len(tokens) - 1
    table.locator("tbody tr").nth(0).locator("th").hover(force=True)  # a real pointer move
    assert figure.evaluate(_READOUT)["selected"] == 0, "pointing at a row's label did not choose it"
    table.locator("tbody tr").nth(last).locator("td").nth(0).hover(force=True)
    assert figure.evaluate(_READOUT)["selected"] == last, "pointing at a cell did not choose its row"
    page.mouse.move(0, 0)  # off the figure: the pointer must not stand in for a tap or a key
    table.locator("tbody tr").nth(1).locator("td").last.dispatch_event("click")
    assert figure.evaluate(_READOUT)["selected"] == 1, "a tap on a cell did not choose its row"
    table.locator("tbody tr").nth(1).locator("td").first.hover(force=True)  # the pointer rests here
    table.focus()
    for key, row in (("ArrowDown", 2), ("End", last), ("Home", 0)):
        page.keyboard.press(key)
        shown = figure.evaluate(_READOUT)
        assert shown["selected"] == row and shown["values"] == rows[row], (
            f"{key} with the pointer resting on row 1 chose row {shown['selected']}, not {row}")
    page.mouse.move(0, 0)
    if not compact:  # the chips sit under the table, centred as it is
        _check_centred(figure)


# The middle of a figure's table and of the row of its readout's chips, in CSS px from the left.
_MIDDLES = """figure => {
  const table = figure.querySelector('table').getBoundingClientRect();
  const chips = [...figure.querySelectorAll('.explorer-chip')].map(c => c.getBoundingClientRect());
  const left = Math.min(...chips.map(c => c.left)), right = Math.max(...chips.map(c => c.right));
  return [table.left + table.width / 2, (left + right) / 2];
}"""


def _check_centred(figure) -> None:
    table, chips = figure.evaluate(_MIDDLES)
    assert abs(table - chips) <= 3, f"the chips' middle is {chips - table:+.0f} px from the table's"


def _weight_rows(lines: list[str]) -> tuple[list[str], list[list[str]]]:
    """A weight_table: the tokens, then each row's values."""
    tokens = lines[0].split()
    return tokens, [line.split()[1:] for line in lines[1 : 1 + len(tokens)]]


def check_row_explorer(page, figure) -> None:
    """The default state's table is the printed one, every row shows its printed weights, and
    every switch changes the table."""
    tokens, rows = _weight_rows(_printed(figure))
    switches = figure.locator(".explorer-switches button")
    state = switches.nth(0).text_content() if switches.count() else ""
    _check_rows(page, figure, tokens, rows, state)
    for k in range(1, switches.count()):
        switches.nth(k).click()
        assert switches.nth(k).get_attribute("aria-pressed") == "true", f"switch {k} not pressed"
        assert figure.evaluate(_CELLS) != rows, f"switch {k} changed nothing"


# Each map of the phase shown: its scores, then what the row explorer names once it is chosen.
_EVERY_TILE = """(figure, phase) => [...figure.querySelectorAll(`.heads-phase[data-phase="${phase}"] .head-tile`)]
  .map(tile => {
    tile.click();
    return {layer: tile.dataset.layer, head: tile.dataset.head, pressed: tile.getAttribute('aria-pressed'),
            scores: [...tile.querySelectorAll('.head-score')].map(s => s.textContent.split(' ').pop()),
            title: figure.querySelector('.explorer-readout-title').textContent};
  })"""


# A window this high shows a whole heads explorer at 1280 px, under the theme's header: a
# click on a map changes a grid in view.
HEADS_WINDOW = 800


def check_heads_explorer(page, figure) -> None:
    """At 1280 px the figure fits a window HEADS_WINDOW high; each phase's maps carry the
    printed scores; choosing a map opens that head; the printed head's rows show its printed
    weights in every phase."""
    if page.viewport_size["width"] == 1280:
        height, header = figure.evaluate(
            "f => [f.getBoundingClientRect().height, document.querySelector('.md-header').offsetHeight]")
        assert height + header <= HEADS_WINDOW, (
            f"{height:.0f} px tall under a {header} px header: more than a {HEADS_WINDOW} px window")
    lines = _printed(figure)
    scores = {}
    for line in lines:
        parts = line.split()
        if len(parts) >= 6 and parts[-4].isdigit() and parts[-3].isdigit():
            scores[(" ".join(parts[:-4]), parts[-4], parts[-3])] = parts[-2:]
    tables = {}
    for k, line in enumerate(lines):
        if line.startswith("layer ") and ", head " in line:
            tables[line.strip()] = _weight_rows(lines[k + 1 :])
    assert scores and tables, lines[:5]
    phases = figure.locator(":scope > .explorer-switches button")
    rows_figure = figure.locator(".attention-explorer")
    for p in range(phases.count()):
        phase = phases.nth(p).text_content()
        phases.nth(p).click()
        assert phases.nth(p).get_attribute("aria-pressed") == "true", phase
        tiles = figure.evaluate(_EVERY_TILE, phase)
        assert len(tiles) == len([key for key in scores if key[0] == phase]) > 0, phase
        for tile in tiles:
            where = (phase, tile["layer"], tile["head"])
            assert tile["scores"] == scores[where] and tile["pressed"] == "true", (where, tile)
            assert f"layer {tile['layer']}, head {tile['head']}, {phase}" in tile["title"], (where, tile)
        for name, (tokens, rows) in tables.items():
            if name.endswith(phase):
                layer, head = name.split(",")[0].split()[1], name.split(",")[1].split()[1]
                figure.locator(f'.heads-phase[data-phase="{phase}"] .head-tile[data-layer="{layer}"]'
                               f'[data-head="{head}"]').click()  # a real click
                _check_rows(page, rows_figure, tokens, rows, name, inputs=p == 0)


def _stage_blocks(lines: list[str]) -> list[tuple[str, list[list[str]]]]:
    blocks, current = [], None
    for line in lines:
        if current is None and line[:1].isdigit() and ". " in line:
            current = (line.split(". ", 1)[1], [])
            blocks.append(current)
        elif current is not None and not line.strip():
            current = None
        elif current is not None:
            current[1].append(line)
    return [(title, body[1:]) for title, body in blocks]  # body[0]: the column labels


# What a stepper shows: which stages are visible, the first visible one's title, cells and
# highlighted row, the row highlighted in every stage, and the step label.
_STEPPER = """figure => {
  const stages = [...figure.querySelectorAll('.stepper-stage')];
  const shown = stages.find(s => !s.hidden && s.getClientRects().length > 0);
  const chosen = s => [...s.querySelectorAll('tbody tr')].findIndex(r => r.classList.contains('explorer-selected'));
  return {visible: stages.map(s => s === shown), title: shown.dataset.title,
          cells: (CELLS)(shown), chosen: stages.map(chosen),
          label: figure.querySelector('.explorer-step-label').textContent,
          height: figure.getBoundingClientRect().height};
}""".replace("CELLS", _CELLS)

# Where the focus is: an element of the figure (its class), or outside it (None).
_FOCUS_IN = """figure => figure.contains(document.activeElement) && document.activeElement !== figure
  ? document.activeElement.className : null"""


def _press_next_to_the_end(page, figure, count: int, shown) -> list:
    """Enter on Next until the last step, as a keyboard user does; what ``shown()`` reads at
    each step. The focus must stay on a control of the figure when Next is disabled at the end,
    and the figure keep its height at every step (the text below it must not move)."""
    next_button = figure.locator(".explorer-next")
    next_button.focus()
    seen = [shown(0)]
    for k in range(1, count):
        page.keyboard.press("Enter")
        seen.append(shown(k))
    assert next_button.is_disabled(), "Next still works after the last step"
    focused = figure.evaluate(_FOCUS_IN)
    assert focused and "explorer-previous" in focused, f"Enter on Next at the last step left the focus on {focused}"
    heights = [round(s["height"]) for s in seen]
    assert max(heights) - min(heights) <= 1, f"the figure's height changes from step to step: {heights}"
    return seen



def check_stepper(page, figure) -> None:
    """Next, Previous and the slider's keys show each stage alone, with the printed numbers;
    the chosen query row stays highlighted in every stage, and pointing or the keys move it."""
    stages = _stage_blocks(_printed(figure))
    n = len(stages)
    assert figure.locator(".stepper-stage").count() == n > 1, (figure.locator(".stepper-stage").count(), n)
    query = int(figure.get_attribute("data-query"))
    previous = figure.locator(".explorer-previous")
    seen = _press_next_to_the_end(page, figure, n, lambda k: figure.evaluate(_STEPPER))
    for k, ((title, body), shown) in enumerate(zip(stages, seen)):
        assert shown["visible"] == [i == k for i in range(n)] and shown["title"] == title, (k, title, shown)
        printed = [line.split()[-len(shown["cells"][0]):] for line in body]
        assert shown["cells"] == printed, (title, shown["cells"], printed)
        assert shown["chosen"] == [query] * n and title in shown["label"], (title, shown)
    previous.click()
    assert figure.evaluate(_STEPPER)["visible"][-2], "Previous did not go back one stage"
    figure.locator(".explorer-steps input").focus()
    page.keyboard.press("Home")
    assert figure.evaluate(_STEPPER)["visible"][0] and previous.is_disabled(), "Home on the slider"
    page.keyboard.press("ArrowRight")
    assert figure.evaluate(_STEPPER)["visible"][1], "the slider's arrow key did not go to stage 2"
    other = (query + 2) % len(stages[0][1])
    second = figure.locator(".stepper-stage").nth(1)
    second.locator("tbody tr").nth(other).locator("td").first.hover(force=True)
    assert figure.evaluate(_STEPPER)["chosen"] == [other] * n, f"pointing at row {other}"
    page.mouse.move(0, 0)
    second.locator("table").focus()
    page.keyboard.press("ArrowUp")
    assert figure.evaluate(_STEPPER)["chosen"] == [other - 1] * n, "ArrowUp did not move the query"


# What a decoding figure shows at its current step.
_DECODE = """figure => Object.assign((READOUT)(figure), {
  status: figure.querySelector('.decode-status').textContent,
  filled: [...figure.querySelectorAll('tbody tr')].map(r => !r.classList.contains('decode-future')),
  marks: [...figure.querySelector('tfoot tr').cells].slice(1).map(c => c.textContent),
  height: figure.getBoundingClientRect().height})""".replace("READOUT", _READOUT)


def check_decode_explorer(page, figure) -> None:
    """Next and the slider step through decoding; each step shows the printed query, keys read,
    rows held, bytes and weights; the grid fills row by row and the cache row marks what was
    dropped."""
    steps = []
    for line in _printed(figure):
        head, values = line.split(": ", 1)[1].split("): ")
        parts = head.replace("-", " ").replace("(", " ").split()
        # query L reads A L, cache holds H L B bytes
        steps.append((int(parts[1]), int(parts[3]), int(parts[7]), int(parts[9]), values.split()))
    assert len(steps) > 1, steps
    seen = _press_next_to_the_end(page, figure, len(steps), lambda k: figure.evaluate(_DECODE))
    for k, ((last, reads_from, holds_from, nbytes, values), shown) in enumerate(zip(steps, seen)):
        held = last + 1 - holds_from
        expected = (f"Step {k + 1} of {len(steps)}", f": the query at position {last} ",
                    f"reads keys {reads_from} to {last};", f"holds {held} row{'' if held == 1 else 's'}, ",
                    f"{nbytes:,} bytes.")
        assert all(e in shown["status"] for e in expected), (shown["status"], expected)
        assert shown["values"] == values and shown["selected"] == last, (k, shown, values, last)
        assert shown["filled"] == [i <= last for i in range(len(shown["filled"]))], (k, shown["filled"])
        marks = shown["marks"]
        assert marks[:holds_from] == ["\u00d7"] * holds_from and marks[last] == "+", (k, marks)
    figure.locator(".explorer-steps input").focus()
    page.keyboard.press("Home")
    assert f"Step 1 of {len(steps)}" in figure.locator(".decode-status").text_content(), "Home on the slider"
    if steps[0][0] > 0:  # a tap on a row of the prompt, which the first step computed with the others
        row = steps[0][0] - 1
        figure.locator("tbody tr").nth(row).locator("td").first.dispatch_event("click")
        shown = figure.evaluate(_DECODE)
        cells = figure.evaluate(_CELLS)[row][: row + 1]
        assert shown["selected"] == row and f"position {row} " in shown["status"], (
            f"a tap on the prompt's row {row} showed row {shown['selected']}: {shown['status']}")
        assert f"position {row}" in shown["title"] and shown["values"] == cells, (shown["title"], shown["values"], cells)
    row = steps[2][0]  # pointing at a row goes to the step that computed it
    figure.locator("tbody tr").nth(row).locator("td").first.hover(force=True)
    assert figure.evaluate(_DECODE)["selected"] == row, f"pointing at row {row}"
    page.mouse.move(0, 0)
    figure.locator("table").focus()
    page.keyboard.press("ArrowDown")
    assert figure.evaluate(_DECODE)["selected"] == steps[3][0], "ArrowDown on the grid: the next step"


# Every temperature of the slider, as its input event sets it, for the top-k switch pressed.
_EVERY_TEMPERATURE = """figure => {
  const slider = figure.querySelector('.explorer-steps input');
  return [...Array(Number(slider.max) + 1).keys()].map(k => {
    slider.value = String(k);
    slider.dispatchEvent(new Event('input', {bubbles: true}));
    return {setting: figure.querySelector('.temperature-setting').textContent,
            values: [...figure.querySelectorAll('.temperature-value')].map(e => e.textContent)};
  });
}"""


def check_temperature_explorer(page, figure) -> None:
    """Every top-k switch at every temperature of the slider shows the printed probabilities;
    the slider answers the keyboard and its buttons."""
    lines = _printed(figure)
    printed = {}
    for line in lines[1:]:
        parts = line.split()
        printed[(parts[0], " ".join(parts[1:3]))] = parts[3:]
    keeps = figure.locator(".explorer-switches button")
    temperatures = sorted({t for t, _ in printed}, key=float)
    assert keeps.count() * len(temperatures) == len(printed), (keeps.count(), temperatures, len(printed))
    for k in range(keeps.count()):
        keeps.nth(k).click()
        keep = keeps.nth(k).text_content()
        for t, shown in zip(temperatures, figure.evaluate(_EVERY_TEMPERATURE), strict=True):
            assert shown["setting"] == f"temperature {t}, keep {keep}", (shown["setting"], t, keep)
            assert shown["values"] == printed[(t, keep)], (t, keep, shown["values"], printed[(t, keep)])
    figure.locator(".explorer-steps input").focus()
    page.keyboard.press("Home")
    page.keyboard.press("ArrowRight")
    setting = figure.locator(".temperature-setting").text_content()
    assert setting.startswith(f"temperature {temperatures[1]},"), f"the arrow key on the slider: {setting}"
    figure.locator(".explorer-next").click()
    setting = figure.locator(".temperature-setting").text_content()
    assert setting.startswith(f"temperature {temperatures[2]},"), f"the Warmer button: {setting}"
    # The slider's scale names each temperature; the switches say what they choose.
    scale = figure.evaluate("f => [...f.querySelectorAll('.explorer-scale span')].map(s => s.textContent)")
    assert scale == temperatures, f"the slider's scale {scale}, not the temperatures {temperatures}"
    named = figure.evaluate("""f => { const bar = f.querySelector('.explorer-switches');
        const label = document.getElementById(bar.getAttribute('aria-labelledby'));
        return label && label.textContent; }""")
    assert named == "Keep:", f"the top-k switches are named {named!r}"


# At a phone's width: the smallest text shown in each explorer, and its width against the column.
_LAYOUT = """() => {
  const column = document.querySelector('.md-content__inner').getBoundingClientRect();
  const report = [];
  for (const f of document.querySelectorAll('.md-content figure.explorer')) {
    const box = f.getBoundingClientRect();
    if (box.right > column.right + 1 || f.scrollWidth > f.clientWidth + 1)
      report.push(`${f.className}: ${Math.round(box.width)} px (scrolls to ${f.scrollWidth}) in ${Math.round(column.width)}`);
    const walker = document.createTreeWalker(f, NodeFilter.SHOW_TEXT);
    let smallest = Infinity, where = '';
    while (walker.nextNode()) {
      const e = walker.currentNode.parentElement;
      if (!walker.currentNode.textContent.trim() || e.closest('.katex')) continue;
      const r = e.getBoundingClientRect();
      if (r.width <= 1 || r.height <= 1 || !e.getClientRects().length) continue;  // hidden
      const size = parseFloat(getComputedStyle(e).fontSize);
      if (size < smallest) { smallest = size; where = walker.currentNode.textContent.trim().slice(0, 20); }
    }
    if (smallest < 9) report.push(`${f.className}: text of ${smallest} px ("${where}")`);
  }
  return report;
}"""


def check_explorer_desktop_layout(page) -> None:
    """At 1280 px the readout of a many-token grid sits beside it, not below."""
    beside = page.evaluate("""() => [...document.querySelectorAll('.attention-explorer.explorer-compact')]
        .filter(f => f.getClientRects().length)
        .map(f => f.querySelector('.explorer-readout').getBoundingClientRect().top
                  - f.querySelector('.explorer-grid').getBoundingClientRect().top)""")
    assert all(gap < 100 for gap in beside), f"the readout sits {beside} px below its grid's top"


def check_explorer_phone_layout(page) -> None:
    """At 390 px each explorer fits its column, its text at least 9 CSS px. Run where the
    page is already that wide (after tests/figure_rules.py), so it costs no new layout."""
    if page.viewport_size["width"] != 390:
        page.set_viewport_size({"width": 390, "height": 900})
    problems = page.evaluate(_LAYOUT)
    assert not problems, "\n".join(problems)


# The live explorer's numbers must be PyTorch's on the same weights file, both in float64 (the
# script from the float32 numbers, PyTorch on model.double()), within
# live_model.BROWSER_TOLERANCE (1e-9; the largest difference seen is about 1e-14). The numbers
# PyTorch printed at build, in float32 and to four decimals, may differ from the browser's by
# the rounding and this (float32 against float64: about 1e-6 seen).
FLOAT32_GAP = 1e-5

# What the page says a copy of tiny-gpt.js fails, each a (what, the line, the line planted):
# the scale left out, the mask flipped, and another layer-norm epsilon than the model's (the
# weights were trained with PyTorch's default, 1e-5; 1e-6 moved the trained model's
# probabilities by up to 2e-5 on the page's inputs).
LIVE_PLANTS = [
    ("the scale 1/sqrt(d_h) left out", "return s / Math.sqrt(headDim);", "return s;"),
    ("the mask flipped", "key > t ? -Infinity : s", "key < t ? -Infinity : s"),
    ("an epsilon of 1e-6", "Math.sqrt(variance + eps)", "Math.sqrt(variance + 1e-6)"),
]

# A copy of the script (its text), run in the page beside the real one: every head's weights
# and the probabilities of each sequence, as JSON.
_RUN_COPY = """async ([source, url, sequences]) => {
  const own = {};
  new Function('window', source)(own);
  const model = await own.tinyGPT.load(url);
  return JSON.stringify(sequences.map(tokens => {
    const run = own.tinyGPT.forward(model, tokens, []);
    return {weights: run.weights, probabilities: run.probabilities};
  }));
}"""

# The text of the last listing before a figure: what the page printed for it.
_PRINTED_BEFORE = """figure => {
  const before = [...document.querySelectorAll('pre')].filter(
    pre => figure.compareDocumentPosition(pre) & Node.DOCUMENT_POSITION_PRECEDING);
  return before[before.length - 1].textContent;
}"""

# What the live explorer computed (f.liveRun) and shows: the query's column, each head's cells
# and the probabilities' text.
_LIVE = """f => ({run: JSON.stringify(f.liveRun), text: f.querySelector('.live-input').value,
  query: [...f.querySelector('.live-table thead tr').cells].findIndex(c => c.classList.contains('live-query')) - 1,
  cells: [...f.querySelector('.live-table tbody').rows].map(r => [...r.cells].slice(1)
    .map(c => c.style.getPropertyValue('--w') || '0.00')),
  pressed: [...f.querySelectorAll('.live-head')].map(b => b.getAttribute('aria-pressed')),
  probabilities: [...f.querySelectorAll('.live-probabilities tbody tr')].map(r => [r.cells[0].textContent, r.cells[2].textContent]),
  status: f.querySelector('.live-status').textContent,
  error: f.querySelector('.live-error').hidden ? '' : f.querySelector('.live-error').textContent,
  maxLength: f.querySelector('.live-input').maxLength,
  check: f.querySelector('.live-check').textContent,
  focus: document.activeElement.classList[0]})"""


def _live(figure) -> dict:
    """What the live explorer computed and shows (its run comes as one JSON string: the
    browser driver checks a nested list number by number, 40 times slower)."""
    import json

    shown = figure.evaluate(_LIVE)
    shown["run"] = json.loads(shown["run"])
    return shown


def _live_gap(shown, expected) -> float:
    """The largest difference between the browser's weights and probabilities and PyTorch's."""
    import torch

    weights = torch.tensor(shown["run"]["weights"], dtype=torch.float64)  # (L, H, T, T)
    probabilities = torch.tensor(shown["run"]["probabilities"], dtype=torch.float64)  # (T, V)
    assert weights.shape == expected.weights.shape, (weights.shape, expected.weights.shape)
    return max((weights - expected.weights.double()).abs().max().item(),
               (probabilities - expected.probabilities.double()).abs().max().item())


def _check_live_shown(shown) -> None:
    """The cells are the computed weights of the query's row, to two decimals, and the bars the
    computed probabilities after the query, to four, at temperature 1."""
    q, run = shown["query"], shown["run"]
    heads = [w for layer in run["weights"] for w in layer]  # (L * H) of (T, T)
    expected = [[f"{round(row[q][k] * 100) / 100:.2f}" if k <= q else "0.00" for k in range(len(row))]
                for row in heads]
    assert shown["cells"] == expected, f"the cells are not the weights of query {q}"
    ranked = sorted(enumerate(run["probabilities"][q]), key=lambda kp: -kp[1])[:5]
    assert [float(v) for _, v in shown["probabilities"][:5]] == [round(p, 4) for _, p in ranked], (
        shown["probabilities"], ranked)


def _check_beside_pytorch(line: str, pytorch: list) -> None:
    """The explorer's line for an input run at build: PyTorch's likeliest next tokens, then the
    page's own probabilities of the same tokens, each to four decimals."""
    import re

    found = re.search(r"PyTorch at build: (.*)\. This page: (.*)\.$", line)
    assert found, line
    theirs, ours = ([part.rsplit(" ", 1) for part in group.split(", ")] for group in found.groups())
    assert [[s, float(v)] for s, v in theirs] == pytorch, (theirs, pytorch)
    assert [s for s, _ in ours] == [s for s, _ in theirs], line
    assert all(abs(float(a) - float(b)) <= FLOAT32_GAP + 1e-4 for (_, a), (_, b) in zip(ours, theirs)), line


def _check_plants_fail(page, url: str, examples: list, model64) -> None:
    """The page's sentence: a copy of tiny-gpt.js with one of LIVE_PLANTS differs from PyTorch
    by more than the tolerance on the inputs run at build, while an unchanged copy, run the
    same way, does not."""
    import json

    from llm_attention_site import live_model

    script = next(e for e in page.evaluate("() => performance.getEntriesByType('resource').map(e => e.name)")
                  if e.endswith("/tiny-gpt.js"))
    source = page.request.get(script).text()
    texts = [e["text"] for e in examples if not e["off"]]
    sequences = [live_model.encode(text) for text in texts]
    expected = [live_model.run(model64, tokens) for tokens in sequences]

    def gap(copy: str) -> float:
        runs = json.loads(page.evaluate(_RUN_COPY, [copy, url, sequences]))
        return max(_live_gap({"run": run}, want) for run, want in zip(runs, expected))

    unchanged = gap(source)
    assert unchanged <= live_model.BROWSER_TOLERANCE, f"an unchanged copy differs by {unchanged:.2e}"
    for what, line, planted in LIVE_PLANTS:
        assert source.count(line) == 1, f"tiny-gpt.js no longer holds {line!r} once: update LIVE_PLANTS"
        found = gap(source.replace(line, planted))
        assert found > live_model.BROWSER_TOLERANCE, (
            f"a copy with {what} differs from PyTorch by {found:.2e} only: the check would miss it")


def check_live_explorer(page, figure) -> None:
    """The live explorer loads the model only when asked (with the keyboard here); typed in, each
    input run at build gives every head's weights at every position and every probability that
    PyTorch computes from the same weights file, both in float64, within
    live_model.BROWSER_TOLERANCE, the heads of the ablated input switched off with the keyboard
    too; the figure shows what it computed; the page's printed PyTorch numbers are those of the
    file; the query, the temperature and the random sequence answer their controls; and a copy
    of the script with each of LIVE_PLANTS fails the comparison, as the page says."""
    import json
    import math
    from urllib.parse import urljoin

    from llm_attention_site import live_model

    data = json.loads(figure.get_attribute("data-live"))
    url = urljoin(page.url, data["file"])
    loaded = "() => performance.getEntriesByType('resource').map(e => e.name)"
    early = [u for u in page.evaluate(loaded) if u == url or u.endswith(("tiny-gpt.js", "live-explorer.js"))]
    assert not early, f"loaded before the reader asked: {early}"
    figure.locator(".live-open").focus()
    page.keyboard.press("Enter")
    figure.locator(".live-input").wait_for(timeout=10000)
    page.wait_for_function("f => f.liveRun", arg=figure.element_handle())
    model = live_model.model_from_weights(page.request.get(url).body())
    model64 = live_model.model_from_weights(page.request.get(url).body()).double()
    tolerance = live_model.BROWSER_TOLERANCE
    field = figure.locator(".live-input")
    focus = _live(figure)["focus"]
    assert focus == "live-input", f"the focus is on {focus!r}, not on the sequence, once open"
    gaps = {}
    typed = False
    for example in data["examples"]:
        if example["off"]:
            continue
        if typed:  # the others at once, as a paste does: one input event
            field.fill(example["text"])
        else:  # the first ends key by key, an input event and a run of the model each
            field.fill(example["text"][:-3])
            field.press_sequentially(example["text"][-3:])
            typed = True
        shown = _live(figure)
        assert shown["run"]["text"] == example["text"] and not shown["run"]["off"], shown["run"]["text"]
        gaps[example["name"]] = _live_gap(shown, live_model.run(model64, live_model.encode(example["text"])))
        assert gaps[example["name"]] <= tolerance, (
            f"{example['name']}: the browser differs from PyTorch by {gaps[example['name']]:.2e}, "
            f"more than {tolerance}")
        _check_live_shown(shown)
        _check_beside_pytorch(shown["check"], example["pytorch"])
    ablated = next(e for e in data["examples"] if e["off"])
    field.fill(ablated["text"])
    for layer, head in ablated["off"]:  # each head's button, with the keyboard
        button = figure.locator(f'.live-table tr[data-layer="{layer}"][data-head="{head}"] .live-head')
        button.focus()
        page.keyboard.press("Enter")
    shown = _live(figure)
    assert sorted(map(tuple, shown["run"]["off"])) == sorted(map(tuple, ablated["off"])), shown["run"]["off"]
    assert shown["pressed"].count("false") == len(ablated["off"]), shown["pressed"]  # pressed: at work
    off = [tuple(pair) for pair in ablated["off"]]
    gaps[ablated["name"]] = _live_gap(shown, live_model.run(model64, live_model.encode(ablated["text"]), off))
    _check_live_shown(shown)
    gap = gaps[ablated["name"]]
    assert gap <= tolerance, f"{ablated['name']}: the browser differs from PyTorch by {gap:.2e}"
    # The page's printed PyTorch numbers: the likeliest next tokens of every input.
    printed = [line.split()[1:] for line in figure.evaluate(_PRINTED_BEFORE).splitlines()
               if line.startswith("  next: ")]
    assert len(printed) == len(data["examples"]), printed
    for example, words in zip(data["examples"], printed):
        run = live_model.run(model, live_model.encode(example["text"]), [tuple(p) for p in example["off"]])
        for symbol, value in zip(words[::2], words[1::2]):
            here = run.probabilities[-1, live_model.SYMBOLS.index(symbol)].item()
            assert abs(here - float(value)) <= FLOAT32_GAP + 5e-5, (example["name"], symbol, value, here)
    # The query: the arrow keys on the grid.
    figure.locator(".live-table").focus()
    page.keyboard.press("ArrowLeft")
    shown = _live(figure)
    assert shown["query"] == len(ablated["text"]) - 2, shown["query"]
    _check_live_shown(shown)
    # The temperature: Warmer, then every shown probability is PyTorch's at that temperature.
    figure.locator(".live-next .explorer-next").click()
    warmer = data["temperatures"][data["temperatures"].index(1) + 1]
    logits = [math.log(max(p, 1e-300)) / warmer for p in shown["run"]["probabilities"][shown["query"]]]
    total = sum(math.exp(v - max(logits)) for v in logits)
    expected = sorted((math.exp(v - max(logits)) / total for v in logits), reverse=True)[:5]
    values = [float(v) for _, v in _live(figure)["probabilities"][:5]]
    assert all(abs(a - b) <= 1e-4 for a, b in zip(values, expected)), (warmer, values, expected)
    # A random sequence of the training task: 24 tokens, one segment of 8 twice, a query in it.
    figure.locator(".live-random").click()
    shown = _live(figure)
    twice = [c for c in set(shown["text"]) if shown["text"].count(c) == 2]
    assert len(shown["text"]) == len(shown["run"]["probabilities"]) == 24 and len(twice) == 8, shown["text"]
    assert "came before" in shown["status"], shown["status"]
    # A symbol the model does not know is refused, saying so under the field; the status goes
    # on describing the figure; the field takes no more symbols than the model's context.
    field.fill("AB8")
    refused = _live(figure)
    assert "is not one of the symbols" in refused["error"], refused["error"]
    assert refused["status"] == shown["status"], (refused["status"], shown["status"])
    assert refused["maxLength"] == len(shown["run"]["probabilities"]), refused["maxLength"]
    field.fill(data["examples"][0]["text"])
    _check_plants_fail(page, url, data["examples"], model64)


# Where the cache explorer's sums are compared with Python's, (tokens, batch): the slider's
# ends, lengths inside windows and chunks (100: under DeepSeek-V4's 128 and gpt-oss's; 1,000
# under Gemma 3's 1,024; 3,000 under Mistral's 4,096 and Llama 4's chunk of 8,192), lengths
# between the slider's stops and past a whole number of compressed windows, and batches.
CACHE_POINTS = [(100, 1), (1000, 3), (1024, 1), (3000, 1), (8192, 128), (123_457, 2),
                (2**20, 1), (2**20, 64), (2**20 + 77, 8)]

# What a copy of cache-explorer.js must be caught with, each a (what, the line, the line
# planted): the span left out, compressed entries not rounded down, the batch left out.
CACHE_PLANTS = [
    ("the span left out", "var held = t.span === null ? length : Math.min(length, t.span);",
     "var held = length;"),
    ("entries not rounded down", "t.per * Math.floor(held / t.every)", "t.per * held / t.every"),
    ("the batch left out", "termBytes(t, length) * batch", "termBytes(t, length)"),
]

# A copy of the script (its text), run in the page beside the real one: every model's bytes
# at every point, as JSON (one string: the driver checks nested objects value by value).
_CACHE_COPY = """([source, models, points]) => {
  const own = {};
  new Function('window', source)(own);
  return JSON.stringify(points.map(([length, batch]) => Object.fromEntries(
    models.map(m => [m.name, own.cacheExplorer.bytes(m, length, batch)]))));
}"""

# What the cache explorer shows: its setting, and each row's name, total, parts, note and bar.
_CACHE_SHOWN = """f => ({
  setting: f.querySelector('.cache-setting').textContent,
  hiddenShown: [...f.querySelectorAll('.cache-row')].filter(r => r.hidden && r.getClientRects().length).length,
  rows: [...f.querySelectorAll('.cache-row')].filter(r => r.getClientRects().length).map(r => ({
    name: r.dataset.model, total: r.querySelector('.cache-total').textContent,
    parts: Object.fromEntries([...r.querySelectorAll('.cache-part')].map(p => [p.dataset.kind, p.textContent])),
    note: r.querySelector('.cache-note').textContent,
    bar: [...r.querySelectorAll('.cache-bar > span')].reduce((w, s) => w + parseFloat(s.style.width), 0)}))})"""


def _expected_cache(names, length: int, batch: int) -> dict:
    """What the explorer must show for ``names`` at a setting, from Python."""
    from llm_attention_site import cache_explorer as ce

    rows = []
    for name in names:
        found = ce.cache_bytes(name, length, batch)
        context = ce.cost_models()[name]["context"]
        rows.append(dict(name=name, total=ce.human(sum(found.values())),
                         parts={k: f"{ce.KINDS[k]} {ce.human(v)}" for k, v in found.items() if v},
                         note=ce.past_context(context) if length > context else ""))
    return dict(setting=ce.setting(length, batch), rows=rows)


def _check_cache_shown(figure, names, length: int, batch: int) -> dict:
    """The rows shown are ``names`` at the setting, each written as Python writes it, each
    bar as long against the largest as its total."""
    from llm_attention_site import cache_explorer as ce

    shown = figure.evaluate(_CACHE_SHOWN)
    assert shown.pop("hiddenShown") == 0, "a row the script hides is still drawn"
    want = _expected_cache(names, length, batch)
    bars = {row["name"]: row.pop("bar") for row in shown["rows"]}
    assert {k: shown[k] for k in want} == want, (length, batch, shown, want)
    totals = {n: sum(ce.cache_bytes(n, length, batch).values()) for n in names}
    for name, width in bars.items():
        assert abs(width - 100 * totals[name] / max(totals.values())) < 0.01, (name, width)
    return shown


def check_cache_explorer(page, figure) -> None:
    """The script's sums are Python's (cache_explorer.cache_bytes) for every model at every
    point of CACHE_POINTS, to the byte; the rows show them as Python writes them, at first
    and once the switch, the sliders (keyboard, focus shown) and the buttons change the
    setting; a copy of the script with each of CACHE_PLANTS fails the comparison."""
    import json

    from llm_attention_site import cache_explorer as ce

    page.wait_for_function("f => f.cacheAt", arg=figure.element_handle(), timeout=10000)
    models = json.loads(figure.get_attribute("data-cache"))["models"]
    names = ce.ordered_models()
    assert [m["name"] for m in models] == names, [m["name"] for m in models]
    expected = [{n: ce.cache_bytes(n, t, b) for n in names} for t, b in CACHE_POINTS]
    sums = json.loads(figure.evaluate(
        "(f, points) => JSON.stringify(points.map(([t, b]) => f.cacheAt(t, b)))", CACHE_POINTS))
    for (length, batch), got, want in zip(CACHE_POINTS, sums, expected):
        assert got == want, f"{length} tokens, batch {batch}: the script {got}, Python {want}"
    _check_cache_shown(figure, ce.DEFAULT_MODELS, ce.LENGTHS[-1], 1)
    page.keyboard.press("Shift")  # keyboard use, as the focus styles see it
    every = figure.locator(".cache-controls .explorer-switches button").nth(1)
    every.focus()
    axe_checks._assert_focus_shown(page, "the models' switch")
    page.keyboard.press("Enter")
    assert every.get_attribute("aria-pressed") == "true", "Enter on the switch"
    _check_cache_shown(figure, names, ce.LENGTHS[-1], 1)
    length = figure.locator('.cache-length input[aria-label="Tokens held"]')
    batch = figure.locator('.cache-batch input[aria-label="Batch"]')
    length.focus()
    axe_checks._assert_focus_shown(page, "the length slider")
    for key, k in (("Home", 0), ("ArrowRight", 1), ("ArrowRight", 2)):
        page.keyboard.press(key)
        _check_cache_shown(figure, names, ce.LENGTHS[k], 1)
    batch.focus()
    page.keyboard.press("End")
    _check_cache_shown(figure, names, ce.LENGTHS[2], ce.BATCHES[-1])
    figure.locator(".cache-length .explorer-next").click()
    _check_cache_shown(figure, names, ce.LENGTHS[3], ce.BATCHES[-1])
    figure.locator(".cache-controls .explorer-switches button").nth(0).click()
    _check_cache_shown(figure, ce.DEFAULT_MODELS, ce.LENGTHS[3], ce.BATCHES[-1])
    script = next(e for e in page.evaluate("() => performance.getEntriesByType('resource').map(e => e.name)")
                  if e.endswith("/cache-explorer.js"))
    source = page.request.get(script).text()

    def sums_of(copy: str) -> list:
        return json.loads(page.evaluate(_CACHE_COPY, [copy, models, CACHE_POINTS]))

    assert sums_of(source) == expected, "an unchanged copy of the script differs from Python"
    for what, line, planted in CACHE_PLANTS:
        assert source.count(line) == 1, f"cache-explorer.js no longer holds {line!r} once"
        assert sums_of(source.replace(line, planted)) != expected, f"a copy with {what} passes"


# In the dark palette, the shade of a cell of weight 0.10 and of 0.24 in every grid that prints
# its digits, as CIELAB lightness over the page: a probe cell of each weight, measured, removed.
_DARK_SHADES = """() => {
  const parse = c => (c.match(/[\\d.]+/g) || []).map(Number).concat([1]).slice(0, 4);
  const lightness = rgb => {
    const y = rgb.map(v => v / 255).map(v => v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4)
      .reduce((sum, v, i) => sum + v * [0.2126, 0.7152, 0.0722][i], 0);
    return 116 * (y > 0.008856 ? Math.cbrt(y) : 7.787 * y + 16 / 116) - 16;
  };
  const body = document.body, before = body.getAttribute('data-md-color-scheme');
  body.setAttribute('data-md-color-scheme', 'slate');
  const page = parse(getComputedStyle(body).backgroundColor);
  const found = [];
  for (const table of document.querySelectorAll('.md-content .explorer .explorer-table')) {
    if (table.closest('.explorer-compact') || !table.getClientRects().length) continue;
    const row = table.tBodies[0].rows[0];
    const shade = w => {
      const probe = row.insertCell();
      probe.style.setProperty('--w', String(w));
      const c = parse(getComputedStyle(probe).backgroundColor);
      probe.remove();
      return lightness(c.slice(0, 3).map((v, i) => v * c[3] + page[i] * (1 - c[3])));
    };
    found.push([table.closest('.explorer').className, shade(0.24) - shade(0.10)]);
  }
  body.setAttribute('data-md-color-scheme', before);
  return found;
}"""


def check_dark_shades(page) -> None:
    """In the dark palette, weights of 0.10 and 0.24 in a grid with digits differ by at least
    6 units of CIELAB lightness (the light palette's blue: 8), so that small weights show."""
    flat = [f"{kind}: {step:.1f}" for kind, step in page.evaluate(_DARK_SHADES) if step < 6]
    assert not flat, f"dark palette, lightness from weight 0.10 to 0.24 (want >= 6): {flat}"


# Every readout whose chips name a key by its token and its position: the names, the legend
# under them, and the tokens of the grid's columns.
_KEY_NAMES = """() => [...document.querySelectorAll('.md-content .explorer-readout')]
  .filter(r => r.closest('.explorer-compact'))
  .map(r => ({keys: [...r.querySelectorAll('.explorer-key')].map(k => k.textContent),
              legend: (r.querySelector('.explorer-key-legend') || {}).textContent || '',
              tokens: [...r.closest('.explorer').querySelector('thead tr').cells].slice(1).map(c => c.textContent)}))"""


def check_key_names(page) -> None:
    """A many-token grid's chips name each key "token@position", never "position·token" (read
    as a decimal or a product), and say so once, under the chips."""
    import re

    for readout in page.evaluate(_KEY_NAMES):
        assert readout["legend"] == "Each key: its token @ its position.", readout["legend"]
        for key in readout["keys"]:
            found = re.fullmatch(r"(.+)@(\d+)", key)
            assert found and readout["tokens"][int(found.group(2))] == found.group(1), (key, readout["tokens"])


def check_explorer(page) -> None:
    """Every explorable figure of the page: each control driven, every number shown compared
    with the page's printed one; then the layout at a desktop's width (at a phone's:
    check_explorer_phone_layout)."""
    figures = page.locator(_TOP)
    assert figures.count() >= 1, "no explorable figure"
    kinds = {
        "heads-explorer": check_heads_explorer,
        "stepper": check_stepper,
        "decode-explorer": check_decode_explorer,
        "temperature-explorer": check_temperature_explorer,
        "attention-explorer": check_row_explorer,
        "live-explorer": check_live_explorer,
        "cache-explorer": check_cache_explorer,
    }
    for k in range(figures.count()):
        figure = figures.nth(k)
        figure.scroll_into_view_if_needed()
        classes = (figure.get_attribute("class") or "").split()
        kind = next(name for name in kinds if name in classes)
        try:
            kinds[kind](page, figure)
        except AssertionError as failure:
            raise AssertionError(f"{kind} {k}: {failure}") from None
    check_dark_shades(page)
    check_key_names(page)
    check_explorer_desktop_layout(page)


def check_weights_figures(page, path: str) -> None:
    """Heatmaps of weights use the 0..1 scale; every full-size link serves an SVG."""
    figures = page.evaluate("""() => [
      ...[...document.querySelectorAll('img.figure')].map(e => ({
          text: e.alt, scale: e.dataset.scale || null,
          href: e.closest('a') ? e.closest('a').href : null})),
      ...[...document.querySelectorAll('.attention-explorer')].map(e => ({
          text: e.textContent, scale: e.dataset.scale || null, href: null}))]""")
    for figure in figures:
        text = figure["text"].lower()
        # Every heatmap records its colour scale (line plots have none). Weights after
        # dropout are scaled by 1 / (1 - p) and may exceed 1, so they are not on 0..1.
        if figure["scale"] is not None and "weight" in text and "dropout" not in text:
            assert figure["scale"] == "0..1", figure["text"]
        if figure["href"] is not None:
            response = page.request.get(figure["href"])
            assert response.ok and response.headers["content-type"] == "image/svg+xml", figure["href"]
            assert response.body().lstrip().startswith((b"<?xml", b"<svg")), figure["href"]
    assert any(f["scale"] == "0..1" for f in figures) or path in NO_WEIGHTS_HEATMAP, "no 0..1 heatmap"


def check_lazy_figures(page, sizes_by_type: dict) -> None:
    """The page's HTML and the figures of its first screen stay within 500 kB: the figures load
    lazily, in the light palette only, and none is inlined."""
    documents_and_images = {url: size for url, (size, kind) in sizes_by_type.items() if kind in ("navigation", "img")}
    assert 0 < sum(documents_and_images.values()) <= 500_000, documents_and_images
    assert not page.evaluate("document.documentElement.outerHTML.includes('data:image/svg')"), "an inline SVG"
    loaded = [url for url in documents_and_images if "/assets/figures/" in url]
    assert len(loaded) < page.locator("img.figure").count(), "every figure loaded at once"


def check_phone_width(page) -> None:
    """At a phone's width (390 px) the page does not scroll sideways."""
    page.set_viewport_size({"width": 390, "height": 900})
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"{width} px wide at 390"


def check_site_map(page) -> None:
    """The home page's map: its table links every page of prose in the navigation (read
    from mkdocs.yml, as the page reads it), in the navigation's order, and every link
    opens a page; its flowchart names every section."""
    from llm_attention_site.site_map import page_url, sections

    found = sections()
    wanted = [page_url(path) for _, pages in found for _, path in pages]
    shown = page.evaluate("""() => {
      const heading = document.getElementById('the-map');
      const table = heading && [...document.querySelectorAll('.md-content table')].find(
        t => heading.compareDocumentPosition(t) & Node.DOCUMENT_POSITION_FOLLOWING);
      const chart = heading && [...document.querySelectorAll('.md-content .diagram img')].find(
        i => heading.compareDocumentPosition(i) & Node.DOCUMENT_POSITION_FOLLOWING);
      return {links: table ? [...table.querySelectorAll('tbody tr td:first-child a')].map(a => a.href) : [],
              chart: chart ? chart.alt : ''};
    }""")
    base = page.url.split("#")[0]
    assert [link.removeprefix(base) for link in shown["links"]] == wanted, (shown["links"], wanted)
    for link in shown["links"]:
        response = page.request.get(link)
        assert response.ok and "text/html" in response.headers["content-type"], link
    missing = [title for title, _ in found if title not in shown["chart"]]
    assert not missing, f"the map's chart does not name {missing}"
