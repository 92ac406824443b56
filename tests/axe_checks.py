"""Accessibility checks of a built page, run inside its one browser visit (tests/test_site_browser.py).

``check_wcag`` runs axe-core (vendored in tests/vendor/axe-core, never served) with the WCAG 2.0,
2.1 and 2.2 A and AA rules, in both palettes, switching between them with the keyboard; it checks
the code listings' token colours itself (see _PLAIN_CODE) and leaves the listings as plain text,
so it runs after the checks that read the page. ``check_keyboard`` works the page's content tabs
and downloads with the keyboard alone and checks that each shows where the focus is. Each raises
AssertionError naming the rule and the elements at fault.
"""

from __future__ import annotations

import pathlib

AXE = pathlib.Path(__file__).resolve().parent / "vendor" / "axe-core" / "axe.min.js"
WCAG_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22a", "wcag22aa"]

# The theme fades colours when the palette changes; axe must read the end state, not the fade.
_NO_FADES = "*, *::before, *::after { transition: none !important; animation: none !important; }"

# Code listings hold most of a page's elements: one span per highlighted token, thousands on a
# long page, in a handful of colours. axe-core's time grows with the elements, and ran to more than
# half the browser test. So _CODE_CONTRAST checks each distinct (token colour, background) pair
# with the WCAG formula, in each palette; then _PLAIN_CODE turns each listing into plain text (its
# base colour, its size and its scrolling unchanged) and axe-core checks the page as a whole.
_PLAIN_CODE = """() => {
    for (const code of document.querySelectorAll('pre > code, .highlight-ipynb pre'))
        if (code.children.length) code.textContent = code.textContent;
}"""

_RUN_AXE = """async ([tags, coloursOnly]) => {
    const runOnly = coloursOnly ? {type: 'rule', values: ['color-contrast']} : {type: 'tag', values: tags};
    const result = await axe.run(document, {runOnly, resultTypes: ['violations']});
    return result.violations.map(v => ({
        rule: v.id, count: v.nodes.length,
        elements: v.nodes.slice(0, 3).map(n => n.target.join(' ') + ': ' + (n.failureSummary || '').split('\\n')[1]),
    }));
}"""

# What the focused element (or, for a hidden radio button, the label that stands for it) shows.
_FOCUS_SHOWN = """() => {
    let shown = document.activeElement;
    if (shown && shown.matches('input') && shown.getBoundingClientRect().width === 0) {
        const label = document.querySelector(`label[for="${shown.id}"]:not([hidden])`) || shown.nextElementSibling;
        shown = label && (label.closest('.tabbed-labels') || label);  // a tab: its bar of labels
    }
    if (!shown) return null;
    const style = getComputedStyle(shown);
    return {
        outline: style.outlineStyle !== 'none' && parseFloat(style.outlineWidth) >= 1,
        shadow: style.boxShadow !== 'none',
        what: shown.tagName + '.' + String(shown.className).split(' ')[0],
    };
}"""


_CODE_CONTRAST = """() => {
    const parse = c => (c.match(/[\\d.]+/g) || []).map(Number).concat([1]).slice(0, 4);
    const over = (top, below) => top.slice(0, 3).map((v, i) => v * top[3] + below[i] * (1 - top[3])).concat([1]);
    const background = element => {  // the colour behind an element: its backgrounds, composited
        const layers = [];
        for (let e = element; e; e = e.parentElement) {
            const colour = parse(getComputedStyle(e).backgroundColor);
            if (colour[3] > 0) layers.push(colour);
            if (colour[3] === 1) break;
        }
        return layers.reverse().reduce((below, top) => over(top, below), [255, 255, 255, 1]);
    };
    const luminance = rgb => rgb.slice(0, 3).map(v => v / 255)
        .map(v => v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4)
        .reduce((sum, v, i) => sum + v * [0.2126, 0.7152, 0.0722][i], 0);
    const seen = new Set(), low = [];
    for (const span of document.querySelectorAll('pre > code span[class], .highlight-ipynb span[class]')) {
        if (!span.textContent.trim() || !span.getClientRects().length) continue;
        const colour = getComputedStyle(span).color, behind = background(span);
        const key = span.className + colour + behind;
        if (seen.has(key)) continue;
        seen.add(key);
        const [a, b] = [luminance(over(parse(colour), behind)), luminance(behind)];
        const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
        if (ratio < 4.5) low.push(`code token .${span.className} ${colour} on rgb(${behind.slice(0, 3).map(Math.round)}): ${ratio.toFixed(2)}:1`);
    }
    return {pairs: seen.size, low};
}"""


