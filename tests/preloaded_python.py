"""A Python that has imported some modules once and runs each script in a fork of itself.

Run as ``python tests/preloaded_python.py MODULE...``: it imports the modules, then reads one JSON
request per line on stdin, ``{"script", "cwd", "env", "out"}``, and for each forks a child that
runs the script as ``python SCRIPT`` would (``__main__``, ``sys.argv[0]`` and ``sys.path[0]``
set to the script's, working directory and environment as given, stdout and stderr to ``out``).
It answers each request with a line ``{"returncode": N}``.

A child starts as a new process would once those imports are done: nothing else of this
program's runs before the script. Used by tests/test_notebook_download.py, where each notebook
would otherwise spend more time importing torch and matplotlib than running. Needs only the
standard library, since it runs in the clean environment that test makes.
"""

import importlib
import json
import os
import runpy
import sys
import traceback


def run_in_child(request: dict) -> None:
    """In the forked child: become ``python SCRIPT`` and exit with its status."""
    status = 0
    with open(request["out"], "w") as out, open(os.devnull) as nothing:
        os.dup2(nothing.fileno(), 0)  # the requests arrive on stdin: not the script's to read
        os.dup2(out.fileno(), 1)
        os.dup2(out.fileno(), 2)
        try:
            os.chdir(request["cwd"])
            os.environ.clear()
            os.environ.update(request["env"])
            script = os.path.abspath(request["script"])
            sys.argv = [script]
            sys.path[0] = os.path.dirname(script)
            runpy.run_path(script, run_name="__main__")
        except SystemExit as stop:
            status = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        except BaseException:
            traceback.print_exc()
            status = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
    os._exit(status)


def main(modules: list[str]) -> None:
    for name in modules:
        importlib.import_module(name)
    print(json.dumps({"ready": modules}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            run_in_child(request)
        _, wait_status = os.waitpid(pid, 0)
        print(json.dumps({"returncode": os.waitstatus_to_exitcode(wait_status)}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
