"""Build hook: keep the search index to words a reader types.

The theme's index holds each section's HTML text as the page source has it: raw TeX (the math is
typeset in the browser-facing HTML only, by hooks/typeset_math.py) and the pilcrow of each
heading's permalink. This hook rewrites ``search_index.json`` after the build: formulas become
text a reader can read in a result's preview (``\\(s_{ik}\\)`` -> ``sᵢₖ``, ``\\(\\sqrt{d_k}\\)`` ->
``√dₖ``: ``readable_math``), pilcrows go, and so do code listings and
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
_NOTEBOOK_PAGE = re.compile(r"notebooks/[^/#]+/")  # a notebook's page, not the list of them
_BLOCK_TAG = re.compile(r"</?(?:p|ul|ol|li|sup)\b[^>]*>")  # layout only: results show text
_SITE_CODE = pathlib.Path(__file__).resolve().parents[1] / "src" / "llm_attention_site"

# How readable_math writes TeX: a command as its symbol (_SYMBOLS) or its name (\\exp -> exp);
# spacing as a space, sizes (\\left, \\big) as nothing, a font or text command as its
# argument; a subscript or superscript in Unicode's small characters where it has one for each
# character (_SUB, _SUP), else after _ or ^.
_SYMBOLS = {
    "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ε", "varepsilon": "ε",
    "zeta": "ζ", "eta": "η", "theta": "θ", "kappa": "κ", "lambda": "λ", "mu": "μ", "nu": "ν",
    "xi": "ξ", "pi": "π", "rho": "ρ", "sigma": "σ", "tau": "τ", "phi": "φ", "varphi": "φ",
    "chi": "χ", "psi": "ψ", "omega": "ω", "Gamma": "Γ", "Delta": "Δ", "Theta": "Θ",
    "Lambda": "Λ", "Pi": "Π", "Sigma": "Σ", "Phi": "Φ", "Psi": "Ψ", "Omega": "Ω",
    "sum": "Σ", "prod": "Π", "top": "ᵀ", "cdot": "·", "times": "×", "odot": "⊙",
    "otimes": "⊗", "pm": "±", "le": "≤", "leq": "≤", "ge": "≥", "geq": "≥", "ne": "≠",
    "neq": "≠", "approx": "≈", "sim": "~", "to": "→", "rightarrow": "→", "leftarrow": "←",
    "in": "∈", "infty": "∞", "ell": "ℓ", "dots": "…", "ldots": "…", "cdots": "⋯",
    "lVert": "‖", "rVert": "‖", "Vert": "‖", "|": "‖", "mid": "|", "lfloor": "⌊",
    "rfloor": "⌋", "lceil": "⌈", "rceil": "⌉", "langle": "⟨", "rangle": "⟩",
    "{": "{", "}": "}", "_": "_", "%": "%", "#": "#", "&": "&",
}
_SPACES = {",", ";", ":", " ", "quad", "qquad", "!"}
_SIZES = {"left", "right", "big", "Big", "bigg", "Bigg", "bigl", "bigr", "Bigl", "Bigr",
          "displaystyle", "textstyle"}
_WORD = {"text", "mathrm", "operatorname", "mathbf", "mathit", "boldsymbol", "mathcal",
         "mathbb", "textbf", "texttt", "textit", "mathsf", "mathtt"}
_SUB = dict(zip("0123456789+-=()aehijklmnoprstuvx",
                "₀₁₂₃₄₅₆₇₈₉₊₋₌₍₎ₐₑₕᵢⱼₖₗₘₙₒₚᵣₛₜᵤᵥₓ"))
_SUP = dict(zip("0123456789+-=()niTᵀ", "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾ⁿⁱᵀᵀ"))
_TOKEN = re.compile(r"\\(?:[a-zA-Z]+|.)|&[a-z]+;|&#\d+;|[{}_^]|\s+|[^\\{}_^\s]")


def _parse(tokens: list[str], i: int = 0) -> tuple[list, int]:
    """The tokens from ``i`` up to the closing brace as atoms (a group is a list), and the
    index after that brace."""
    atoms = []
    while i < len(tokens):
        t = tokens[i]
        if t == "{":
            group, i = _parse(tokens, i + 1)
            atoms.append(group)
        elif t == "}":
            return atoms, i + 1
        else:
            atoms.append(t)
            i += 1
    return atoms, i


def _script(text: str, table: dict, mark: str) -> str:
    """A subscript or superscript: in small characters, else after ``_`` or ``^``."""
    if text and all(c in table for c in text):
        return "".join(table[c] for c in text)
    return mark + (text if re.fullmatch(r"[A-Za-z0-9]+|\(.*\)", text) else f"({text})")


def _render(atoms: list) -> str:
    out, i, environment = [], 0, ""

    def arg():
        nonlocal i
        while i < len(atoms) and isinstance(atoms[i], str) and atoms[i].isspace():
            i += 1
        if i >= len(atoms):
            return ""
        a = atoms[i]
        i += 1
        return _render(a) if isinstance(a, list) else _render([a])

    while i < len(atoms):
        a = atoms[i]
        i += 1
        if isinstance(a, list):
            out.append(_render(a))
        elif a.isspace():
            out.append(" ")
        elif a in ("&", "&amp;"):  # an alignment point; in cases, before the condition
            out.append(" if " if environment == "cases" else " ")
        elif a in ("_", "^"):
            out.append(_script(arg().strip(), _SUB if a == "_" else _SUP, a))
        elif a.startswith("\\"):
            name = a[1:]
            if name == "frac":
                top, bottom = arg(), arg()
                wrap = lambda s: s if " " not in s else f"({s})"
                out.append(f"{wrap(top)}/{wrap(bottom)}")
            elif name == "sqrt":
                inner = arg()
                out.append("√" + (inner if re.fullmatch(r"\w+", inner) else f"({inner})"))
            elif name in _WORD:
                out.append(arg())
            elif name in _SPACES:
                out.append(" ")
            elif name in _SIZES:
                pass
            elif name in ("begin", "end"):
                kind = arg()  # the environment's name: not shown
                environment = kind if name == "begin" else ""
                out.append(" ")
            elif name == "\\":
                out.append("; ")  # a new line of cases or aligned equations
            else:
                out.append(_SYMBOLS.get(name, name))
                following = atoms[i] if i < len(atoms) else ""
                if name not in _SYMBOLS and (isinstance(following, list) or following[:1].isalnum()
                                             or following.startswith("\\")
                                             and following[1:] not in _SIZES):
                    out.append(" ")  # a function's name: \cos\theta reads "cos θ"
        else:
            out.append(a)
    return "".join(out)


def readable_math(tex: str) -> str:
    """A formula as text a reader can read in a search result: Greek letters and operators as
    their symbols, subscripts and superscripts as Unicode ones where every character has one
    (``s_{ik}`` -> ``sᵢₖ``, ``K^\\top`` -> ``Kᵀ``), else marked ``_`` and ``^`` with their group
    in parentheses; ``\\frac{a}{b}`` -> ``a/b``, ``\\sqrt{d_k}`` -> ``√dₖ``; sizes and spacing
    dropped, names kept."""
    atoms, _ = _parse(_TOKEN.findall(tex))
    return " ".join(_render(atoms).split()).replace(" ;", ";")


def clean_text(text: str) -> str:
    text = text.replace("¶", "")
    pieces, last = [], 0
    for code in _CODE.finditer(text):  # code keeps its dollars and backslashes
        pieces += [_MATH.sub(lambda m: readable_math(next(g for g in m.groups() if g is not None)), text[last : code.start()]), code.group(0)]
        last = code.end()
    pieces.append(_MATH.sub(lambda m: readable_math(next(g for g in m.groups() if g is not None)), text[last:]))
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
