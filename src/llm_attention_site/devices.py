# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""Attention split across processes, run for the page "Attention across devices" and
its tests: the heads (tensor parallelism), the parameters (FSDP2) and the sequence
(ring attention), each compared with one process doing all the work; and the batch
(DistributedDataParallel), for ModernAttention's test.

``run_all(world=2)`` starts ``world`` CPU processes once (gloo, a rendezvous through a
file, so no port can be taken by another program between choosing and binding), runs
every check in them and returns what they measured, a dict of plain numbers and
strings. Each check builds its modules from a fixed seed in every process, so each
process can compare its part with the whole computed locally. Not a model module: it
runs the package's modules under PyTorch's own distributed engines.
"""

from __future__ import annotations

import copy
import gc
import hashlib
import pathlib
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

# Every family option the explicit path has, for the DistributedDataParallel check.
DDP_OPTIONS = dict(
    window=3, qk_norm=True, norm_unit_offset=True, output_gate=True,
    partial_rotary_factor=0.5, scale=0.3, qkv_bias=True, softcap=2.0, sinks=True,
    rope_scaling=dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=4),
)


# --8<-- [start:plan]
# Projections whose rows make the heads: each process takes its own heads' rows.
SPLIT_BY_HEADS = ("W_query", "W_query_up", "W_key", "W_value", "W_kv_up")
# Kept whole, applied to each process's own heads: each process gets a share of the
# gradient, its heads' part, and a training step adds the shares up.
USED_BY_EACH_HEAD = ("q_norm", "k_norm", "sinks")
# Kept whole, applied before the split: the split's backward already adds the
# processes' shares (ColwiseParallel for the query bottleneck, LatentAttention itself
# for the latent and the rotary key), so every process gets the whole gradient.
USED_BEFORE_THE_SPLIT = ("W_query_down", "query_norm", "W_kv_down", "latent_norm")


def tensor_parallel_plan(module) -> dict:
    """The plan for ``parallelize_module`` that splits ``module`` by heads, read from
    its own projections: the ones that make its heads' queries, keys and values get
    ``ColwiseParallel`` (each process computes a block of their rows: ``W_query``, or
    ``W_query_up`` behind a query bottleneck; ``W_key`` and ``W_value``, or latent
    attention's ``W_kv_up``), the output projection ``RowwiseParallel`` (each process
    its share of the sum). What feeds the heads (a query bottleneck, the latent) stays
    whole: every process computes all of it."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    split = [name for name in SPLIT_BY_HEADS if getattr(module, name, None) is not None]
    if not {"W_query", "W_query_up"} & set(split) or not hasattr(module, "out_proj"):
        raise ValueError(
            f"{type(module).__name__} has no query projection (W_query or W_query_up) "
            "and out_proj to split by heads"
        )
    plan = {name: ColwiseParallel() for name in split}
    return {**plan, "out_proj": RowwiseParallel()}


def replicated_gradients_to_sum(module) -> list[str]:
    """The names of ``module``'s parameters, kept whole by ``tensor_parallel_plan``,
    whose gradients a training step must sum across the processes (an all-reduce of
    each ``.grad``) before the optimiser steps: those its heads use after the split
    (``USED_BY_EACH_HEAD``). The other whole ones already get the whole gradient in
    every process; summing theirs would multiply it by the number of processes."""
    plan = tensor_parallel_plan(module)
    summed = []
    for name, _ in module.named_parameters():
        owner = name.split(".")[0]
        if owner in USED_BY_EACH_HEAD:
            summed.append(name)
        elif owner not in plan and owner not in USED_BEFORE_THE_SPLIT:
            raise ValueError(
                f"{type(module).__name__}.{name} is neither split by the plan nor "
                "known to get its gradient whole or in shares: add it to "
                "USED_BY_EACH_HEAD or USED_BEFORE_THE_SPLIT"
            )
    return summed
# --8<-- [end:plan]


