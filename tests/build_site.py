"""Build the site strictly into a folder, then write ``status.json`` beside it.

Run as ``python tests/build_site.py OUT``: the site goes to ``OUT/site``, the build's exit code and
the tail of its log to ``OUT/status.json`` (written last, atomically), so that test processes can
wait for the file without owning the build process.

The build runs with a trap first on its PATH: programs named ``node`` and ``nodejs`` that record
that they were started (in ``OUT/node-started``) and fail. The site needs Python alone, and
tests/test_typeset_math.py checks that the record stays empty.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


TRAP = """#!/bin/sh
echo "$0 $*" >> "{record}"
exit 1
"""


def node_trap(out: pathlib.Path) -> pathlib.Path:
    """A folder holding ``node`` and ``nodejs`` programs that record their start and fail."""
    trap = out / "trap"
    trap.mkdir(exist_ok=True)
    for name in ("node", "nodejs"):
        program = trap / name
        program.write_text(TRAP.format(record=out / "node-started"))
        program.chmod(0o755)
    return trap


def main(out: pathlib.Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    trap = node_trap(out)
    # The build replays the outputs of blocks whose every input is unchanged since they last ran
    # (hooks/exec_cache.py; tests/test_exec_cache.py shows a stale output cannot be replayed). The
    # fence tests run every block regardless, and .ci/run's strict build runs them all again.
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", LLM_ATTENTION_CACHE="1")
    env["PATH"] = os.pathsep.join([str(trap), env.get("PATH", "")])
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out / "site")],
        cwd=ROOT, capture_output=True, text=True, env=env,
    )
    status = {
        "returncode": done.returncode,
        "seconds": round(time.perf_counter() - start, 1),
        "log": (done.stdout + done.stderr)[-6000:],
    }
    partial = out / "status.json.part"
    partial.write_text(json.dumps(status))
    partial.replace(out / "status.json")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main(pathlib.Path(sys.argv[1])))
