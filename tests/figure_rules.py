"""The rules every page keeps at every width the site supports, measured in the browser.

Figures: at each width of WIDTHS the smallest text of every figure shown, as rendered (the
size it was drawn with times the scale the page shows it at), superscripts, subscripts and
legends included, is at least MIN_TEXT_PX; no figure or explorer is wider than the column it
sits in; every image has a variant for each palette (a figure pair), and no heatmap's dark
variant (a figure whose cells are drawn as an image) holds a light block, such as white cells
for low weights. A page whose figure needs a narrow variant shows that variant at the narrow
widths, and that is the one measured.

The widths: a figure is shown at its drawn size or shrunk to its column, and the column a
figure is shown in is narrowest, for each layout, at the smallest width that shows it: 360 px
for a figure shown at every width and for the phone variants (the narrowest phones in use;
390 px is a common one), 960 px for the wide variants (figures.wide_and_narrow, and the
flowcharts' wide variants: the stylesheet shows them from 960 px up, where the column is 686
px; 688 px at 1280). A figure of a row is never narrower than the column at 360 px (the
stylesheet's flex basis). So measuring at 360 and 960, and at 390 and 1280 as a reader's
phone and desktop, holds the rule at every width from 360 px up.

Code listings, at 1280 px: each holds 88 columns (what tests/test_included_listings.py allows
a line) at LISTING_MIN_PX or more, in the column and inside an admonition or a fold alike.

Tables and headings, at 390 px: a table fits its column or scrolls inside its own frame, with
no identifier (a ``code`` name) broken across lines; a heading's hidden permalink sits on the
heading's last line of text instead of a line of its own; a notebook's code and output boxes
sit inside the column, and each line an output prints is one line on the screen.
"""

from __future__ import annotations

MIN_TEXT_PX = 9
LISTING_MIN_PX = 11
LISTING_COLUMNS = 88
PHONE = {"width": 390, "height": 900}
# Widths the text rule is measured at, in the order the visit goes through them (it comes
# in at 1280 and ends on the phone's width, where the next checks want it).
WIDTHS = (1280, 960, 360, 390)
# The share of a dark variant's area that may be light (relative luminance above
# LIGHT_LUMINANCE over the dark page): room for light text, never a light block.
LIGHT_LUMINANCE = 0.7
MAX_LIGHT_SHARE = 0.02