def _attention_modules(fast_path: bool):
    from llm_attention.grouped_query import GroupedQueryAttention
    from llm_attention.latent import LatentAttention
    from llm_attention.modern import ModernAttention
    from llm_attention.multihead import MultiHeadAttention

    torch.manual_seed(0)
    latent = dict(kv_lora_rank=8, qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=8,
                  fast_path=fast_path)
    modules = {
        "MultiHeadAttention (4 heads)": MultiHeadAttention(
            32, 32, 16, 0.0, 4, fast_path=fast_path),
        "GroupedQueryAttention (4 heads, 2 kv)": GroupedQueryAttention(
            32, 32, 16, 0.0, 4, 2, fast_path=fast_path),
        "ModernAttention (4 heads, 2 kv, window 6)": ModernAttention(
            32, 32, 16, 0.0, 4, 2, window=6, qk_norm=True, output_gate=True,
            fast_path=fast_path),
        "LatentAttention (4 heads)": LatentAttention(32, 32, 16, 0.0, 4, **latent),
        "LatentAttention (absorbed)": LatentAttention(
            32, 32, 16, 0.0, 4, absorb=True, **latent),
        # DeepSeek-V3's shape: a bottleneck before the queries too (q_lora_rank)
        "LatentAttention (q_lora_rank)": LatentAttention(
            32, 32, 16, 0.0, 4, q_lora_rank=12, **latent),
        "LatentAttention (q_lora_rank, absorbed)": LatentAttention(
            32, 32, 16, 0.0, 4, q_lora_rank=12, absorb=True, **latent),
    }
    if not fast_path:  # the fused kernel has no sinks and no soft cap
        modules["ModernAttention (2 kv, sinks, soft cap)"] = ModernAttention(
            32, 32, 16, 0.0, 4, 2, sinks=True, softcap=2.0)
        with torch.no_grad():  # trained sinks differ from head to head
            modules["ModernAttention (2 kv, sinks, soft cap)"].sinks.normal_()
    return modules


