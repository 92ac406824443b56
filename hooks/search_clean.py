"""Build hook: keep the search index to words a reader types.

The theme's index holds each section's HTML text as the page source has it: raw TeX (the math is
typeset in the browser-facing HTML only, by hooks/typeset_math.py) and the pilcrow of each
heading's permalink. This hook rewrites ``search_index.json`` after the build: formulas become
their plain symbols (``\\(d_k\\)`` -> ``d_k``), pilcrows go, and so do code listings and
printed outputs: they were half its bytes. Paragraph and list tags go too (a result shows
words, not layout). The index loads when a reader first searches (overrides/main.html). The notebook
pages stay out: each repeats its chapter; so do the API pages of the site's own code (both are
marked before the theme reads them, so it never parses them). Diagrams are
images drawn at build (llm_attention_site.diagrams): their source never reaches the page.
"""

from __future__ import annotations

import json
import pathlib
import re

_LISTING = re.compile(r"<pre\b.*?</pre>", re.DOTALL)
_CODE = re.compile(r"<(pre|code)\b.*?</\1>", re.DOTALL)
_MATH = re.compile(r"\\\((?P<a>.+?)\\\)|\\\[(?P<b>.+?)\\\]|\$\$(?P<c>.+?)\$\$|(?<![\\$\w])\$(?P<d>[^$\n<>]+?)\$(?![\w$])", re.DOTALL)
_COMMAND = re.compile(r"\\(?:[a-zA-Z]+|.)")
_NOTEBOOK_PAGE = re.compile(r"notebooks/[^/#]+/")  # a notebook's page, not the list of them
_BLOCK_TAG = re.compile(r"</?(?:p|ul|ol|li|sup)\b[^>]*>")  # layout only: results show text
_SITE_CODE = pathlib.Path(__file__).resolve().parents[1] / "src" / "llm_attention_site"


def plain_math(tex: str) -> str:
    """A formula as plain symbols: commands and TeX punctuation dropped, names kept."""
    tex = tex.replace("\\_", "_").replace("\\{", " ").replace("\\}", " ")
    tex = _COMMAND.sub(" ", tex)
    tex = re.sub(r"[{}^&]", " ", tex)
    return " ".join(tex.split())


def clean_text(text: str) -> str:
    text = text.replace("¶", "")
    pieces, last = [], 0
    for code in _CODE.finditer(text):  # code keeps its dollars and backslashes
        pieces += [_MATH.sub(lambda m: plain_math(next(g for g in m.groups() if g is not None)), text[last : code.start()]), code.group(0)]
        last = code.end()
    pieces.append(_MATH.sub(lambda m: plain_math(next(g for g in m.groups() if g is not None)), text[last:]))
    return "".join(pieces)


def left_out(url: str) -> bool:
    """Whether a page stays out of the index. A notebook page repeats its chapter's prose and
    code: a search lands on the chapter. The API pages of the site's own code help
    contributors, who read the files: a reader's search should land on the chapters and the
    modules offered to copy."""
    own = tuple(f"reference/{p.stem}/" for p in _SITE_CODE.glob("*.py") if p.stem != "__init__")
    return bool(_NOTEBOOK_PAGE.match(url)) or url.startswith(own)


def on_page_content(html: str, page, config, files) -> None:
    # Marked before the theme's search plugin reads the page (its on_page_context): the
    # notebook pages alone are 5 MB of HTML that it would parse only for this hook to drop.
    if left_out(page.url):
        page.meta["search"] = {**(page.meta.get("search") or {}), "exclude": True}


def on_post_build(config) -> None:
    index = pathlib.Path(config.site_dir) / "search" / "search_index.json"
    if not index.is_file():
        return
    data = json.loads(index.read_text(encoding="utf8"))
    for doc in data["docs"]:
        doc["title"] = clean_text(doc["title"]).strip()
        text = doc["text"]
        # Code listings and printed outputs go (half the index's bytes, and every page would
        # match every identifier); prose, inline code and headings stay searchable. Block
        # tags go too: a result shows its words, not its paragraphs.
        text = _BLOCK_TAG.sub(" ", _LISTING.sub(" ", clean_text(text)))
        doc["text"] = " ".join(text.split())
    # Characters as UTF-8, not as \u escapes: a minus sign costs three bytes, not six.
    index.write_text(json.dumps(data, separators=(",", ":"), ensure_ascii=False), encoding="utf8")
