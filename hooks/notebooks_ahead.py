"""Build hook: run the notebooks in the background while the pages' code blocks run.

mkdocs-jupyter executes each notebook in a Jupyter kernel, a process of its own, when it reaches
the notebook's page; the build process waits meanwhile, and the kernel waits while the build
process runs the other pages' blocks. On a machine with two cores or more the two can run at
once: before the build turns to its first page, this hook starts rendering the notebooks, one
after the other, in a thread (the same call the plugin makes, with the same options, through the
executed-output cache of hooks/exec_cache.py when it is on), and the plugin's call for a
notebook's page takes that result. A call this hook did not start, or with other options,
renders as before. A notebook that fails raises its error at its page, as it did.

From then on the build's environment holds ``OMP_WAIT_POLICY=PASSIVE`` (unless it is set already),
so that the kernels, and every other program the build starts, wait for work without spinning:
with both processes computing on two cores, OpenMP threads that spin while they wait take the
core the other process needs. The build process keeps its own setting (torch has started by
then). A build that runs every notebook, on two cores here: 73-94 s with the notebooks rendered
in turn, about 68 s with them ahead but spinning, 50-58 s as it is now.

Interrupted (Ctrl-C), the build exits once the notebook under way has finished.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import pathlib
import threading
from concurrent.futures import Future, ThreadPoolExecutor

PLUGIN = "mkdocs-jupyter"
# The options the plugin passes to ``convert.nb2html``, read from its configuration by the
# same names (``execute`` also depends on ``execute_ignore``: see _options).
PASSED = ("kernel_name", "theme", "allow_errors", "show_input", "no_input", "no_prompt",
          "remove_tag_config", "highlight_extra_classes", "include_requirejs", "custom_mathjax_url")

# What a notebook's first render imports (listed from sys.modules before and after one), imported
# here first, in the build's own thread: imported in the background, a module could be seen
# half-imported by code that looks it up in sys.modules without importing it, as matplotlib's
# pyplot does with IPython on its first figure (a block of the home page failed so).
IMPORTED_FIRST = ("IPython", "ipykernel.kernelspec", "psutil", "mistune", "jinja2.ext")

_state: dict = {"executor": None, "ahead": {}, "used": 0}
# One render at a time: mkdocs-jupyter numbers each notebook's cells in a module-level counter.
_rendering = threading.Lock()
log = logging.getLogger("mkdocs")


def _options(plugin_config, path: str) -> dict:
    """The keyword arguments the plugin gives ``nb2html`` for the notebook at ``path``."""
    execute = plugin_config["execute"] and not any(
        pathlib.PurePath(path).match(pattern) for pattern in plugin_config["execute_ignore"] or [])
    return dict(execute=execute, **{name: plugin_config[name] for name in PASSED})


def _key(path: str, options: dict) -> str:
    return json.dumps([path, options], sort_keys=True, default=repr)


def _stop() -> None:
    """Forget what the last build started; wait for a render under way (a kernel cannot be
    stopped half-way through a cell), drop the ones not started."""
    executor = _state["executor"]
    if executor is not None:
        executor.shutdown(wait=True, cancel_futures=True)
    _state.update(executor=None, ahead={}, used=0)


def on_nav(nav, config, files):  # before the first page; never called by code that only lists the files
    from mkdocs_jupyter import convert

    _stop()
    plugin = config.plugins.get(PLUGIN)
    if plugin is None or plugin.config["cache"]:  # the plugin's own cache would skip the call
        return nav
    render = getattr(convert.nb2html, "_ahead_of", convert.nb2html)  # as installed this build
    notebooks = [file.abs_src_path for file in files
                 if plugin.should_include(file) and file.inclusion.is_included()]
    if not notebooks:
        return nav
    for module in IMPORTED_FIRST:
        importlib.import_module(module)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # read by each kernel's OpenMP as it starts

    def one_at_a_time(path, **options):
        with _rendering:
            return render(path, **options)

    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="notebooks-ahead")
    ahead: dict[str, Future] = {}
    _state.update(executor=executor, ahead=ahead)  # before any submit: on_build_error stops them
    for path in notebooks:
        options = _options(plugin.config, path)
        ahead[_key(path, options)] = executor.submit(one_at_a_time, path, **options)

    def nb2html(path, **options):
        future = _state["ahead"].pop(_key(path, options), None)
        if future is None:
            return one_at_a_time(path, **options)
        _state["used"] += 1
        return future.result()

    nb2html._ahead_of = render
    nb2html.__wrapped__ = getattr(render, "__wrapped__", render)  # the plugin's own function
    convert.nb2html = nb2html
    return nav


def on_post_build(config) -> None:
    if _state["executor"] is not None:
        unused = len(_state["ahead"])
        log.info(f"notebooks run ahead of their pages: {_state['used']} used, {unused} unused")
    _stop()


def on_build_error(error) -> None:
    _stop()
