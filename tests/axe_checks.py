"""Accessibility checks of a built page, run inside its one browser visit (tests/test_site_browser.py).

``check_wcag`` checks the contrast of every text on the page in both palettes, switching between
them with the keyboard, once per distinct style (see _TEXT_CONTRAST), then runs axe-core (vendored
in tests/vendor/axe-core, never served) with every other WCAG 2.0, 2.1 and 2.2 A and AA rule; it
leaves the listings as plain text, so it runs after the checks that read the page. ``check_keyboard`` works the page's content tabs
and downloads with the keyboard alone and checks that each shows where the focus is;
``check_phone_tab_order`` walks the Tab order of a phone's page from its skip link to its
content, and opens and closes the navigation drawer with the keyboard. Each raises
AssertionError naming the rule and the elements at fault.
"""

from __future__ import annotations

import pathlib

AXE = pathlib.Path(__file__).resolve().parent / "vendor" / "axe-core" / "axe.min.js"
WCAG_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22a", "wcag22aa"]

# The theme fades colours when the palette changes; axe must read the end state, not the fade.
_NO_FADES = "*, *::before, *::after { transition: none !important; animation: none !important; }"

# A page holds thousands of text elements (a span per highlighted token, per KaTeX symbol, per
# explorer cell) in a few dozen styles. axe-core's contrast rule weighs each element on its own,
# and took about half of every axe run. So _TEXT_CONTRAST computes WCAG's contrast ratio once per
# distinct (colour, backgrounds behind, opacity, size, weight) in each palette, and axe-core runs
# every other rule. Text over a gradient is weighed against each of its colours; text over an
# image fails the check, so no text goes unchecked. Controls that are disabled are left out, as WCAG 1.4.3 does.
_TEXT_CONTRAST = """() => {
    const parse = c => (c.match(/[\\d.]+/g) || []).map(Number).concat([1]).slice(0, 4);
    const over = (top, below) => top.slice(0, 3).map((v, i) => v * top[3] + below[i] * (1 - top[3])).concat([1]);
    const mix = (a, b, share) => a.slice(0, 3).map((v, i) => v * share + b[i] * (1 - share)).concat([1]);
    // An element's own layer: its background, its opacity, and any gradient's colours; null
    // for a background image. A layer that changes nothing (transparent, opaque, no gradient)
    // is left out of the chains below, so that most texts share a few chains.
    const layer = style => {
        const image = style.backgroundImage;
        if (image.includes('url(')) return null;
        // A scroll shadow (extra.css: covers in the background's colour, attached to the
        // content) shows only at an edge with more content beyond it: text is weighed
        // against the background. Any other gradient: against each of its colours too.
        const stops = image === 'none' || style.backgroundAttachment.includes('local') ? []
            : (image.match(/rgba?\\([^)]*\\)/g) || []).map(parse);
        const own = {background: parse(style.backgroundColor), opacity: parseFloat(style.opacity), stops};
        return own.background[3] === 0 && own.opacity === 1 && !stops.length ? undefined : own;
    };
    // The layers from the root down to an element (null: an image behind it), and a name that
    // two elements share when their layers are the same; computed once per element.
    const chains = new Map(), names = new Map();
    const chain = element => {
        if (!element) return {layers: [], name: 0};
        if (chains.has(element)) return chains.get(element);
        const above = chain(element.parentElement), own = above && layer(getComputedStyle(element));
        let found = null;
        if (above && own !== null) {
            if (own === undefined) found = above;
            else {
                const key = above.name + ' ' + JSON.stringify(own);
                if (!names.has(key)) names.set(key, names.size + 1);
                found = {layers: [...above.layers, own], name: names.get(key)};
            }
        }
        chains.set(element, found);
        return found;
    };
    // The colours of a text pixel and of the background beside it: each layer's background
    // drawn over what is below it, each group faded by its opacity (exact for normal blending).
    // One pair for the plain backgrounds, and one more for each colour of a gradient.
    const pixels = (layers, text) => {
        const render = (i, below, withText, stop) => {
            if (i === layers.length) return withText ? over(text, below) : below;
            const {background, opacity} = layers[i];
            let here = over(background, below);
            if (stop && stop[0] === i) here = over(stop[1], here);
            return mix(render(i + 1, here, withText, stop), below, opacity);
        };
        const white = [255, 255, 255, 1];
        const stops = [null, ...layers.flatMap((own, i) => own.stops.map(colour => [i, colour]))];
        return stops.map(stop => [render(0, white, true, stop), render(0, white, false, stop)]);
    };
    const luminance = rgb => rgb.slice(0, 3).map(v => v / 255)
        .map(v => v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4)
        .reduce((sum, v, i) => sum + v * [0.2126, 0.7152, 0.0722][i], 0);
    // Drawn where a reader can see it: not faded out, not clipped away, not moved off the page.
    const shown = element => {
        let opacity = 1, box = element.getBoundingClientRect();
        for (let e = element; e; e = e.parentElement) {
            const style = getComputedStyle(e);
            opacity *= parseFloat(style.opacity);
            if (style.clipPath !== 'none' || (style.clip !== 'auto' && style.position === 'absolute')) {
                const clipped = e.getBoundingClientRect();
                if (clipped.width <= 1 || clipped.height <= 1) return false;  // a screen reader's text
            }
            // Cut off for good by a box that hides its overflow (one that scrolls does not; the
            // page's own scrolling is the root's).
            const cuts = axis => ['hidden', 'clip'].includes(style['overflow' + axis]);
            if (e !== element && e !== document.documentElement && e !== document.body
                    && (cuts('X') || cuts('Y'))) {
                const edge = e.getBoundingClientRect();
                const [left, right] = cuts('X') ? [Math.max(box.left, edge.left), Math.min(box.right, edge.right)] : [box.left, box.right];
                const [top, bottom] = cuts('Y') ? [Math.max(box.top, edge.top), Math.min(box.bottom, edge.bottom)] : [box.top, box.bottom];
                if (right - left < 1 || bottom - top < 1) return false;
                box = new DOMRect(left, top, right - left, bottom - top);
            }
        }
        return opacity > 0.05 && box.right + scrollX > 0 && box.bottom + scrollY > 0;
    };
    const hasText = e => {
        for (const node of e.childNodes) if (node.nodeType === 3 && node.data.trim()) return true;
        return false;
    };
    const name = e => e.tagName.toLowerCase() + (typeof e.className === 'string' && e.className.trim()
        ? '.' + e.className.trim().split(/\\s+/).join('.') : '');
    const passed = new Set(), low = [], unknown = [];
    let texts = 0;
    for (const element of document.body.querySelectorAll('*')) {
        if (!hasText(element) || !element.getClientRects().length) continue;
        // Never drawn, or an inactive control
        if (element.closest('script, style, noscript, template, .katex-mathml, :disabled, [aria-disabled="true"]')) continue;
        const style = getComputedStyle(element);
        if (style.visibility !== 'visible') continue;
        texts += 1;
        const layers = chain(element);
        if (layers === null) { if (shown(element)) unknown.push(name(element)); continue; }
        const size = parseFloat(style.fontSize), bold = parseInt(style.fontWeight) >= 700;
        const key = [layers.name, style.color, size, bold].join('|');  // the same text on the same layers
        if (passed.has(key)) continue;
        const contrast = ([text, backdrop]) => {
            const [a, b] = [luminance(text), luminance(backdrop)];
            return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
        };
        const found = pixels(layers.layers, parse(style.color));
        const ratios = found.map(contrast), ratio = Math.min(...ratios);
        const [text, backdrop] = found[ratios.indexOf(ratio)];  // the worst of them
        const large = size >= 24 || (bold && size >= 18.66);  // 18 pt, or 14 pt bold
        const asked = large ? 3 : 4.5;
        if (ratio >= asked) { passed.add(key); continue; }
        if (!shown(element)) continue;  // hidden: the next element of this style is weighed again
        low.push(`${name(element)} "${element.textContent.trim().slice(0, 30)}": ${style.color} drawn as rgb(${text.slice(0, 3).map(Math.round)}) on rgb(${backdrop.slice(0, 3).map(Math.round)}), ${ratio.toFixed(2)}:1 (WCAG AA asks ${asked}:1)`);
    }
    return {texts, styles: passed.size, low: [...new Set(low)], unknown: [...new Set(unknown)]};
}"""

