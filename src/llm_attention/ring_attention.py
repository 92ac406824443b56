# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
r"""Ring attention: causal attention over a sequence split across processes.

Each of ``W`` processes holds the queries, keys and values of its own tokens. The key
and value blocks travel around a ring (process ``r`` sends to ``r + 1`` and receives
from ``r - 1``, point to point) while each process folds every block that reaches it
into its queries' running softmax, as a fused kernel folds tiles:

.. math::

    m' = \max(m, \max_j s_j), \quad
    \ell' = \ell\, e^{m - m'} + \sum_j e^{s_j - m'}, \quad
    o' = o\, e^{m - m'} + \sum_j e^{s_j - m'} v_j,

and returns :math:`o / \ell`. After ``W - 1`` passes every query has seen every key it
may attend, and no process ever holds the whole sequence's keys. The backward pass
sends the blocks around once more, each with the gradients of its keys and values,
which arrive home after the ``W``-th pass.

Under the causal mask a query attends only earlier keys, so a process holding the
sequence's last tokens has the most work. ``balanced_positions`` gives process ``r``
the ``r``-th chunk from each end of the sequence, so every process computes as many
scores; ``contiguous_positions`` is the plain split, for comparison.

Shapes: ``B`` batch, ``H`` heads, ``T_here`` tokens held by this process, ``d_h`` head
width. Needs torch and ``torch.distributed`` (any backend with point-to-point sends).
MIT licence: copy freely, and keep the first two lines.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def balanced_positions(num_tokens: int, rank: int, world: int) -> torch.Tensor:
    """Positions held by process ``rank`` of ``world``: chunks ``rank`` and
    ``2 world - 1 - rank`` of ``2 world`` equal chunks, ``(T / world,)``."""
    _check_split(num_tokens, rank, world, 2 * world)
    chunk = num_tokens // (2 * world)
    first = torch.arange(rank * chunk, (rank + 1) * chunk)
    last = torch.arange((2 * world - 1 - rank) * chunk, (2 * world - rank) * chunk)
    return torch.cat([first, last])  # (T / world,)


def contiguous_positions(num_tokens: int, rank: int, world: int) -> torch.Tensor:
    """Positions held by process ``rank`` of ``world``: the ``rank``-th of ``world``
    equal slices, ``(T / world,)``."""
    _check_split(num_tokens, rank, world, world)
    size = num_tokens // world
    return torch.arange(rank * size, (rank + 1) * size)  # (T / world,)


def _check_split(num_tokens: int, rank: int, world: int, parts: int) -> None:
    for name, value in (("num_tokens", num_tokens), ("world", world)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < world:
        raise ValueError(f"rank must be an int in 0..{world - 1}, got {rank!r}")
    if num_tokens % parts:
        raise ValueError(
            f"num_tokens must split into {parts} equal chunks for {world} processes, "
            f"got {num_tokens}"
        )


def ring_attention(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    positions: torch.Tensor,
    *,
    scale: float | None = None,
    group=None,
) -> torch.Tensor:
    """Causal attention of this process's queries over every process's keys.

    ``queries``, ``keys``, ``values``: ``(B, H, T_here, d_h)``, this process's tokens;
    ``positions``: ``(T_here,)``, their places in the whole sequence (every process
    must hold as many tokens). ``scale`` defaults to ``1 / sqrt(d_h)``. Returns
    ``(B, H, T_here, d_h)``, differentiable in the three inputs.
    """
    if not all(isinstance(t, torch.Tensor) for t in (queries, keys, values, positions)):
        raise TypeError("queries, keys, values and positions must be tensors")
    same = keys.shape == queries.shape == values.shape
    if queries.dim() != 4 or not same:
        raise ValueError(
            "queries, keys and values must share one shape (B, H, T_here, d_h), got "
            f"{tuple(queries.shape)}, {tuple(keys.shape)}, {tuple(values.shape)}"
        )
    if positions.shape != (queries.shape[2],) or positions.is_floating_point():
        raise ValueError(
            f"positions must be ({queries.shape[2]},) integers, one per token held, "
            f"got {tuple(positions.shape)} {positions.dtype}"
        )
    if scale is None:
        scale = queries.shape[-1] ** -0.5
    return _RingAttention.apply(queries, keys, values, positions, scale, group)


def _pass_on(tensors: list[torch.Tensor], group) -> list[torch.Tensor]:
    """Send ``tensors`` to the next process of the ring, receive the previous one's."""
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    to, frm = (rank + 1) % world, (rank - 1) % world  # ranks within the group
    if group is not None:
        to, frm = dist.get_global_rank(group, to), dist.get_global_rank(group, frm)
    received = [torch.empty_like(t) for t in tensors]
    ops = [dist.P2POp(dist.isend, t.contiguous(), to, group) for t in tensors]
    ops += [dist.P2POp(dist.irecv, r, frm, group) for r in received]
    for request in dist.batch_isend_irecv(ops):
        request.wait()
    return received