def _violations(page, palette: str, colours_only: bool = False) -> list[str]:
    """axe-core's violations: all WCAG A/AA rules, or only the contrast, which a palette changes."""
    return [
        f"{palette} palette, {v['rule']} on {v['count']} element(s), e.g. " + "; ".join(v["elements"])
        for v in page.evaluate(_RUN_AXE, [WCAG_TAGS, colours_only])
    ]


def _code_token_contrast(page, palette: str) -> list[str]:
    return [f"{palette} palette, {low} (WCAG AA asks 4.5:1)" for low in page.evaluate(_CODE_CONTRAST)["low"]]


def _scheme(page) -> str:
    return page.evaluate("document.body.getAttribute('data-md-color-scheme')")


def _assert_focus_shown(page, what: str) -> None:
    shown = page.evaluate(_FOCUS_SHOWN)
    assert shown and (shown["outline"] or shown["shadow"]), f"{what}: the focus is not shown ({shown})"


def switch_palette_with_keyboard(page) -> None:
    """Tab from the top of the page to the palette switch, check it shows the focus, press Enter."""
    page.locator(".md-header a.md-logo").focus()  # Tab goes on from the element before the switch
    before = _scheme(page)
    for _ in range(6):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.name === '__palette'"):
            break
    else:
        raise AssertionError("the palette switch cannot be reached with the Tab key")
    _assert_focus_shown(page, "palette switch")
    page.keyboard.press("Enter")
    page.wait_for_function("s => document.body.getAttribute('data-md-color-scheme') !== s", arg=before)


PALETTES = {"default": "light", "slate": "dark"}


def check_wcag(page) -> None:
    """No WCAG 2 A/AA violation in either palette, each reached with the keyboard's Enter on the
    palette switch: the code's token colours in both, then axe-core on the page with its listings
    as plain text, the contrast in the second palette and every rule in the first."""
    page.add_script_tag(content=AXE.read_text(encoding="utf8"))
    page.add_style_tag(content=_NO_FADES)
    first = _scheme(page)
    found = _code_token_contrast(page, PALETTES[first])
    switch_palette_with_keyboard(page)
    second = _scheme(page)
    assert {first, second} == set(PALETTES), f"Enter on the palette switch went from {first} to {second}"
    found += _code_token_contrast(page, PALETTES[second])
    page.evaluate(_PLAIN_CODE)
    found += _violations(page, PALETTES[second], colours_only=True)
    switch_palette_with_keyboard(page)
    assert _scheme(page) == first, "Enter on the palette switch did not switch back"
    found += _violations(page, PALETTES[first])
    assert not found, "\n".join(found)


def check_keyboard(page) -> None:
    """The page's first set of content tabs: the focused tab is shown and the arrow key opens
    the next one. Its first download button: the focus is shown and Enter starts the download.
    (Every set of tabs and every button is the same markup: one of each shows that it works.)"""
    page.keyboard.press("Shift")  # what follows is keyboard use, as the browser's focus styles see it
    for number, tabs in enumerate(page.locator(".tabbed-set").all()[:1]):
        inputs = tabs.locator(":scope > input")
        if inputs.count() < 2:
            continue
        inputs.nth(0).focus()
        _assert_focus_shown(page, f"tab set {number}")
        page.keyboard.press("ArrowRight")
        assert inputs.nth(1).evaluate("i => i.checked"), f"tab set {number}: ArrowRight did not open the next tab"
        shown = tabs.locator(".tabbed-content > .tabbed-block").nth(1)
        assert shown.is_visible(), f"tab set {number}: the second tab's content is not shown"
    for link in page.locator("a.md-button[download]").all()[:1]:
        wanted = link.get_attribute("download") or link.get_attribute("href").rsplit("/", 1)[-1]
        link.focus()
        _assert_focus_shown(page, f"download {wanted}")
        with page.expect_download(timeout=10000) as download:
            page.keyboard.press("Enter")
        saved = download.value.suggested_filename
        assert saved == wanted, f"Enter on the download of {wanted} saved {saved}"
