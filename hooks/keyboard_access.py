"""Build hook: every region that may scroll sideways can be reached with the keyboard.

A reader without a mouse scrolls a wide code cell or formula with the arrow keys once it has
the focus, so it must be able to take it (WCAG 2.1.1). The theme does this for its own code
blocks; this hook does it at build, with no script, for the two regions it does not cover:
notebook code cells (``highlight-ipynb``) and display formulas (``katex-display``, typeset at
build by hooks/typeset_math.py), which scroll on a phone.
"""

from __future__ import annotations

import re

_REGION = re.compile(r'<(div|span) class="(highlight-ipynb[^"]*|katex-display)"(?![^>]*\btabindex=)')


def focusable(html: str) -> str:
    """Add ``tabindex="0"`` to each notebook code cell and display formula."""
    return _REGION.sub(r'<\1 class="\2" tabindex="0"', html)


def on_post_page(output, page, config):
    return focusable(output)
