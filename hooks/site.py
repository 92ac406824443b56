"""Build hooks: publish the package's modules and their copy sets, keep notebook pages offline,
and publish each notebook as a downloadable .ipynb.

Every ``src/llm_attention/*.py`` is published at ``code/llm_attention/<file>.py``, and each
module's copy set (the module and the modules it builds on, ``llm_attention_site.copy_sets``)
at ``code/llm_attention/<module>.zip``, so a page can link them for one-click download and
strict mode checks the link like any other. The site's own package, which the notebooks import
too, is published the same way at ``code/llm_attention_site/``.

The tiny GPT that "Watching attention learn" trains runs in the reader's browser too: the
weights of the run the page shows are written once per build beside that page
(``llm_attention_site.live_model.weights_file``; the name holds a digest of the bytes).

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

from llm_attention.induction import trained_model
from llm_attention_site.copy_sets import copy_set_zip, copyable_modules
from llm_attention_site.live_model import weights_file

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "src" / "llm_attention"
SITE_PACKAGE = PACKAGE.parent / "llm_attention_site"
# Pages and notebooks that train a model share one run, kept on disk (llm_attention.induction);
# LLM_ATTENTION_RUN_CACHE="" turns the disk copy off.
os.environ.setdefault("LLM_ATTENTION_RUN_CACHE", str(PACKAGE.parents[1] / ".cache"))
LIVE_MODEL_PAGE = "at-work/watching-attention-learn"  # the page whose explorer runs the model

# The notebook renderer adds a MathJax loader from a CDN; the site typesets math with its own KaTeX.
_MATHJAX = re.compile(r"<!-- Load mathjax -->.*?<!-- End of mathjax configuration -->", re.DOTALL)


def on_files(files, config):
    """Add every module of both packages to the site, as files to download, with their list
    (``modules.txt``, one name a line), which a downloaded notebook reads to fetch them;
    and each copyable module's set as a zip."""
    for package in (PACKAGE, SITE_PACKAGE):
        modules = sorted(package.glob("*.py"))
        for module in modules:
            uri = f"code/{package.name}/{module.name}"
            files.append(File.generated(config, uri, abs_src_path=str(module)))
        listing = "".join(f"{module.name}\n" for module in modules)
        files.append(File.generated(config, f"code/{package.name}/modules.txt", content=listing))
    for name in copyable_modules():
        uri = f"code/{PACKAGE.name}/{name.removesuffix('.py')}.zip"
        files.append(File.generated(config, uri, content=copy_set_zip(name)))
    return files


def on_post_build(config) -> None:
    """Write the trained tiny GPT's weights beside the page that runs it. After the pages:
    the page's code has trained the model (or loaded the kept run) in this process by then,
    and a run of the hooks that builds no page (a test reading the site's files) trains
    nothing."""
    name, data = weights_file(trained_model()[0])
    folder = pathlib.Path(config.site_dir) / LIVE_MODEL_PAGE
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data)


# A notebook's first code cell names the site it fetches the package from; the build writes
# the address the site is published at (SITE_URL) into the downloads.
_SITE_LINE = re.compile(r'^SITE_URL = "[^"]*"', re.MULTILINE)


# The same line as the notebook's page shows it, highlighted.
_SHOWN_SITE_LINE = re.compile(
    r'(<span class="n">SITE_URL</span> <span class="o">=</span> <span class="s2">)"[^"<]*"'
)


def with_site_url(text: str, site_url: str) -> str:
    return _SITE_LINE.sub(f"SITE_URL = {site_url!r}".replace("'", '"'), text)


def page_with_site_url(html: str, site_url: str) -> str:
    """A notebook's page, its fetch cell naming the site's address, as the downloads do."""
    return _SHOWN_SITE_LINE.sub(rf'\1"{site_url}"', with_site_url(html, site_url))


def on_post_page(output: str, page, config) -> str:
    if not getattr(page, "nb_url", None):
        return output
    output, count = _MATHJAX.subn("", output)
    output = page_with_site_url(output, config.site_url)
    if count == 0 and "mathjax" in output.lower():
        raise RuntimeError(f"{page.file.src_uri}: the MathJax loader changed shape; update hooks/site.py")
    source = pathlib.Path(page.file.abs_src_path)
    folder = pathlib.Path(page.file.abs_dest_path).parent
    folder.mkdir(parents=True, exist_ok=True)
    text = with_site_url(source.read_text(encoding="utf8"), config.site_url)
    notebook = jupytext.reads(text, fmt="py:percent")
    for number, cell in enumerate(notebook.cells):  # not random: the same source, the same file
        cell.id = f"cell-{number}"
    jupytext.write(notebook, folder / f"{source.stem}.ipynb")
    (folder / source.name).write_text(text, encoding="utf8")  # the script download, same address
    return output
