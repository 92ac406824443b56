"""Run a script's ``main(argv)`` in the test process, as ``python SCRIPT ARGS`` would run it.

Starting a new Python for each script costs more than the script's own quick run (importing
torch and matplotlib again); the scripts take their arguments as ``main(argv)``, so the tests
call that. The script's folder is put first on ``sys.path`` (as Python does for a script), and
torch's thread count, which a script may set, is restored afterwards.
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import torch


def run_main(script: pathlib.Path, *argv: str):
    """Import ``script`` under a name of its own and return what its ``main(argv)`` returns."""
    threads = torch.get_num_threads()
    sys.path.insert(0, str(script.parent))
    try:
        spec = importlib.util.spec_from_file_location(f"_script_{script.stem}", script)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.main(list(argv))
    finally:
        sys.path.remove(str(script.parent))
        torch.set_num_threads(threads)
