"""ModernAttention is fit to ship: it trains the same under DistributedDataParallel
(2 CPU processes, gloo) as in one process on the whole batch, and it runs under
torch.compile with the eager outputs.

Both are kept short: a tiny layer, three optimiser steps, and the "aot_eager" compile
backend, which traces the module as Inductor would without building C++ kernels.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel

from llm_attention.modern import ModernAttention

STEPS, WORLD = 3, 2


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


def train(module, x, target):
    optimiser = torch.optim.SGD(module.parameters(), lr=0.1)
    for _ in range(STEPS):
        optimiser.zero_grad()
        loss = ((module(x) - target) ** 2).mean()
        loss.backward()
        optimiser.step()


def _worker(rank, rendezvous, result_path):
    # A file both processes open: no port to pick, close and lose to another program.
    dist.init_process_group(
        "gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=WORLD
    )
    try:
        torch.set_num_threads(1)
        model = DistributedDataParallel(build())
        x, target = batch()
        half = x.shape[0] // WORLD  # each process takes its half of the batch
        part = slice(rank * half, (rank + 1) * half)
        train(model, x[part], target[part])
        if rank == 0:
            torch.save(model.module.state_dict(), result_path)
    finally:
        dist.destroy_process_group()


@pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not built")
def test_ddp_over_two_processes_equals_one_process(tmp_path):
    result, rendezvous = tmp_path / "ddp.pt", tmp_path / "rendezvous"  # a new file each run
    mp.start_processes(  # spawn, not fork: a forked OpenMP runtime can hang
        _worker, args=(str(rendezvous), str(result)), nprocs=WORLD, start_method="spawn"
    )
    single = build()
    train(single, *batch())  # the mean loss over the whole batch: DDP averages halves
    trained = torch.load(result)
    assert trained.keys() == single.state_dict().keys()
    for name, value in single.state_dict().items():
        assert not torch.equal(value, build().state_dict()[name])  # every weight trained
        torch.testing.assert_close(trained[name], value, atol=1e-6, rtol=1e-5, msg=name)


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
