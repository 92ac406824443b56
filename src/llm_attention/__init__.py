# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""llm_attention: the attention mechanism of a GPT-style LLM, one module per step.

Each module stands alone (it imports torch and the standard library, and at most the
module of the step before it), so a reader can copy one file into a project.
"""

__version__ = "0.1.0"