# Each figure shown: the sizes of its SVG's texts (read once per file, from the file: each
# text and tspan's own font size, so a superscript counts at its size) scaled by the size the
# page shows it at. matplotlib writes a text's size in its style and moves it only with
# translate() and rotate(), so size times (width shown / viewBox width) is its size on screen;
# a figure whose text is drawn as outlines (the flowcharts) names its smallest size instead.
_MEASURE = """async () => {
  const shown = e => e.getClientRects().length > 0 && getComputedStyle(e).visibility !== 'hidden';
  const column = document.querySelector('.md-content__inner');
  const columnBox = column.getBoundingClientRect();
  const report = {small: [], wide: [], unpaired: [], smallest: {}};
  const cache = window.__figureTexts || (window.__figureTexts = new Map());
  const texts = async src => {
    if (!cache.has(src)) {
      const source = await (await fetch(src)).text();
      const svg = new DOMParser().parseFromString(source, 'image/svg+xml').documentElement;
      const vb = svg.viewBox.baseVal;
      const found = [];
      const walker = document.createTreeWalker(svg, NodeFilter.SHOW_TEXT);
      while (walker.nextNode()) {
        const words = walker.currentNode.textContent.trim();
        if (!words || !walker.currentNode.parentElement.closest('text')) continue;  // not metadata
        let e = walker.currentNode.parentElement, size = null;
        for (; e && e !== svg && size === null; e = e.parentElement) {
          const style = e.getAttribute('style') || '';
          const m = /font(?:-size)?:\\s*([\\d.]+)px/.exec(style) || /^([\\d.]+)/.exec(e.getAttribute('font-size') || '');
          if (m) size = parseFloat(m[1]);
          if (/scale|matrix/.test(e.getAttribute('transform') || '')) size = NaN;
        }
        found.push([size, words.slice(0, 30)]);
      }
      cache.set(src, {width: vb && vb.width ? vb.width : parseFloat(svg.getAttribute('width')), found,
                      raster: source.includes('<image')});
    }
    return cache.get(src);
  };
  for (const img of [...column.querySelectorAll('img.figure')].filter(shown)) {
    const box = img.getBoundingClientRect();
    const name = (img.alt || img.src).slice(0, 70);
    if (box.right > columnBox.right + 1 || box.left < columnBox.left - 1)
      report.wide.push(`${name}: ${Math.round(box.width)} px`);
    if (!img.closest('.figure-pair') || !img.closest('.figure-pair').querySelector('.figure-dark img'))
      report.unpaired.push(name);
    const {width, found} = await texts(img.getAttribute('src'));
    const scale = box.width / width;
    let smallest = img.dataset.textPt ? parseFloat(img.dataset.textPt) * scale : Infinity, where = '';
    if (!found.length && !img.dataset.textPt) report.small.push(`${name}: no text to measure`);
    for (const [size, words] of found) {
      if (!(size > 0)) { report.small.push(`${name}: "${words}" has no size to measure`); continue; }
      if (size * scale < smallest) { smallest = size * scale; where = words; }
    }
    if (smallest < MIN) report.small.push(`${name}: ${smallest.toFixed(1)} px ("${where}")`);
    const kind = img.closest('.jupyter-wrapper') ? 'notebook output' : img.dataset.scale ? 'heatmap'
      : img.dataset.textPt ? 'flowchart' : img.closest('.figure-narrow, .figure-wide') ? 'two-layout plot' : 'plot';
    report.smallest[kind] = Math.min(report.smallest[kind] ?? Infinity, smallest);
  }
  for (const e of column.querySelectorAll('.attention-explorer, .explorer')) {
    if (!shown(e)) continue;
    const box = e.getBoundingClientRect();
    if (box.right > columnBox.right + 1 || e.scrollWidth > e.clientWidth + 1)
      report.wide.push(`explorer: ${Math.round(Math.max(box.width, e.scrollWidth))} px`);
  }
  for (const img of column.querySelectorAll('img:not(.figure)'))
    if (shown(img)) report.unpaired.push((img.alt || img.src).slice(0, 70));
  return report;
}""".replace("MIN", str(MIN_TEXT_PX))

# The dark variant of every heatmap (a figure whose SVG holds cells drawn as an image),
# drawn off screen over the dark page's background: the share of its area that is light.
# Figures are SVG files of this site (same origin), so a canvas may read them back.
_DARK_LIGHT_SHARE = """async ([threshold]) => {
  const seen = new Set(), shares = [];
  const linear = v => (v /= 255) <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
  const cache = window.__figureTexts || new Map();
  for (const pair of document.querySelectorAll('.md-content .figure-pair')) {
    const lit = pair.querySelector('.figure-light img'), img = pair.querySelector('.figure-dark img');
    if (!lit || !img) continue;
    const known = cache.get(lit.getAttribute('src'));
    const cells = known ? known.raster : (await (await fetch(lit.getAttribute('src'))).text()).includes('<image');
    const src = img.getAttribute('src');
    if (!cells || seen.has(src)) continue;
    seen.add(src);
    const picture = new Image();
    picture.src = URL.createObjectURL(await (await fetch(src)).blob());
    await picture.decode();
    const scale = Math.min(1, 240 / picture.naturalWidth);  // enough pixels to see a block
    const canvas = document.createElement('canvas');
    canvas.width = Math.max(1, Math.round(picture.naturalWidth * scale));
    canvas.height = Math.max(1, Math.round(picture.naturalHeight * scale));
    const context = canvas.getContext('2d');
    context.fillStyle = 'rgb(30, 33, 41)';  // the dark palette's page
    context.fillRect(0, 0, canvas.width, canvas.height);
    context.drawImage(picture, 0, 0, canvas.width, canvas.height);
    URL.revokeObjectURL(picture.src);
    const data = context.getImageData(0, 0, canvas.width, canvas.height).data;
    let light = 0;
    for (let i = 0; i < data.length; i += 4) {
      const y = 0.2126 * linear(data[i]) + 0.7152 * linear(data[i + 1]) + 0.0722 * linear(data[i + 2]);
      if (y > threshold) light++;
    }
    shares.push({name: (img.alt || src).slice(0, 70), share: light / (data.length / 4)});
  }
  return shares;
}"""

