# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""llm_attention: the attention mechanism of a GPT-style LLM, one module per step.

Each module imports torch, the standard library and, where it builds on earlier steps,
those modules of this package only, relatively (``from .checks import check_size``). A
module and the ones it builds on work as they are under any package name: each module's
API page names that set and offers it as one download.
"""

__version__ = "0.1.0"
