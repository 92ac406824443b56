"""float16, the format of many served models, on the CPU: each attention layer on both paths
stays within a few float16 steps of a float64 reference, and the tiny GPT generates the same
tokens with and without a cache. (The CUDA tests skip where there is no GPU; these run
everywhere.)"""

from __future__ import annotations

import pytest
import torch

from llm_attention.generate import generate
from llm_attention.gpt import GPTModel
from llm_attention.grouped_query import GroupedQueryAttention
from llm_attention.modern import ModernAttention
from llm_attention.multihead import MultiHeadAttention

EPS = torch.finfo(torch.float16).eps  # 2**-10: one float16 step at 1.0
LAYERS = {
    "multihead": (MultiHeadAttention, (32, 32, 16, 0.0, 4), {}),
    "grouped": (GroupedQueryAttention, (32, 32, 16, 0.0, 4, 2), {}),
    "modern": (ModernAttention, (32, 32, 16, 0.0, 4, 2), {"window": 4, "qk_norm": True}),
}


@pytest.mark.parametrize("fast_path", [False, True], ids=["explicit", "fast"])
@pytest.mark.parametrize("name", sorted(LAYERS))
def test_float16_stays_within_a_few_steps_of_float64(name, fast_path):
    cls, args, kwargs = LAYERS[name]
    torch.manual_seed(0)
    reference = cls(*args, **kwargs).double().eval()
    half = cls(*args, **kwargs, fast_path=fast_path).eval()
    half.load_state_dict(reference.state_dict())
    half = half.half()
    x = torch.randn(2, 10, 32, dtype=torch.float64)  # (B, T, d_in)
    padding_mask = torch.ones(2, 10, dtype=torch.bool)
    padding_mask[1, :3] = False  # the second row is left-padded
    with torch.no_grad():
        want = reference(x, padding_mask)  # (B, T, d_out)
        got = half(x.half(), padding_mask)
    assert got.dtype == torch.float16
    # Measured here: about half a step of the output's largest value; allow four.
    bound = 4 * EPS * want.abs().max()
    error = (got.double() - want)[padding_mask].abs().max()
    assert error <= bound, f"{name}: {error:.2e} > {bound:.2e}"


def test_float16_generation_is_the_same_with_or_without_a_cache():
    torch.manual_seed(0)
    model = GPTModel(30, 24, 32, 4, 2, fast_path=True).half().eval()
    tokens = torch.randint(1, 30, (2, 6), generator=torch.Generator().manual_seed(1))
    padding_mask = torch.ones(2, 6, dtype=torch.bool)
    padding_mask[0, :2] = False
    slow, _ = generate(model, tokens, 8, padding_mask=padding_mask, use_cache=False)
    fast, _ = generate(model, tokens, 8, padding_mask=padding_mask, use_cache=True)
    assert torch.equal(fast, slow)