# At a phone's width: tables wider than their frame that do not scroll, identifiers broken
# across lines, and headings whose permalink sits below their text.
_TABLES_AND_HEADINGS = """() => {
  const column = document.querySelector('.md-content__inner');
  const columnBox = column.getBoundingClientRect();
  const problems = [];
  const name = e => e.textContent.trim().replace(/\\s+/g, ' ').slice(0, 40);
  for (const table of column.querySelectorAll('table')) {
    if (!table.getClientRects().length || table.closest('.explorer, .jupyter-wrapper')) continue;
    // The frame that scrolls: the table itself or the theme's wrapper around it.
    let frame = table;
    for (let e = table; e && e !== column; e = e.parentElement)
      if (['auto', 'scroll'].includes(getComputedStyle(e).overflowX)) { frame = e; break; }
    const frameBox = frame.getBoundingClientRect();
    if (frameBox.right > columnBox.right + 1)
      problems.push(`table "${name(table.rows[0])}": ${Math.round(frameBox.width)} px in a column of ${Math.round(columnBox.width)}`);
    const scrolls = ['auto', 'scroll'].includes(getComputedStyle(frame).overflowX);
    if (table.scrollWidth > frame.clientWidth + 1 && !scrolls)
      problems.push(`table "${name(table.rows[0])}": ${table.scrollWidth} px cut off at ${frame.clientWidth}`);
    for (const cell of table.querySelectorAll('th, td'))
      if (cell.getBoundingClientRect().right < frameBox.left || cell.getBoundingClientRect().width < 1) continue;
      else if (cell.scrollWidth > cell.clientWidth + 1 && getComputedStyle(cell).overflowX !== 'visible')
        problems.push(`table cell "${name(cell)}": its text is cut off`);
    for (const code of table.querySelectorAll('code')) {
      const words = code.textContent.trim();
      if (!words || /\\s/.test(words) || code.closest('pre')) continue;
      const lines = new Set([...code.getClientRects()].map(r => Math.round(r.top)));
      if (lines.size > 1) problems.push(`identifier ${words} broken across ${lines.size} lines`);
    }
  }
  // A notebook's code and printed outputs: each box inside the column, and each printed line
  // on one line of the screen (a wide one scrolls in its box), never broken in a number.
  for (const box of column.querySelectorAll('.jupyter-wrapper :is(.jp-InputArea-editor, .jp-OutputArea-output)')) {
    const edge = box.getBoundingClientRect().right;
    if (edge > columnBox.right + 0.5)
      problems.push(`notebook box "${name(box)}": its right edge ${Math.round(edge - columnBox.right)} px past the column`);
  }
  for (const pre of column.querySelectorAll('.jupyter-wrapper .jp-RenderedText pre')) {
    const printed = pre.textContent.replace(/\\n$/, '').split('\\n').length;
    const range = document.createRange();
    range.selectNodeContents(pre);
    const shown = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top))).size;
    if (shown > printed) problems.push(`notebook output "${name(pre)}": ${printed} lines shown on ${shown}`);
  }
  for (const link of column.querySelectorAll(':is(h1, h2, h3, h4, h5, h6) > a.headerlink')) {
    const heading = link.parentElement;
    if (!heading.getClientRects().length) continue;
    const range = document.createRange();
    range.setStartBefore(heading.firstChild);
    range.setEndBefore(link);
    const lines = [...range.getClientRects()].filter(r => r.width > 0);
    if (!lines.length) continue;
    const last = lines.reduce((a, b) => (b.bottom > a.bottom ? b : a));
    const box = link.getBoundingClientRect();
    if (box.top >= last.bottom - 1)
      problems.push(`heading "${name(heading)}": its permalink wraps onto a line of its own (${Math.round(heading.getBoundingClientRect().height)} px tall)`);
  }
  return problems;
}"""