# Listings as plain text (their base colour, size and scrolling unchanged) once their token
# colours are checked: fewer elements for axe-core's other rules to walk.
_PLAIN_CODE = """() => {
    for (const code of document.querySelectorAll('pre > code, .highlight-ipynb pre'))
        if (code.children.length) code.textContent = code.textContent;
}"""

_RUN_AXE = """async (tags) => {
    const rules = {'color-contrast': {enabled: false}};  // _TEXT_CONTRAST's, in both palettes
    const result = await axe.run(document, {runOnly: {type: 'tag', values: tags}, rules, resultTypes: ['violations']});
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


def _violations(page, palette: str) -> list[str]:
    """axe-core's violations of every WCAG A/AA rule but the contrast, on the whole page."""
    return [
        f"{palette} palette, {v['rule']} on {v['count']} element(s), e.g. " + "; ".join(v["elements"])
        for v in page.evaluate(_RUN_AXE, WCAG_TAGS)
    ]


def _text_contrast(page, palette: str) -> list[str]:
    """Every text's contrast against what lies behind it, once per distinct style."""
    found = page.evaluate(_TEXT_CONTRAST)
    assert found["texts"] > 0, "no text found to check"
    return [f"{palette} palette, {low}" for low in found["low"]] + [
        f"{palette} palette, text over a background image or gradient, which the contrast "
        f"check cannot compose: {where}" for where in found["unknown"]]


