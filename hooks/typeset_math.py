"""Build hook: typeset every formula at build time with the vendored KaTeX, run in an embedded V8.

A page then arrives with its math drawn: no raw TeX while a script loads, and no KaTeX script to
download (only its stylesheet and fonts). Formulas of the chapters come from the arithmatex
extension (``\\(...\\)`` in a ``span.arithmatex``, ``\\[...\\]`` in a ``div.arithmatex``); those of a
notebook's text cells are ``$...$`` and ``$$...$$`` in its rendered Markdown and its contents. A formula KaTeX
cannot parse fails the build, naming the page and the formula.

KaTeX runs in the V8 engine that the ``mini-racer`` package embeds (installed by pip with the rest
of the site's requirements): no Node.js, no other program is started. The engine loads
``katex.min.js`` once per build (about 0.1 s) and typesets each formula in a few milliseconds.
"""

from __future__ import annotations

import atexit
import html
import json
import pathlib
import re

from py_mini_racer import MiniRacer

KATEX = pathlib.Path(__file__).resolve().parents[1] / "docs" / "assets" / "vendor" / "katex" / "katex.min.js"
# A KaTeX error names the formula; a JavaScript exception would carry the whole script with it.
_RENDER = """
function typeset(tex, displayMode) {
  try {
    return {html: katex.renderToString(tex, {displayMode: displayMode, throwOnError: true})};
  } catch (error) {
    return {error: String(error.message || error)};
  }
}
"""

_ARITHMATEX = re.compile(
    r'<(?P<tag>span|div) class="arithmatex">\s*(?:\\\((?P<inline>.*?)\\\)|\\\[(?P<display>.*?)\\\])\s*</(?P=tag)>',
    re.DOTALL,
)
# Notebook text cells: markup that must stay as it is, then display and inline math.
_NOTEBOOK_SKIP = re.compile(r"<(pre|code|script|style|textarea)\b.*?</\1>", re.DOTALL | re.IGNORECASE)
_NOTEBOOK_MATH = re.compile(r"\$\$(?P<display>.+?)\$\$|(?<![\\$\w])\$(?P<inline>[^$\n<>]+?)\$(?![\w$])", re.DOTALL)
_RENDERED_MARKDOWN = re.compile(r'(<div class="jp-RenderedHTMLCommon jp-RenderedMarkdown[^"]*"[^>]*>)(.*?)(</div>)', re.DOTALL)
_TOC_ENTRY = re.compile(r'(<span class="md-ellipsis">)(.*?)(</span>)', re.DOTALL)  # a heading in the contents

_engine: dict = {"v8": None}


def _typeset(tex: str, display: bool, where: str) -> str:
    if _engine["v8"] is None:
        v8 = MiniRacer()
        v8.eval(KATEX.read_text(encoding="utf8"))
        v8.eval(_RENDER)
        _engine["v8"] = v8
    answer = _engine["v8"].call("typeset", tex, display)
    if "error" in answer:
        raise ValueError(f"{where}: KaTeX cannot typeset {tex!r}: {answer['error']}")
    return answer["html"]


def typeset_arithmatex(output: str, where: str) -> str:
    def replace(match):
        display = match["display"] is not None
        tex = html.unescape(match["display"] if display else match["inline"])
        return f'<{match["tag"]} class="arithmatex">{_typeset(tex, display, where)}</{match["tag"]}>'

    return _ARITHMATEX.sub(replace, output)


def typeset_dollars(text: str, where: str) -> str:
    """``$...$`` and ``$$...$$`` in HTML text, outside code, scripts and styles."""

    def in_text(segment: str) -> str:
        def replace(match):
            display = match["display"] is not None
            tex = html.unescape(match["display"] if display else match["inline"])
            return _typeset(tex.strip(), display, where)

        return _NOTEBOOK_MATH.sub(replace, segment)

    pieces, last = [], 0
    for skip in _NOTEBOOK_SKIP.finditer(text):
        pieces += [in_text(text[last : skip.start()]), skip.group(0)]
        last = skip.end()
    pieces.append(in_text(text[last:]))
    return "".join(pieces)


_TOC_PARENS = re.compile(r"\\\((?P<inline>.+?)\\\)", re.DOTALL)  # a heading's math, as the contents show it


def on_post_page(output: str, page, config) -> str:
    where = page.file.src_uri
    output = typeset_arithmatex(output, where)
    output = _TOC_ENTRY.sub(
        lambda m: m.group(1)
        + _TOC_PARENS.sub(lambda f: _typeset(html.unescape(f["inline"]), False, where), m.group(2))
        + m.group(3),
        output,
    )
    if getattr(page, "nb_url", None):
        for part in (_RENDERED_MARKDOWN, _TOC_ENTRY):
            output = part.sub(lambda m: m.group(1) + typeset_dollars(m.group(2), where) + m.group(3), output)
    return output


def close() -> None:
    """Shut the engine down; the next formula starts a new one."""
    v8, _engine["v8"] = _engine["v8"], None
    if v8 is not None:
        v8.close()


atexit.register(close)  # an engine left open can hang the interpreter's exit


def on_shutdown() -> None:
    close()
