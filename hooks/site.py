"""Build hooks: publish the package's modules, keep notebook pages offline, and publish each
notebook as a downloadable .ipynb.

Every ``src/llm_attention/*.py`` is published at ``code/llm_attention/<file>.py``, so a page can
link a module for one-click download (``[causal.py](../code/llm_attention/causal.py)``) and strict
mode checks the link like any other.

Notebooks live in docs/notebooks/ as jupytext percent scripts (readable diffs, runnable as plain
Python). The site renders and executes them; this hook writes the matching .ipynb beside the
page so that the page's download button hands the reader a notebook to open in Jupyter.
"""

from __future__ import annotations

import os
import pathlib
import re

import jupytext
from mkdocs.structure.files import File

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "src" / "llm_attention"
# Pages and notebooks that train a model share one run, kept on disk (llm_attention.induction);
# LLM_ATTENTION_CACHE="" turns the disk copy off.
os.environ.setdefault("LLM_ATTENTION_CACHE", str(PACKAGE.parents[1] / ".cache"))
MODULES_URI = "code/llm_attention"

# The notebook renderer adds a MathJax loader from a CDN; the site typesets math with its own KaTeX.
_MATHJAX = re.compile(r"<!-- Load mathjax -->.*?<!-- End of mathjax configuration -->", re.DOTALL)


def on_files(files, config):
    """Add every module of the package to the site, as a file to download."""
    for module in sorted(PACKAGE.glob("*.py")):
        files.append(File.generated(config, f"{MODULES_URI}/{module.name}", abs_src_path=str(module)))
    return files


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