def _scheme(page) -> str:
    return page.evaluate("document.body.getAttribute('data-md-color-scheme')")


def _assert_shown(shown, what: str) -> None:
    assert shown and (shown["outline"] or shown["shadow"]), f"{what}: the focus is not shown ({shown})"


def _assert_focus_shown(page, what: str) -> None:
    _assert_shown(page.evaluate(_FOCUS_SHOWN), what)


# Where Tab has moved the focus: whether it is the palette switch, and what it shows (one
# round trip per key press).
_ON_SWITCH = f"""() => ({{palette: document.activeElement.name === '__palette', shown: ({_FOCUS_SHOWN})()}})"""


def switch_palette_with_keyboard(page) -> None:
    """Tab from the top of the page to the palette switch, check it shows the focus, press Enter."""
    before = page.evaluate("""() => {
        document.querySelector('.md-header a.md-logo').focus();  // Tab goes on from here
        return document.body.getAttribute('data-md-color-scheme');
    }""")
    for _ in range(6):
        page.keyboard.press("Tab")
        where = page.evaluate(_ON_SWITCH)
        if where["palette"]:
            break
    else:
        raise AssertionError("the palette switch cannot be reached with the Tab key")
    _assert_shown(where["shown"], "palette switch")
    page.keyboard.press("Enter")
    page.wait_for_function("s => document.body.getAttribute('data-md-color-scheme') !== s", arg=before)


PALETTES = {"default": "light", "slate": "dark"}


def check_wcag(page) -> None:
    """No WCAG 2 A/AA violation in either palette, each reached with the keyboard's Enter on the
    palette switch: every text's contrast in both (once per distinct style), then every other
    axe-core rule, with the listings as plain text."""
    page.add_script_tag(content=AXE.read_text(encoding="utf8"))
    page.add_style_tag(content=_NO_FADES)
    first = _scheme(page)
    found = _text_contrast(page, PALETTES[first])
    switch_palette_with_keyboard(page)
    second = _scheme(page)
    assert {first, second} == set(PALETTES), f"Enter on the palette switch went from {first} to {second}"
    found += _text_contrast(page, PALETTES[second])
    switch_palette_with_keyboard(page)
    assert _scheme(page) == first, "Enter on the palette switch did not switch back"
    page.evaluate(_PLAIN_CODE)
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


# Where Tab has moved the focus: the part of the page, and what the drawer is doing.
_TAB_STOP = """() => {
    const e = document.activeElement, drawer = document.querySelector('.md-sidebar--primary');
    return {
        where: e.closest('.md-content') ? 'content' : drawer.contains(e) ? 'navigation drawer'
            : e.closest('.md-search__scrollwrap') ? 'search results box' : 'header',
        name: e.getAttribute('aria-label') || e.textContent.trim().slice(0, 40) || String(e.className),
        menu: e.matches('.md-header label[for="__drawer"]'),
        open: document.getElementById('__drawer').checked,
        inert: drawer.inert,
    };
}"""
HEADER_STOPS = 6  # skip link, menu, palette, search: the most Tab stops before the content


def check_phone_tab_order(page) -> None:
    """At 390 px, Tab from "Skip to content" reaches the content after the header's few
    controls, none in the closed navigation drawer (about ninety links outside the screen) or
    in the search's closed results box; the header's menu button takes a stop and opens the
    drawer with Enter, the focus on a link in it; Escape closes it, the focus back on the
    button. Leaves the drawer closed."""
    if page.viewport_size["width"] != 390:
        page.set_viewport_size({"width": 390, "height": 900})
    page.keyboard.press("Shift")  # keyboard use, as the browser's focus styles see it
    page.evaluate("() => document.querySelector('.md-skip').focus()")
    stops = []
    for _ in range(HEADER_STOPS + 1):
        page.keyboard.press("Tab")
        stops.append(page.evaluate(_TAB_STOP))
        if stops[-1]["where"] == "content":
            break
    path = " > ".join(f"{s['where']}: {s['name']!r}" for s in stops)
    assert stops[-1]["where"] == "content", f"Tab has not reached the content after {len(stops)} stops: {path}"
    assert all(s["where"] in ("header", "content") for s in stops), f"Tab stops out of sight: {path}"
    assert any(s["menu"] for s in stops), f"the menu button takes no Tab stop: {path}"
    page.locator('.md-header label[for="__drawer"]').focus()
    _assert_focus_shown(page, "menu button")
    page.keyboard.press("Enter")
    opened = page.evaluate(_TAB_STOP)
    assert opened["open"] and not opened["inert"] and opened["where"] == "navigation drawer", (
        f"Enter on the menu button: {opened}")
    page.keyboard.press("Escape")
    closed = page.evaluate(_TAB_STOP)
    assert not closed["open"] and closed["inert"] and closed["menu"], f"Escape in the drawer: {closed}"
