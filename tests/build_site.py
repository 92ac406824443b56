"""Build the site strictly into a folder, then write ``status.json`` beside it.

Run as ``python tests/build_site.py OUT``: the site goes to ``OUT/site``, the build's exit code and
the tail of its log to ``OUT/status.json`` (written last, atomically), so that test processes can
wait for the file without owning the build process; the whole log goes to ``OUT/build.log``.

The build runs with a trap first on its PATH: programs named ``node`` and ``nodejs`` that record
that they were started (in ``OUT/node-started``) and fail. The site needs Python alone, and
tests/test_typeset_math.py checks that the record stays empty.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
import textwrap
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
BLOCK_FAILED = "Execution of python code block exited with errors"
_BLOCK_FRAME = re.compile(r'File "<code block: (?:session (?P<session>[^;>]+); )?[^>]*>", line (?P<line>\d+)')


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


def _find_block(code: str) -> tuple[str, int] | None:
    """The page and the opening line of the executed fence whose code is ``code``."""
    sys.path.insert(0, str(ROOT))
    from tests.fences import parse_fences

    for page in sorted((ROOT / "docs").rglob("*.md")):
        for fence in parse_fences(page.read_text(encoding="utf8")):
            if fence.executed_at_build and fence.code.strip() == code.strip():
                return page.relative_to(ROOT).as_posix(), fence.start_line
    return None


def failure_cause(log: str) -> str:
    """The first thing that broke a build, named by its page and line where a code block
    raised (the blocks after it often fail only because it did), else the first warning."""
    lines = log.splitlines()
    for index, line in enumerate(lines):
        if BLOCK_FAILED in line:
            break
    else:
        first = next((i for i, line in enumerate(lines) if re.match(r"(WARNING|ERROR)", line)), None)
        if first is None:
            return "no warning in the log; its last lines:\n" + "\n".join(lines[-15:])
        return "\n".join(lines[first : first + 12])
    section = []
    for line in lines[index + 1 :]:
        if re.match(r"(WARNING|ERROR|INFO) ", line):
            break
        section.append(line)
    text = "\n".join(section)
    code = text.split("Code block is:", 1)[-1].split("Output is:", 1)[0]
    output = text.split("Output is:", 1)[-1]
    error = [line.strip() for line in output.splitlines() if line.strip()][-1:]
    frame = None
    for match in _BLOCK_FRAME.finditer(output):
        frame = match  # the innermost frame inside the block
    where = _find_block(textwrap.dedent(code).strip("\n"))
    if where is None:
        place = "a code block of some page (not found in docs/)"
    else:
        page, start = where
        line, source = "", ""
        if frame:
            number = start + int(frame["line"])
            line = f", line {number}"
            source = (ROOT / page).read_text(encoding="utf8").splitlines()[number - 1].strip()
            source = f": {source}"
        place = f"{page}{line} (the block that opens at line {start}){source}"
    return f"{place}\n  raised {error[0] if error else 'an error'}"


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
    log = done.stdout + done.stderr
    (out / "build.log").write_text(log, encoding="utf8")
    status = {
        "returncode": done.returncode,
        "cause": failure_cause(log) if done.returncode else None,
        "seconds": round(time.perf_counter() - start, 1),
        "log": log[-6000:],
    }
    partial = out / "status.json.part"
    partial.write_text(json.dumps(status))
    partial.replace(out / "status.json")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main(pathlib.Path(sys.argv[1])))
