"""Every module of the package is published on the site, byte for byte, at code/llm_attention/."""

from __future__ import annotations

import pathlib

import pytest
from mkdocs.config import load_config
from mkdocs.structure.files import get_files

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def site_files():
    """The site's files as the build sees them once every plugin and hook has added its own."""
    config = load_config(str(ROOT / "mkdocs.yml"))
    return config.plugins.on_files(get_files(config), config=config)


@pytest.mark.parametrize("module", sorted(p.name for p in (ROOT / "src" / "llm_attention").glob("*.py")))
def test_module_is_published_whole(site_files, module):
    published = site_files.get_file_from_path(f"code/llm_attention/{module}")
    assert published is not None, f"{module} is not published on the site"
    assert published.dest_uri == f"code/llm_attention/{module}"
    assert published.content_bytes == (ROOT / "src" / "llm_attention" / module).read_bytes()


def test_the_module_list_names_every_module(site_files):
    listing = site_files.get_file_from_path("code/llm_attention/modules.txt")
    assert listing is not None, "modules.txt is not published"
    names = listing.content_string.split()
    assert names == sorted(p.name for p in (ROOT / "src" / "llm_attention").glob("*.py"))
