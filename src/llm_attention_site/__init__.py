# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""llm_attention_site: the site's own code, not offered to copy.

Figures drawn from a page's tensors (``figures``), flowcharts drawn at build
(``diagrams``), the explorable figures (``explorer``, ``stepper``) and the copy sets
that the API reference offers for download (``copy_sets``). The pages and notebooks import
it beside ``llm_attention``; unlike that package, it needs matplotlib.
"""
