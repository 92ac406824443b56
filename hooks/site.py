"""Build hooks: keep notebook pages offline and publish each notebook as a downloadable .ipynb.

Notebooks live in docs/notebooks/ as jupytext percent scripts (readable diffs, runnable as plain
Python). The site renders and executes them; this hook writes the matching .ipynb beside the
page so that the page's download button hands the reader a notebook to open in Jupyter.
"""

from __future__ import annotations

import pathlib
import re

import jupytext

# The notebook renderer adds a MathJax loader from a CDN; the site typesets math with its own KaTeX.
_MATHJAX = re.compile(r"<!-- Load mathjax -->.*?<!-- End of mathjax configuration -->", re.DOTALL)


def on_post_page(output: str, page, config) -> str:
    if not getattr(page, "nb_url", None):
        return output
    output, count = _MATHJAX.subn("", output)
    if count == 0 and "mathjax" in output.lower():
        raise RuntimeError(f"{page.file.src_uri}: the MathJax loader changed shape; update hooks/site.py")
    source = pathlib.Path(page.file.abs_src_path)
    target = pathlib.Path(page.file.abs_dest_path).parent / f"{source.stem}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    jupytext.write(jupytext.read(source), target)
    return output
