# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""What a copier takes: each module of ``llm_attention`` with the modules it builds on.

A module imports its siblings relatively (``from .checks import check_size``), so a
module works wherever the modules it needs sit beside it in one package, whatever that
package is called. ``copy_set(name)`` follows those imports from the source, and
``copy_set_zip(name)`` packs the set, byte for byte, with a small ``__init__.py`` and
the licence: unzipped into a folder of a project, it is a package under the folder's
name.

The build publishes each set as ``code/llm_attention/<module>.zip``
(``hooks/site.py``), and the API reference pages describe it (``copy_set_markdown``,
used by the Markdown extension ``llm_attention_site.copy_sets``).
"""

from __future__ import annotations

import ast
import functools
import io
import pathlib
import re
import textwrap
import zipfile

from markdown import Extension
from markdown.preprocessors import Preprocessor

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "llm_attention"
LICENSE = PACKAGE.parents[1] / "LICENSE"
NOTICE = (
    "# SPDX-License-Identifier: MIT\n# Copyright (c) 2026 The llm-attention authors\n"
)
# The order of the chapters, in which the API reference lists the modules.
READING_ORDER = (
    "toy.py", "simple.py", "checks.py", "self_attention.py", "causal.py",
    "multihead_wrapper.py", "multihead.py", "kv_cache.py", "gpt.py", "generate.py",
    "induction.py", "grouped_query.py", "rope.py", "sliding_window.py", "modern.py",
    "rope_scaling.py", "attention_variants.py", "hf_config.py", "chunked.py",
    "kv_sharing.py", "latent.py", "lightning_indexer.py", "sparse_latent.py",
    "block_sparse.py", "compressor.py", "compressed_attention.py",
    "delta_rule.py", "delta_cache.py", "linear_attention.py", "ssd.py", "mamba2.py",
    "hf_layers.py",
    "ring_attention.py",
)
# A fixed date for every entry, so the same files always give the same bytes.
_ZIP_DATE = (2026, 1, 1, 0, 0, 0)


def copyable_modules() -> list[str]:
    """Every module of the package a copier may take, by file name."""
    return sorted(p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py")


def sibling_imports(name: str) -> list[str]:
    """The package's modules that ``name`` imports directly (relative imports only)."""
    return list(_relative_imports((PACKAGE / name).read_text(encoding="utf8")))


@functools.lru_cache(maxsize=256)
def _relative_imports(source: str) -> tuple[str, ...]:
    # Keyed by the source itself: a build asks for each module's imports hundreds of
    # times, and a file edited under ``mkdocs serve`` is parsed again.
    tree = ast.parse(source)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module is None:  # from . import gpt, multihead
                found |= {f"{alias.name}.py" for alias in node.names}
            else:  # from .checks import check_size
                found.add(f"{node.module}.py")
    return tuple(sorted(found))


def copy_set(name: str) -> list[str]:
    """``name`` first, then every module it needs, directly or not, in name order."""
    if name not in copyable_modules():
        raise ValueError(f"name must be one of {copyable_modules()}, got {name!r}")
    needed, todo = set(), [name]
    while todo:
        module = todo.pop()
        for sibling in sibling_imports(module):
            if sibling not in needed and sibling != name:
                needed.add(sibling)
                todo.append(sibling)
    return [name, *sorted(needed)]


def _summary(name: str) -> str:
    """The first line of a module's docstring."""
    tree = ast.parse((PACKAGE / name).read_text(encoding="utf8"))
    docstring = ast.get_docstring(tree)
    return docstring.split("\n\n")[0].replace("\n", " ").strip()


def init_source(name: str) -> str:
    """The ``__init__.py`` of a set: what it holds and where it comes from."""
    stem = name.removesuffix(".py")
    files = copy_set(name)
    paragraphs = [
        f"{stem} from llm-attention, with the modules it builds on: {', '.join(files)}."
        if len(files) > 1
        else f"{stem} from llm-attention: {name}, which needs only torch.",
        _summary(name),
        "The modules import each other relatively, so this folder works as a package "
        f"under any name: ``from <this folder>.{stem} import ...``. Needs only torch.",
    ]
    text = "\n\n".join(textwrap.fill(paragraph, 88) for paragraph in paragraphs)
    return f'{NOTICE}"""{text}\n"""\n'