def _block_scores(q, k, q_pos, k_pos, scale):
    """Scores of one block, ``(B, H, T_q, T_k)``, -inf where a key is in the future."""
    scores = (q @ k.transpose(-2, -1)) * scale  # (B, H, T_q, T_k)
    future = k_pos[None, :] > q_pos[:, None]  # (T_q, T_k)
    return scores.masked_fill(future, -torch.inf)


class _RingAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, positions, scale, group):
        world = dist.get_world_size(group)
        b, h, t, _ = q.shape
        m = q.new_full((b, h, t), -torch.inf)  # running max of each query's scores
        total = q.new_zeros((b, h, t))  # running sum of exp(score - m)
        out = torch.zeros_like(q)  # running sum of exp(score - m) v: (B, H, T, d_h)
        block = [k, v, positions]
        for step in range(world):
            k_blk, v_blk, k_pos = block
            if bool((k_pos.min() <= positions.max()).item()):  # skip all-future blocks
                scores = _block_scores(q, k_blk, positions, k_pos, scale)
                new_m = torch.maximum(m, scores.amax(dim=-1))  # (B, H, T)
                safe = torch.where(torch.isinf(new_m), 0.0, new_m)  # no inf - inf
                weights = torch.exp(scores - safe[..., None])  # (B, H, T, T_k)
                keep = torch.exp(m - safe)  # what the old sums are worth now
                total = total * keep + weights.sum(dim=-1)
                out = out * keep[..., None] + weights @ v_blk
                m = new_m
            if step < world - 1:
                block = _pass_on(block, group)
        out = out / total[..., None]  # (B, H, T, d_h): each query sees itself
        logsumexp = m + torch.log(total)  # (B, H, T)
        ctx.save_for_backward(q, k, v, positions, out, logsumexp)
        ctx.scale, ctx.group = scale, group
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, positions, out, logsumexp = ctx.saved_tensors
        scale, group = ctx.scale, ctx.group
        world = dist.get_world_size(group)
        delta = (grad_out * out).sum(dim=-1)  # (B, H, T): rowsum(dO * O)
        grad_q = torch.zeros_like(q)
        # Each block travels with the gradients of its keys and values; after
        # ``world`` passes it is back with the process that owns it.
        block = [k, v, positions, torch.zeros_like(k), torch.zeros_like(v)]
        for _ in range(world):
            k_blk, v_blk, k_pos, grad_k, grad_v = block
            if bool((k_pos.min() <= positions.max()).item()):
                scores = _block_scores(q, k_blk, positions, k_pos, scale)
                weights = torch.exp(scores - logsumexp[..., None])  # (B, H, T, T_k)
                grad_v = grad_v + weights.transpose(-2, -1) @ grad_out
                grad_weights = grad_out @ v_blk.transpose(-2, -1)  # (B, H, T, T_k)
                grad_scores = weights * (grad_weights - delta[..., None]) * scale
                grad_q = grad_q + grad_scores @ k_blk
                grad_k = grad_k + grad_scores.transpose(-2, -1) @ q
            block = _pass_on([k_blk, v_blk, k_pos, grad_k, grad_v], group)
        return grad_q, block[3], block[4], None, None, None


def causal_pairs(positions_held: list[torch.Tensor]) -> list[int]:
    """For each process, given every process's ``positions``: the (query, key) pairs
    the causal mask lets its queries score, ``sum(p + 1)`` over its positions. That is
    the work a kernel that skips masked tiles does, to compare ways of splitting."""
    return [int((positions + 1).sum()) for positions in positions_held]
