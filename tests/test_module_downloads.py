"""Every module of both packages is published on the site, byte for byte, under code/, and each
copyable module's set as a zip that holds exactly the set (tests/test_copy_sets.py runs them)."""

from __future__ import annotations

import io
import pathlib
import zipfile

import pytest
from mkdocs.config import load_config
from mkdocs.structure.files import get_files

from llm_attention_site.copy_sets import copy_set, copyable_modules

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("llm_attention", "llm_attention_site")


def _modules(package: str) -> list[str]:
    return sorted(p.name for p in (ROOT / "src" / package).glob("*.py"))


@pytest.fixture(scope="module")
def site_files():
    """The site's files as the build sees them once every plugin and hook has added its own."""
    config = load_config(str(ROOT / "mkdocs.yml"))
    return config.plugins.on_files(get_files(config), config=config)


@pytest.mark.parametrize("package, module", [(p, m) for p in PACKAGES for m in _modules(p)])
def test_module_is_published_whole(site_files, package, module):
    published = site_files.get_file_from_path(f"code/{package}/{module}")
    assert published is not None, f"{package}/{module} is not published on the site"
    assert published.dest_uri == f"code/{package}/{module}"
    assert published.content_bytes == (ROOT / "src" / package / module).read_bytes()


@pytest.mark.parametrize("package", PACKAGES)
def test_the_module_list_names_every_module(site_files, package):
    listing = site_files.get_file_from_path(f"code/{package}/modules.txt")
    assert listing is not None, f"{package}/modules.txt is not published"
    assert listing.content_string.split() == _modules(package)


def test_every_module_but_the_package_file_is_copyable():
    assert copyable_modules() == [m for m in _modules("llm_attention") if m != "__init__.py"]


@pytest.mark.parametrize("module", copyable_modules())
def test_each_zip_holds_its_set_the_licence_and_an_init(site_files, module):
    published = site_files.get_file_from_path(f"code/llm_attention/{module.removesuffix('.py')}.zip")
    assert published is not None, f"no zip for {module}"
    archive = zipfile.ZipFile(io.BytesIO(published.content_bytes))
    assert sorted(archive.namelist()) == sorted([*copy_set(module), "__init__.py", "LICENSE"])
    for name in copy_set(module):
        assert archive.read(name) == (ROOT / "src" / "llm_attention" / name).read_bytes(), name
    assert archive.read("LICENSE") == (ROOT / "LICENSE").read_bytes()
