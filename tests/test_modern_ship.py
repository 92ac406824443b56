"""ModernAttention is fit to ship: it trains the same under DistributedDataParallel
(2 CPU processes, gloo, started once for every multi-process test:
llm_attention_site.devices) as in one process on the whole batch, and it runs under
torch.compile with the eager outputs.

Both are kept short: a tiny layer, three optimiser steps, and the "aot_eager" compile
backend, which traces the module as Inductor would without building C++ kernels.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from llm_attention.modern import ModernAttention

# The family options the fused kernel can follow (gate, (1 + w) norm, scaled and partial
# rotary), and, on the explicit path only, those it cannot (soft cap, sinks).
FUSABLE = dict(window=3, qk_norm=True, norm_unit_offset=True, output_gate=True,
               partial_rotary_factor=0.5, scale=0.3, qkv_bias=True,
               rope_scaling=dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=4))
EXPLICIT_ONLY = dict(softcap=2.0, sinks=True)


def build(fast_path=False):
    torch.manual_seed(0)
    options = FUSABLE if fast_path else {**FUSABLE, **EXPLICIT_ONLY}
    return ModernAttention(16, 16, 8, 0.0, 4, 2, fast_path=fast_path, **options)


def batch():
    gen = torch.Generator().manual_seed(1)
    return torch.randn(4, 8, 16, generator=gen), torch.randn(4, 8, 16, generator=gen)


@pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not built")
@pytest.mark.xdist_group("across devices")  # the processes start once, for these and others
def test_ddp_over_two_processes_equals_one_process(across_devices):
    """Every family option of the explicit path, 3 SGD steps, each process on half the
    batch (llm_attention_site.devices._ddp): the weights one process trains on the
    whole batch, to float32 rounding."""
    from llm_attention_site.devices import DDP_OPTIONS

    assert DDP_OPTIONS == {**FUSABLE, **EXPLICIT_ONLY}  # the options tested here
    for process in across_devices["processes"]:
        ddp = process["ddp"]
        assert ddp["every weight trained"], ddp
        assert ddp["largest parameter difference"] <= 1e-6, ddp


@pytest.mark.xdist_group("torch.compile")  # with the other compiling tests: one warm-up
@pytest.mark.parametrize("fast_path", [False, True], ids=["explicit", "fast"])
def test_compiled_matches_eager(fast_path):
    module = build(fast_path).eval()
    x, _ = batch()
    pad = torch.ones(4, 8, dtype=torch.bool)
    pad[1, :3] = False
    compiled = torch.compile(module, backend="aot_eager", fullgraph=True)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), module(x), atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(compiled(x, pad), module(x, pad), atol=1e-6, rtol=1e-5)
