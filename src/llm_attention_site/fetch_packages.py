# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""What a notebook downloaded from the site runs to fetch the two packages it imports.

The notebook's first code cell saves this file beside it and runs it with the site's
address as ``SITE_URL``. For each package not installed, it reads the package's list
of modules (``code/<package>/modules.txt``, written by the build) and saves each module
from the site into ``./<package>/``, once; then it puts the notebook's folder on
``sys.path``. With the packages installed (the repository's set-up), it does nothing.
Needs only the standard library. Not a model module.
"""

import importlib
import importlib.util
import pathlib
import sys
import urllib.request

PACKAGES = ("llm_attention", "llm_attention_site")


def fetch(site_url: str) -> None:
    """Save every module of each package that is not installed from ``site_url``."""
    for package in PACKAGES:
        if importlib.util.find_spec(package) is not None:
            continue
        code = f"{site_url}code/{package}/"
        folder = pathlib.Path(package)
        folder.mkdir(exist_ok=True)
        listing = urllib.request.urlopen(code + "modules.txt").read().decode()
        for name in listing.split():
            (folder / name).write_bytes(urllib.request.urlopen(code + name).read())
        if str(pathlib.Path.cwd()) not in sys.path:
            sys.path.insert(0, str(pathlib.Path.cwd()))
        importlib.invalidate_caches()


if __name__ == "__main__":  # run by the notebook's first cell, SITE_URL given
    fetch(globals()["SITE_URL"])
