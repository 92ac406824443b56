# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""Mamba-2's rule read as linear attention: one matrix of memory per head, one decay per
head and token, no delta correction. Four forms of the same computation, each the
others' check (the state space duality of the Mamba-2 paper).

Shapes: ``B`` batch, ``H`` heads, ``T`` tokens, ``N`` state size (the key width),
``P`` head width (the value width), ``L`` chunk size. Per head, the state ``S`` is
``(N, P)``: it maps a key to a value.

    S_t = exp(g_t) S_{t-1} + dt_t k_t v_t^T      decay, then write
    o_t = S_t^T q_t                             read with the query

In Mamba-2's names the query ``q`` is ``C``, the key ``k`` is ``B``, the value ``v`` is
``x``, the step size ``dt > 0`` scales the write and ``g = dt * A`` (``A < 0``, one per
head) is the log of the decay. Unrolled, this is attention with a causal mask of decays
and no softmax: ``o_i = sum_{j <= i} exp(g_{j+1} + ... + g_i) dt_j (q_i . k_j) v_j``.

- ``step``: one token, the definition; ``step_in_place`` the same for decoding
  without gradients, writing into the state it is given;
- ``recurrent``: ``step`` in a loop over the tokens;
- ``masked``: the unrolled sum as one ``(T, T)`` matrix, the decays in its mask;
- ``chunked``: the masked form inside chunks of ``L`` tokens, for all chunks at once,
  and a loop over chunks only to carry the state from one to the next (the SSD
  algorithm). Any ``T``: the last chunk is filled with tokens that change nothing.

``q`` and ``k`` have one head each per value head: a layer whose heads share ``B`` and
``C`` in groups repeats them first.

Builds on ``delta_rule.py`` of this package (its ``decay_within``), imported relatively:
copy it with this file, under any package name. MIT licence: keep the first two lines
of each file.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .delta_rule import decay_within


