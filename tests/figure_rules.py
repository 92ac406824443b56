"""The rules every figure of every page keeps, measured in the browser at a phone's width.

At 390 px: the smallest text of each figure shown, as rendered (the size it was drawn with
times the scale the page shows it at), is at least MIN_TEXT_PX; no figure or explorer is
wider than the column it sits in; every image has a variant for each palette (a figure pair),
or is a notebook output drawn on its own white card. A page whose figure needs a narrow
variant shows that variant at this width, and that is the one measured.
"""

from __future__ import annotations

MIN_TEXT_PX = 9
PHONE = {"width": 390, "height": 900}

# Each figure shown: draw its SVG at the size the page shows it, off screen, and read the
# size of every text as rendered (font size times the scale from the SVG's units to CSS px).
_MEASURE = """async () => {
  const shown = e => e.getClientRects().length > 0 && getComputedStyle(e).visibility !== 'hidden';
  const column = document.querySelector('.md-content__inner');
  const columnRight = column.getBoundingClientRect().right;
  const report = {small: [], wide: [], unpaired: []};
  const figures = [...column.querySelectorAll('img.figure')].filter(shown);
  const host = document.createElement('div');
  host.style.cssText = 'position:absolute;left:-20000px;top:0';
  document.body.appendChild(host);
  for (const img of figures) {
    const box = img.getBoundingClientRect();
    const name = (img.alt || img.src).slice(0, 70);
    if (box.right > columnRight + 1 || box.left < column.getBoundingClientRect().left - 1)
      report.wide.push(`${name}: ${Math.round(box.width)} px`);
    if (!img.closest('.figure-pair') || !img.closest('.figure-pair').querySelector('.figure-dark img'))
      report.unpaired.push(name);
    const text = await (await fetch(img.getAttribute('src'))).text();
    const svg = new DOMParser().parseFromString(text, 'image/svg+xml').documentElement;
    svg.setAttribute('width', box.width);
    svg.setAttribute('height', box.height);
    host.replaceChildren(document.importNode(svg, true));
    const vb = svg.viewBox.baseVal;
    // Text drawn as outlines (the flowcharts): the figure names its smallest size.
    let smallest = img.dataset.textPt ? parseFloat(img.dataset.textPt) * box.width / vb.width : Infinity;
    const texts = host.querySelectorAll('text');
    if (!texts.length && !img.dataset.textPt) report.small.push(`${name}: no text to measure`);
    for (const t of texts) {
      if (!t.textContent.trim()) continue;
      const m = t.getScreenCTM();
      const px = parseFloat(getComputedStyle(t).fontSize) * Math.hypot(m.a, m.b);
      smallest = Math.min(smallest, px);
    }
    if (smallest < MIN) report.small.push(`${name}: ${smallest.toFixed(1)} px`);
  }
  host.remove();
  for (const e of column.querySelectorAll('.attention-explorer, .explorer')) {
    if (!shown(e)) continue;
    const box = e.getBoundingClientRect();
    if (box.right > columnRight + 1 || e.scrollWidth > e.clientWidth + 1)
      report.wide.push(`explorer: ${Math.round(Math.max(box.width, e.scrollWidth))} px`);
  }
  for (const img of column.querySelectorAll('img:not(.figure)')) {
    if (!shown(img) || img.closest('.jupyter-wrapper')) continue;  // notebook outputs: a white card
    report.unpaired.push((img.alt || img.src).slice(0, 70));
  }
  return report;
}""".replace("MIN", str(MIN_TEXT_PX))


def check_figure_rules(page) -> None:
    """At 390 px: figure text >= MIN_TEXT_PX CSS px, nothing wider than the column, a dark
    variant for every figure."""
    page.set_viewport_size(PHONE)
    report = page.evaluate(_MEASURE)
    problems = [f"text under {MIN_TEXT_PX} px: {s}" for s in report["small"]]
    problems += [f"wider than the column: {s}" for s in report["wide"]]
    problems += [f"no dark variant: {s}" for s in report["unpaired"]]
    assert not problems, "\n".join(problems)