def copy_set_zip(name: str) -> bytes:
    """The set as a zip: its modules byte for byte, ``__init__.py`` and ``LICENSE``."""
    entries = {"__init__.py": init_source(name).encode()}
    entries["LICENSE"] = LICENSE.read_bytes()
    for module in copy_set(name):
        entries[module] = (PACKAGE / module).read_bytes()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for entry, data in sorted(entries.items()):
            info = zipfile.ZipInfo(entry, date_time=_ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, data)
    return buffer.getvalue()


# ---- The API reference: Markdown that names each set and links its download ----

CODE_URL = "../code/llm_attention"  # from a page under docs/reference/


def copy_set_markdown(name: str) -> str:
    """What to take for ``name``, and the download, as Markdown for its API page."""
    stem = name.removesuffix(".py")
    files = copy_set(name)
    zip_link = f"{CODE_URL}/{stem}.zip"
    button = f'[Download {stem}.zip]({zip_link}){{ download="{stem}.zip" .md-button }}'
    if len(files) == 1:
        needs = (
            f"`{name}` needs only PyTorch. "
            "The zip holds it, an `__init__.py` and the licence."
        )
    else:
        others = [f"`{f}`" for f in files[1:]]
        listed = ", ".join(others[:-1]) + " and " if len(others) > 1 else ""
        listed += others[-1]
        held = "both files" if len(files) == 2 else f"all {len(files)} files"
        needs = (
            f"`{name}` builds on {listed} of this package, imported relatively. "
            f"The zip holds {held}, an `__init__.py` and the licence."
        )
    use = (
        "Unzip it into a folder of your project, say `attention/`, and import "
        f"`from attention.{stem} import ...`: it works under any folder name, with "
        "only PyTorch installed."
    )
    if len(files) == 1:
        alone = f'[{name}]({CODE_URL}/{name}){{ download="{name}" }}'
        use += f" The file also works alone, as a module of its own: {alone}."
    return f"**To copy**: {needs} {use}\n\n{button}"


def copy_table_markdown() -> str:
    """Every copyable module, what it holds, what it builds on, and its download."""
    rows = ["| Module | What it holds | Comes with |", "|---|---|---|"]
    for name in READING_ORDER:  # three columns: a phone shows them without scrolling
        stem = name.removesuffix(".py")
        needs = ", ".join(f"`{f}`" for f in copy_set(name)[1:]) or "torch only"
        download = f'[{stem}.zip]({CODE_URL}/{stem}.zip){{ download="{stem}.zip" }}'
        module = f"[`{name}`]({stem}.md)<br>{download}"
        rows.append(f"| {module} | {_summary(name)} | {needs} |")
    return "\n".join(rows)


_DIRECTIVE = re.compile(r"^::copy-(set|table)::\s*(\S*)\s*$")


class _CopySets(Preprocessor):
    def run(self, lines: list[str]) -> list[str]:
        out = []
        for line in lines:
            match = _DIRECTIVE.match(line)
            if match is None:
                out.append(line)
            elif match[1] == "set":
                out.extend(copy_set_markdown(match[2]).split("\n"))
            else:
                out.extend(copy_table_markdown().split("\n"))
        return out


class CopySetsExtension(Extension):
    """Lines ``::copy-set:: NAME.py`` and ``::copy-table::`` become Markdown."""

    def extendMarkdown(self, md) -> None:  # noqa: N802 (the name Markdown calls)
        md.preprocessors.register(_CopySets(md), "copy_sets", 35)


def makeExtension(**kwargs):  # noqa: N802 (Python-Markdown's entry point)
    return CopySetsExtension(**kwargs)
