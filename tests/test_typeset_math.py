"""Math is typeset at build time (hooks/typeset_math.py): KaTeX in the V8 engine that pip installs,
checked against KaTeX's own markup; code is left alone; a formula KaTeX rejects fails the build;
the build never starts Node."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("typeset_math_under_test", ROOT / "hooks" / "typeset_math.py")
typeset_math = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(typeset_math)



@pytest.fixture(autouse=True, scope="module")
def engine():
    yield
    typeset_math.close()


def test_arithmatex_inline_and_display_become_katex():
    page = '<p><span class="arithmatex">\\(d_k\\)</span></p><div class="arithmatex">\\[\\frac{a}{b}\\]</div>'
    out = typeset_math.typeset_arithmatex(page, "page.md")
    assert out.count('class="katex"') == 2 and "katex-display" in out
    assert "\\(" not in out and "\\[" not in out.split("<annotation")[0]
    assert '<annotation encoding="application/x-tex">\\frac{a}{b}</annotation>' in out  # MathML kept


def test_html_entities_are_read_as_tex():
    out = typeset_math.typeset_arithmatex('<span class="arithmatex">\\(a &lt; b\\)</span>', "page.md")
    assert '<annotation encoding="application/x-tex">a &lt; b</annotation>' in out


def test_dollars_in_text_are_typeset_and_code_is_left_alone():
    text = "<p>Scale by $\\sqrt{d_k}$ and $$x^2$$.</p><pre><code>cost = '$5$'</code></pre><p>It costs $5 or $6.</p>"
    out = typeset_math.typeset_dollars(text, "nb.py")
    assert out.count('class="katex"') == 2
    assert "<pre><code>cost = '$5$'</code></pre>" in out
    assert "It costs $5 or $6." in out


def test_a_formula_katex_rejects_fails_naming_the_page():
    with pytest.raises(ValueError, match=r"chapter\.md: KaTeX cannot typeset '\\\\frac\{a\}'"):
        typeset_math.typeset_arithmatex('<span class="arithmatex">\\(\\frac{a}\\)</span>', "chapter.md")


def test_the_engine_restarts_after_it_is_closed():
    typeset_math.close()
    assert 'class="katex"' in typeset_math.typeset_arithmatex('<span class="arithmatex">\\(x\\)</span>', "p.md")


def test_the_build_never_starts_node(built_site):
    """The strict build ran with programs named node and nodejs first on its PATH (tests/build_site.py)."""
    out = built_site.site_dir.parent
    assert (out / "trap" / "node").exists() and (out / "trap" / "nodejs").exists(), "the trap was not set"
    record = out / "node-started"
    assert not record.exists(), f"the build started Node: {record.read_text()}"
    math_page = (built_site.site_dir / "chapters" / "simple-self-attention" / "index.html").read_text()
    assert math_page.count('class="katex"') > 10, "the build typeset no math"