def _make_cache(module, batch: int):
    """A cache for the key/value heads this process computes."""
    from llm_attention.kv_cache import KVCache

    if hasattr(module, "make_cache"):
        return module.make_cache(batch)
    weight = module.W_key.weight
    rows = (weight.to_local() if hasattr(weight, "to_local") else weight).shape[0]
    return KVCache(batch, rows // module.head_dim, module.head_dim, 16)


def _decode(module, x, prefill: int) -> torch.Tensor:
    """Outputs of a prefill of ``prefill`` tokens, then one token at a time."""
    cache = _make_cache(module, x.shape[0])
    outputs = [module(x[:, :prefill], cache=cache)]
    for t in range(prefill, x.shape[1]):
        outputs.append(module(x[:, t : t + 1], cache=cache))
    return torch.cat(outputs, dim=1)  # (B, T, d_out)


def _largest(t) -> float:
    return t.abs().max().item()


def _full(t):
    return t.full_tensor() if hasattr(t, "full_tensor") else t


def _tensor_parallel(mesh) -> dict:
    """Each module's heads split over the processes: outputs, gradients and cached
    decoding against the module whole, in this process."""
    from torch.distributed.tensor.parallel import parallelize_module

    found = {}
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(2, 9, 32, generator=gen)
    target = torch.randn(2, 9, 32, generator=gen)
    for fast_path in (False, True):
        for name, whole in _attention_modules(fast_path).items():
            split = parallelize_module(copy.deepcopy(whole), mesh,
                                       tensor_parallel_plan(whole))
            x_whole, x_split = x.clone().requires_grad_(), x.clone().requires_grad_()
            out_whole, out_split = whole(x_whole), split(x_split)
            (out_whole * target).sum().backward()
            (out_split * target).sum().backward()
            _sum_shares(split)
            grads = [(_full(p.grad) - q.grad).abs().max().item() for p, q in zip(
                split.parameters(), whole.parameters())]
            scale = max(q.grad.abs().max().item() for q in whole.parameters())
            with torch.no_grad():
                decoded = _decode(split, x, 5) - _decode(whole, x, 5)
            heads = (split.heads_here() if hasattr(split, "heads_here")
                     else split.W_query.weight.to_local().shape[0] // whole.head_dim)
            key = f"{name}, {'fast' if fast_path else 'explicit'}"
            found[key] = {
                "output": (out_split - out_whole).abs().max().item(),
                "gradients": max(grads + [_largest(x_split.grad - x_whole.grad)]),
                "cached decoding": decoded.abs().max().item(),
                "largest gradient": scale,
                "heads here": heads[0] if isinstance(heads, tuple) else heads,
            }
    return found


def _sum_shares(split, names=None) -> None:
    """Sum across the processes the gradients of ``names`` (by default, those
    ``replicated_gradients_to_sum`` names) of a module split by heads."""
    parameters = dict(split.named_parameters())
    for name in replicated_gradients_to_sum(split) if names is None else names:
        dist.all_reduce(parameters[name].grad)


def _tensor_parallel_training(mesh) -> dict:
    """Two SGD steps of each module split by heads (every process on the same batch,
    the shares of ``replicated_gradients_to_sum`` summed), against the whole module's
    two steps; and the same with every whole weight's gradient summed instead."""
    from torch.distributed.tensor.parallel import parallelize_module

    gen = torch.Generator().manual_seed(4)
    x, target = (torch.randn(2, 9, 32, generator=gen) for _ in range(2))
    found = {}
    for name, whole in _attention_modules(fast_path=False).items():
        if "absorbed" in name:
            continue  # the same weights and gradients as the plain way
        whole_names = [n for n, p in whole.named_parameters()
                       if n.split(".")[0] not in tensor_parallel_plan(whole)]
        trained = {}
        rules = (("summed", None), ("every whole weight summed", whole_names))
        for rule, names in rules:
            split = parallelize_module(copy.deepcopy(whole), mesh,
                                       tensor_parallel_plan(whole))
            optimiser = torch.optim.SGD(split.parameters(), lr=0.5)
            for _ in range(2):
                optimiser.zero_grad()
                ((split(x) - target) ** 2).mean().backward()
                _sum_shares(split, names)
                optimiser.step()
            trained[rule] = {n: _full(p).detach() for n, p in split.named_parameters()}
        reference = copy.deepcopy(whole)
        optimiser = torch.optim.SGD(reference.parameters(), lr=0.5)
        for _ in range(2):
            optimiser.zero_grad()
            ((reference(x) - target) ** 2).mean().backward()
            optimiser.step()
        summed = replicated_gradients_to_sum(whole)
        found[name] = {
            "summed names": summed,  # their gradients come in shares
            "whole": [n for n in whole_names if n not in summed],  # theirs come whole
        }
        for rule, params in trained.items():  # largest difference from one process
            found[name][rule] = max(_largest(params[n] - p)
                                    for n, p in reference.named_parameters())
    return found


def _uneven_heads_error(mesh) -> str:
    """A key/value head cannot be cut in two: the module says so."""
    from torch.distributed.tensor.parallel import parallelize_module

    from llm_attention.grouped_query import GroupedQueryAttention

    torch.manual_seed(0)
    one_kv_head = GroupedQueryAttention(32, 32, 16, 0.0, 4, 1)
    module = parallelize_module(one_kv_head, mesh, tensor_parallel_plan(one_kv_head))
    try:
        module(torch.randn(1, 3, 32))
    except ValueError as error:
        return str(error)
    return ""


def _gpt():
    from llm_attention.gpt import GPTModel

    torch.manual_seed(0)
    return GPTModel(vocab_size=40, context_length=16, emb_dim=32, num_heads=4,
                    num_layers=2)


def _train(model, tokens, steps: int) -> list[float]:
    optimiser = torch.optim.SGD(model.parameters(), lr=0.5)
    losses = []
    for _ in range(steps):
        optimiser.zero_grad()
        logits = model(tokens[:, :-1])  # (B, T, V)
        targets = tokens[:, 1:].flatten()  # (B T,)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets)
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
    return losses


def _fsdp(rank: int, world: int, folder: pathlib.Path) -> dict:
    """The tiny GPT trained with its parameters sharded (FSDP2), each process on its
    share of the batch, against one process on the whole batch; then saved sharded."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_model_state_dict
    from torch.distributed.fsdp import fully_shard

    steps = 4
    tokens = torch.randint(0, 40, (4, 13), generator=torch.Generator().manual_seed(2))
    whole = _gpt()
    whole_losses = _train(whole, tokens, steps)
    sharded = _gpt()
    for block in sharded.trf_blocks:
        fully_shard(block)
    fully_shard(sharded)
    held = sum(p.to_local().numel() for p in sharded.parameters())
    part = tokens.shape[0] // world
    mine = _train(sharded, tokens[rank * part : (rank + 1) * part], steps)
    together = torch.tensor(mine)
    dist.all_reduce(together)  # the mean of equal halves' mean losses is the whole's
    params = max((_full(p) - q).abs().max().item() for p, q in zip(
        sharded.parameters(), whole.parameters()))
    dcp.save(get_model_state_dict(sharded), checkpoint_id=str(folder / "checkpoint"))
    return {
        "losses, one process": whole_losses,
        "losses, sharded": (together / world).tolist(),
        "largest loss difference": max(abs(a - b) for a, b in zip(
            whole_losses, (together / world).tolist())),
        "largest parameter difference": params,
        "parameters": sum(p.numel() for p in whole.parameters()),
        "parameters held here": held,
    }


def _ring(rank: int, world: int) -> dict:
    """Causal attention with the sequence split: both ways of splitting, forward and
    backward, against full attention over the whole sequence."""
    from llm_attention.ring_attention import (
        balanced_positions,
        contiguous_positions,
        ring_attention,
    )

    b, h, t, d = 2, 2, 16, 8
    gen = torch.Generator().manual_seed(3)
    q, k, v, target = (torch.randn(b, h, t, d, generator=gen) for _ in range(4))
    whole = [z.clone().requires_grad_() for z in (q, k, v)]
    out = torch.nn.functional.scaled_dot_product_attention(*whole, is_causal=True)
    (out * target).sum().backward()
    found = {}
    splits = (("balanced", balanced_positions), ("contiguous", contiguous_positions))
    for name, split in splits:
        here = split(t, rank, world)
        mine = [z[:, :, here].clone().requires_grad_() for z in (q, k, v)]
        ring_out = ring_attention(*mine, here)
        (ring_out * target[:, :, here]).sum().backward()
        found[name] = {
            "positions here": here.tolist(),
            "output": (ring_out - out[:, :, here]).abs().max().item(),
            "gradients": max((m.grad - w.grad[:, :, here]).abs().max().item()
                             for m, w in zip(mine, whole)),
        }
    return found


def _ring_one_token_each(rank: int, world: int) -> dict:
    """The smallest split: one token per process, so each process's own block is a
    single key at its query's own position, which the query must not skip."""
    from llm_attention.ring_attention import contiguous_positions, ring_attention

    gen = torch.Generator().manual_seed(5)
    q, k, v, target = (torch.randn(1, 2, world, 4, generator=gen) for _ in range(4))
    whole = [z.clone().requires_grad_() for z in (q, k, v)]
    out = torch.nn.functional.scaled_dot_product_attention(*whole, is_causal=True)
    (out * target).sum().backward()
    here = contiguous_positions(world, rank, world)
    mine = [z[:, :, here].clone().requires_grad_() for z in (q, k, v)]
    ring_out = ring_attention(*mine, here)
    (ring_out * target[:, :, here]).sum().backward()
    return {
        "positions here": here.tolist(),
        "output": (ring_out - out[:, :, here]).abs().max().item(),
        "gradients": max((m.grad - w.grad[:, :, here]).abs().max().item()
                         for m, w in zip(mine, whole)),
    }


def _ddp(rank: int, world: int) -> dict:
    """ModernAttention with every family option the explicit path has, trained under
    DistributedDataParallel, each process on its share of the batch, against one
    process on the whole batch (DDP averages the shares' gradients)."""
    from torch.nn.parallel import DistributedDataParallel

    from llm_attention.modern import ModernAttention

    def build():
        torch.manual_seed(0)
        return ModernAttention(16, 16, 8, 0.0, 4, 2, **DDP_OPTIONS)

    def train(module, x, target):
        optimiser = torch.optim.SGD(module.parameters(), lr=0.1)
        for _ in range(3):
            optimiser.zero_grad()
            ((module(x) - target) ** 2).mean().backward()
            optimiser.step()

    gen = torch.Generator().manual_seed(1)
    x, target = (torch.randn(4, 8, 16, generator=gen) for _ in range(2))  # (B, T, d)
    part = slice(rank * 4 // world, (rank + 1) * 4 // world)
    ddp, single, untrained = DistributedDataParallel(build()), build(), build()
    train(ddp, x[part], target[part])
    train(single, x, target)
    trained = ddp.module.state_dict()
    return {
        "largest parameter difference": max(
            _largest(trained[k] - v) for k, v in single.state_dict().items()),
        "every weight trained": all(
            not torch.equal(trained[k], v) for k, v in untrained.state_dict().items()),
    }


def _worker(rank: int, world: int, folder: str) -> None:
    from torch.distributed.device_mesh import init_device_mesh

    folder = pathlib.Path(folder)
    dist.init_process_group("gloo", init_method=f"file://{folder / 'rendezvous'}",
                            rank=rank, world_size=world)
    try:
        torch.set_num_threads(1)
        mesh = init_device_mesh("cpu", (world,))
        found = {
            "tensor parallel": _tensor_parallel(mesh),
            "tensor parallel training": _tensor_parallel_training(mesh),
            "uneven heads": _uneven_heads_error(mesh),
            "fsdp": _fsdp(rank, world, folder),
            "ring": _ring(rank, world),
            "ring, one token each": _ring_one_token_each(rank, world),
            "ddp": _ddp(rank, world),
        }
        everyone = [None] * world
        dist.all_gather_object(everyone, found)
        if rank == 0:
            torch.save(everyone, folder / "found.pt")
    finally:
        # Free the finished collectives' work (and the tensors they hold) while the
        # interpreter is whole: freed during its shutdown, they can abort the process.
        gc.collect()
        dist.destroy_process_group()


def _reload_unsharded(folder: pathlib.Path) -> float:
    """Load the sharded checkpoint into a whole tiny GPT in this one process; return the
    largest difference from the model trained in one process."""
    import torch.distributed.checkpoint as dcp

    whole = _gpt()
    tokens = torch.randint(0, 40, (4, 13), generator=torch.Generator().manual_seed(2))
    _train(whole, tokens, 4)
    reloaded = _gpt()
    state = reloaded.state_dict()
    dcp.load(state, checkpoint_id=str(folder / "checkpoint"), no_dist=True)
    reloaded.load_state_dict(state)
    return max((a - b).abs().max().item() for a, b in zip(
        reloaded.state_dict().values(), whole.state_dict().values()))


def run_all(world: int = 2) -> dict:
    """Start ``world`` processes once, run every check, return what each measured:
    ``{"processes": [per process dict, ...], "reloaded": float}``.

    With ``$LLM_ATTENTION_RUN_CACHE`` set (the site build and the tests set it), the
    result is also kept in that folder (``llm_attention.induction.kept_on_disk``), keyed
    by ``world``, the torch version and the source of both packages: the page, the tests
    and the build of one run share one start of the processes, and any change to the
    code runs them again."""
    from llm_attention.induction import kept_on_disk

    if isinstance(world, bool) or not isinstance(world, int) or world < 2:
        raise ValueError(f"world must be an int of 2 or more processes, got {world!r}")
    return kept_on_disk("devices", _cache_key(world), lambda: _run(world))


def _cache_key(world: int) -> str:
    import llm_attention

    digest = hashlib.sha256(f"{world} {torch.__version__}".encode())
    here = pathlib.Path(__file__).parent
    for package in (pathlib.Path(llm_attention.__file__).parent, here):
        for source in sorted(package.glob("*.py")):
            digest.update(source.name.encode() + source.read_bytes())
    return digest.hexdigest()[:20]


def _run(world: int) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        mp.start_processes(  # spawn, not fork: a forked OpenMP runtime can hang
            _worker, args=(world, folder), nprocs=world, start_method="spawn")
        found = torch.load(pathlib.Path(folder) / "found.pt", weights_only=False)
        reloaded = _reload_unsharded(pathlib.Path(folder))
    return {"processes": found, "reloaded": reloaded}
