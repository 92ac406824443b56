"""The search index's formulas, as text a reader can read in a result's preview
(hooks/search_clean.py): the built index itself is checked in tests/test_site_browser.py."""

from __future__ import annotations

import pytest

from hooks.search_clean import clean_text, readable_math


@pytest.mark.parametrize("tex, text", [
    (r"s_{ij}", "sᵢⱼ"),
    (r"Z_i = \sum_{k=1}^{T} e^{s_{ik}}", "Zᵢ = Σₖ₌₁ᵀ e^(sᵢₖ)"),
    (r"\frac{Q K^\top}{\sqrt{d_k}}", "(Q Kᵀ)/√dₖ"),
    (r"\alpha_{2j} = \frac{\exp(\omega_{2j})}{\sum_{k=1}^{T} \exp(\omega_{2k})}",
     "α₂ⱼ = exp(ω₂ⱼ)/(Σₖ₌₁ᵀ exp(ω₂ₖ))"),
    (r"x \cdot y = \lVert x \rVert \, \lVert y \rVert \cos\theta", "x · y = ‖ x ‖ ‖ y ‖ cos θ"),
    (r"d_{\text{model}} \times 10^{-4}", "d_model × 10⁻⁴"),
    (r"z^{(2)} = \sum_{j=1}^{T} \alpha_{2j} \, x^{(j)}", "z⁽²⁾ = Σⱼ₌₁ᵀ α₂ⱼ x^(j)"),
    (r"M_{ij} = \begin{cases} 0 &amp; j \le i \\ -\infty &amp; j &gt; i \end{cases}",
     "Mᵢⱼ = 0 if j ≤ i; -∞ if j &gt; i"),
    (r"\operatorname{softmax}\left(X X^\top\right)", "softmax(X Xᵀ)"),
])
def test_formulas_read_as_text(tex, text):
    assert readable_math(tex) == text


def test_code_keeps_its_dollars_and_prose_loses_its_pilcrows():
    html = r"<h2>Scores¶</h2> the scores \(s_{ij}\), <code>$x$ \(y\)</code> and $d_k$"
    assert clean_text(html) == r"<h2>Scores</h2> the scores sᵢⱼ, <code>$x$ \(y\)</code> and dₖ"
