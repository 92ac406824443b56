"""Build hook: typeset every formula at build time with the vendored KaTeX, run under Node.

A page then arrives with its math drawn: no raw TeX while a script loads, and no KaTeX script to
download (only its stylesheet and fonts). Formulas of the chapters come from the arithmatex
extension (``\\(...\\)`` in a ``span.arithmatex``, ``\\[...\\]`` in a ``div.arithmatex``); those of a
notebook's text cells are ``$...$`` and ``$$...$$`` in its rendered Markdown and its contents. A formula KaTeX
cannot parse fails the build, naming the page and the formula.

Node runs ``hooks/katex_render.js`` once per build and answers one formula per line.
"""

from __future__ import annotations

import html
import json
import pathlib
import re
import shutil
import subprocess

SCRIPT = pathlib.Path(__file__).resolve().parent / "katex_render.js"

_ARITHMATEX = re.compile(
    r'<(?P<tag>span|div) class="arithmatex">\s*(?:\\\((?P<inline>.*?)\\\)|\\\[(?P<display>.*?)\\\])\s*</(?P=tag)>',
    re.DOTALL,
)
# Notebook text cells: markup that must stay as it is, then display and inline math.
_NOTEBOOK_SKIP = re.compile(r"<(pre|code|script|style|textarea)\b.*?</\1>", re.DOTALL | re.IGNORECASE)
_NOTEBOOK_MATH = re.compile(r"\$\$(?P<display>.+?)\$\$|(?<![\\$\w])\$(?P<inline>[^$\n<>]+?)\$(?![\w$])", re.DOTALL)
_RENDERED_MARKDOWN = re.compile(r'(<div class="jp-RenderedHTMLCommon jp-RenderedMarkdown[^"]*"[^>]*>)(.*?)(</div>)', re.DOTALL)
_TOC_ENTRY = re.compile(r'(<span class="md-ellipsis">)(.*?)(</span>)', re.DOTALL)  # a heading in the contents

_node: dict = {"process": None}


def _typeset(tex: str, display: bool, where: str) -> str:
    process = _node["process"]
    if process is None or process.poll() is not None:
        node = shutil.which("node")
        if node is None:
            raise RuntimeError("the build typesets math with Node (https://nodejs.org): no `node` on PATH")
        process = _node["process"] = subprocess.Popen(
            [node, str(SCRIPT)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, encoding="utf8"
        )
    process.stdin.write(json.dumps([tex, display]) + "\n")
    process.stdin.flush()
    answer = json.loads(process.stdout.readline())
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


def on_shutdown() -> None:
    process = _node["process"]
    if process is not None and process.poll() is None:
        process.stdin.close()
        process.wait(timeout=10)