def _check(q, k, v, g, dt, state, *, tokens: bool) -> None:
    """Shapes of the rule's inputs, before any tensor work. ``tokens``: with a ``T``
    axis (``recurrent``, ``masked``, ``chunked``) or without (``step``)."""
    lead = "(B, H, T, " if tokens else "(B, H, "
    named = dict(q=q, k=k, v=v, g=g, dt=dt)
    for name, tensor in named.items():
        if not isinstance(tensor, torch.Tensor) or not tensor.is_floating_point():
            raise TypeError(f"{name} must be a floating-point torch.Tensor, got "
                            f"{getattr(tensor, 'dtype', type(tensor).__name__)}")
    axes = 4 if tokens else 3
    for name in ("q", "k", "v"):
        if named[name].dim() != axes:
            width = "P" if name == "v" else "N"
            raise ValueError(f"{name} must have shape {lead}{width}), got shape "
                             f"{tuple(named[name].shape)}")
    if q.shape != k.shape or v.shape[:-1] != k.shape[:-1]:
        raise ValueError(
            f"q and k must have the same shape {lead}N) and v the same lead {lead}P); "
            f"got q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    lead_shape = tuple(k.shape[:-1])
    for name in ("g", "dt"):
        if tuple(named[name].shape) != lead_shape:
            raise ValueError(f"{name} must have shape {lead_shape} (one per head and "
                             f"token), got {tuple(named[name].shape)}")
    if state is not None:
        expected = (k.shape[0], k.shape[1], k.shape[-1], v.shape[-1])
        if not isinstance(state, torch.Tensor) or tuple(state.shape) != expected:
            raise ValueError(
                f"state must be None or a tensor of shape (B, H, N, P) = {expected}, "
                f"got {getattr(state, 'shape', type(state).__name__)}"
            )


# --8<-- [start:step]
def step(q, k, v, g, dt, state):
    """One token: ``S_new = exp(g) S + dt k v^T``, ``o = S_new^T q``. ``q``, ``k``
    ``(B, H, N)``, ``v`` ``(B, H, P)``, ``g``, ``dt`` ``(B, H)``, ``state``
    ``(B, H, N, P)``. Returns the output ``(B, H, P)`` and the new state
    ``(B, H, N, P)``."""
    _check(q, k, v, g, dt, state, tokens=False)
    if state is None:
        raise ValueError("state must be a tensor of shape (B, H, N, P), got None")
    decay = g.exp()[..., None, None]  # (B, H, 1, 1): one number per head
    written = (dt.unsqueeze(-1) * k).unsqueeze(-1) * v.unsqueeze(-2)  # (B, H, N, P)
    state = decay * state + written  # (B, H, N, P): forget a little, then write
    out = (q.unsqueeze(-2) @ state).squeeze(-2)  # (B, H, P): S^T q
    return out, state
# --8<-- [end:step]


def step_in_place(q, k, v, g, dt, state):
    """``step`` for decoding without gradients: the new state is written into
    ``state`` ``(B, H, N, P)`` (contiguous) instead of a new tensor, so that a token
    costs no fresh state-sized allocation. Returns the output ``(B, H, P)``."""
    _check(q, k, v, g, dt, state, tokens=False)
    if state is None or not state.is_contiguous() or torch.is_grad_enabled() and (
        state.requires_grad or any(t.requires_grad for t in (q, k, v, g, dt))
    ):
        raise ValueError("step_in_place needs a contiguous state and no gradients "
                         "(use step to differentiate)")
    b, h, n, p = state.shape
    state.mul_(g.exp()[..., None, None])  # (B, H, N, P): decayed
    flat = state.view(b * h, n, p)  # the same memory
    flat.baddbmm_((dt.unsqueeze(-1) * k).reshape(b * h, n, 1),
                  v.reshape(b * h, 1, p))  # + dt k v^T
    return torch.bmm(q.reshape(b * h, 1, n), flat).view(b, h, p)  # S^T q


def recurrent(q, k, v, g, dt, state=None):
    """The rule token by token: ``q``, ``k`` ``(B, H, T, N)``, ``v`` ``(B, H, T, P)``,
    ``g``, ``dt`` ``(B, H, T)``, ``state`` ``(B, H, N, P)`` or None (zeros). Returns
    the outputs ``(B, H, T, P)`` and the final state ``(B, H, N, P)``."""
    _check(q, k, v, g, dt, state, tokens=True)
    b, h, num_tokens, n = k.shape
    if state is None:
        state = q.new_zeros(b, h, n, v.shape[-1])  # (B, H, N, P)
    outputs = []
    for t in range(num_tokens):
        out, state = step(q[:, :, t], k[:, :, t], v[:, :, t], g[:, :, t], dt[:, :, t],
                          state)  # (B, H, P), (B, H, N, P)
        outputs.append(out)
    return torch.stack(outputs, dim=2), state  # (B, H, T, P), (B, H, N, P)


# --8<-- [start:masked]
def masked(q, k, v, g, dt, state=None):
    """The rule as one masked product, attention without a softmax:
    ``O = (M * (Q K^T)) (dt V) + diag(exp(c)) Q S_0`` with ``M[i, j] = exp(c_i - c_j)``
    for ``j <= i`` (0 above the diagonal) and ``c`` the cumulative sum of ``g``.
    Same arguments and results as ``recurrent``; costs ``T^2`` per head."""
    _check(q, k, v, g, dt, state, tokens=True)
    b, h, _, n = k.shape
    if state is None:
        state = q.new_zeros(b, h, n, v.shape[-1])  # (B, H, N, P)
    log_decay = g.cumsum(dim=-1).unsqueeze(-1)  # (B, H, T, 1): c_i
    mask = decay_within(log_decay)  # (B, H, T, T): exp(c_i - c_j), 0 for j > i
    scores = (q @ k.transpose(-1, -2)) * mask  # (B, H, T, T): decayed q_i . k_j
    out = scores @ (dt.unsqueeze(-1) * v)  # (B, H, T, P): the writes of this call
    out = out + (log_decay.exp() * q) @ state  # (B, H, T, P): what S_0 still holds
    total = log_decay[:, :, -1:]  # (B, H, 1, 1): c_T
    carried = dt.unsqueeze(-1) * k * (total - log_decay).exp()  # (B, H, T, N)
    return out, total.exp() * state + carried.transpose(-1, -2) @ v  # .., (B, H, N, P)
# --8<-- [end:masked]


# --8<-- [start:chunked]
def chunked(q, k, v, g, dt, state=None, chunk_size: int = 64):
    """The rule chunk by chunk; the same outputs ``(B, H, T, P)`` and final state
    ``(B, H, N, P)`` as ``recurrent`` (same arguments). The masked form runs inside
    every chunk at once; so does each chunk's own contribution to the state at its
    end; a loop over the ``ceil(T / chunk_size)`` chunks then carries the state, and
    each chunk reads the state it starts from, all at once again.

    With ``c_i`` the summed ``g`` from the chunk's start to position ``i`` and
    ``S_0`` the state before the chunk: ``o_i = sum_{j <= i} exp(c_i - c_j) dt_j
    (q_i . k_j) v_j + exp(c_i) S_0^T q_i``, and the chunk leaves
    ``exp(c_L) S_0 + sum_j exp(c_L - c_j) dt_j k_j v_j^T``.
    """
    _check(q, k, v, g, dt, state, tokens=True)
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or (
        chunk_size < 1
    ):
        raise ValueError(f"chunk_size must be a positive int, got {chunk_size!r}")
    b, h, num_tokens, n = k.shape
    p = v.shape[-1]
    if state is None:
        state = q.new_zeros(b, h, n, p)  # (B, H, N, P)
    pad = -num_tokens % chunk_size  # tokens with g = 0 and dt = 0 change nothing
    q, k, v = (F.pad(t, (0, 0, 0, pad)) for t in (q, k, v))  # (B, H, T', .)
    g, dt = F.pad(g, (0, pad)), F.pad(dt, (0, pad))  # (B, H, T')
    chunks = (num_tokens + pad) // chunk_size  # n_c
    split = (b, h, chunks, chunk_size)
    q_c, k_c = q.view(*split, n), k.view(*split, n)  # (B, H, n_c, L, N)
    v_c = (dt.unsqueeze(-1) * v).view(*split, p)  # (B, H, n_c, L, P): dt_j v_j
    log_decay = g.view(split).cumsum(dim=-1).unsqueeze(-1)  # (B, H, n_c, L, 1): c_i
    mask = decay_within(log_decay)  # (B, H, n_c, L, L)
    inner = ((q_c @ k_c.transpose(-1, -2)) * mask) @ v_c  # (B, H, n_c, L, P)
    total = log_decay[..., -1:, :]  # (B, H, n_c, 1, 1): c_L, each chunk's decay
    carried = k_c * (total - log_decay).exp()  # (B, H, n_c, L, N): exp(c_L - c_j) k_j
    local = carried.transpose(-1, -2) @ v_c  # (B, H, n_c, N, P): each chunk's writes
    starts = []  # the state each chunk starts from: the only loop, one operation
    for decay_c, local_c in zip(total.exp().unbind(2), local.unbind(2)):
        starts.append(state)  # (B, H, N, P)
        state = torch.addcmul(local_c, decay_c, state)  # (B, H, N, P): decay, write
    starts = torch.stack(starts, dim=2)  # (B, H, n_c, N, P)
    outer = (log_decay.exp() * q_c) @ starts  # (B, H, n_c, L, P): exp(c_i) S_0^T q_i
    out = (inner + outer).reshape(b, h, -1, p)[:, :, :num_tokens]  # (B, H, T, P)
    return out, state
# --8<-- [end:chunked]