# Each listing shown: its text size, and whether LISTING_COLUMNS characters fit its box
# (measured on a canvas in the listing's font: no change to the page, no layout).
_LISTINGS = """([columns, smallest]) => {
  const problems = [], context = document.createElement('canvas').getContext('2d');
  for (const code of document.querySelectorAll('.md-content pre > code')) {
    if (!code.getClientRects().length || code.closest('.jupyter-wrapper')) continue;
    const style = getComputedStyle(code), size = parseFloat(style.fontSize);
    context.font = `${style.fontSize} ${style.fontFamily}`;
    const needed = context.measureText('x'.repeat(columns)).width;
    const room = code.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    const where = code.textContent.trim().split('\\n')[0].slice(0, 40);
    if (size < smallest) problems.push(`listing "${where}": ${size.toFixed(1)} px`);
    if (needed > room + 0.5) problems.push(`listing "${where}": ${columns} columns need ${Math.round(needed)} px of ${Math.round(room)}`);
  }
  return [...new Set(problems)];
}"""


def measure(page, widths=WIDTHS) -> dict:
    """The text rule at each width: ``{width: report}``, where a report lists the figures
    with text too small (``small``), too wide (``wide``), without a dark variant
    (``unpaired``), and the smallest text measured per kind of figure (``smallest``)."""
    reports = {}
    for width in widths:
        page.set_viewport_size({"width": width, "height": PHONE["height"]})
        reports[width] = page.evaluate(_MEASURE)
    return reports


def dark_light_shares(page) -> list[dict]:
    """Each figure's dark variant: the share of its area that is light."""
    return page.evaluate(_DARK_LIGHT_SHARE, [LIGHT_LUMINANCE])


def check_figure_rules(page) -> None:
    """At 1280 px, listings that hold 88 columns at LISTING_MIN_PX or more; at every width
    from 360 px up (WIDTHS): figure text >= MIN_TEXT_PX CSS px, nothing wider than the
    column, a dark variant for every figure; no light block in a dark variant; at 390 px,
    tables that fit or scroll without breaking an identifier and headings whose permalink
    stays on their last line. Ends at 390 px wide."""
    problems = []
    page.set_viewport_size({"width": 1280, "height": PHONE["height"]})
    problems += [f"at 1280 px, {p}" for p in page.evaluate(_LISTINGS, [LISTING_COLUMNS, LISTING_MIN_PX])]
    # A page without figures needs only the phone's width (images without a dark variant);
    # one without wide variants has no figure that shows narrower at 960 px than at 360.
    has = page.evaluate("""() => ({figures: !!document.querySelector(
        '.md-content :is(img.figure, .explorer, .attention-explorer)'),
        wide: !!document.querySelector('.md-content :is(.figure-wide, .diagram-wide)')})""")
    widths = [w for w in WIDTHS if has["figures"] and (w != 960 or has["wide"])]
    for width, report in measure(page, widths or (PHONE["width"],)).items():
        problems += [f"at {width} px, text under {MIN_TEXT_PX} px: {s}" for s in report["small"]]
        problems += [f"at {width} px, wider than the column: {s}" for s in report["wide"]]
        if width == PHONE["width"]:
            problems += [f"no dark variant: {s}" for s in report["unpaired"]]
    problems += [
        f"a light block in the dark palette: {s['name']}: {s['share']:.0%} of it light"
        for s in dark_light_shares(page) if s["share"] > MAX_LIGHT_SHARE
    ]
    problems += [f"at {PHONE['width']} px, {p}" for p in page.evaluate(_TABLES_AND_HEADINGS)]
    assert not problems, "\n".join(problems)
