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


def quick_run(script: pathlib.Path, folder: pathlib.Path) -> tuple[dict, str, str]:
    """A benchmark script's ``--quick`` run into ``folder``: its report, its plot's SVG and
    what it printed (stdout, then stderr)."""
    import contextlib
    import io
    import json

    results, plot = folder / "results.json", folder / "plot.svg"
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        run_main(script, "--quick", "--results", str(results), "--plot", str(plot))
    return json.loads(results.read_text()), plot.read_text(), out.getvalue() + err.getvalue()


def check_bandwidth_shares(report: dict) -> float:
    """The limit a decode report records is the larger measured bandwidth, and each row's
    share of it follows from its bytes and time; returns the limit."""
    import pytest

    bandwidth, ratios = report["bandwidth"], report["ratios"]
    limit = max(bandwidth["copy_bytes_per_s"], bandwidth["read_bytes_per_s"])
    assert ratios["bandwidth_limit_bytes_per_s"] == limit
    for row in report["results"]:
        assert ratios["fraction_of_bandwidth"][f"{row['setting']}@{row['held']}"] == (
            pytest.approx(row["bytes_read"] / row["median_s"] / limit, rel=1e-12))
    return limit
