"""torch.compile of MultiHeadAttention runs and gives the eager outputs, on both paths.

Compiling on this CPU takes tens of seconds (the C++ compiler builds the kernels), so the shape
is tiny: what is checked is that the module traces and compiles without a graph break that
changes its result, not its speed.
"""

from __future__ import annotations

import shutil

import pytest
import torch

from llm_attention.multihead import MultiHeadAttention

# The first torch.compile in a process imports and warms up the compiler (seconds): every test
# that compiles runs in one worker.
pytestmark = pytest.mark.xdist_group("torch.compile")


@pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None, reason="torch.compile on CPU needs a C compiler; none found")
@pytest.mark.parametrize("fast_path", [False, True], ids=["explicit", "fast"])
def test_compiled_module_matches_eager(fast_path):
    torch.manual_seed(0)
    module = MultiHeadAttention(8, 8, 6, 0.0, 2, fast_path=fast_path).eval()
    x = torch.randn(2, 5, 8)
    padding_mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    compiled = torch.compile(module, fullgraph=True)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), module(x), atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(compiled(x, padding_mask), module(x, padding_mask), atol=1e-6, rtol=1e-5)
