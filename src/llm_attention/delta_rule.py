# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""The gated delta rule: linear attention whose memory is one matrix per head, written
token by token. Three forms of the same computation, each the others' check.

Shapes: ``B`` batch, ``H`` heads, ``T`` tokens, ``d_k`` key width, ``d_v`` value width,
``C`` chunk size. Per head, the state ``S`` is ``(d_k, d_v)``: it maps a key to a value.

    S'_t = D_t S_{t-1}                       decay (forget a little)
    u_t  = beta_t (v_t - S'_t^T k_t)         what v_t adds to what S' recalls for k_t
    S_t  = S'_t + k_t u_t^T                  write only that difference
    o_t  = S_t^T q_t                         read with the query

``D_t = diag(exp(g_t))`` with ``g_t <= 0``: one number per head and token (Gated
DeltaNet, ``g`` of shape ``(B, H, T)``) or one per key channel (Kimi Delta Attention,
``g`` of shape ``(B, H, T, d_k)``). ``beta_t`` in ``(0, 1)`` is how much of the
difference is written. With ``beta = 1`` and unit keys, reading ``k_t`` back right after
the write gives exactly ``v_t``.

- ``step``: one token, the definition; ``step_in_place`` the same for decoding
  without gradients, writing into the state it is given;
- ``recurrent``: ``step`` in a loop over the tokens;
- ``chunked``: the same outputs and final state with matrix products inside chunks of
  ``C`` tokens, done for all chunks at once, and a loop over the chunks that only
  carries the state. Any ``T``: the last chunk is filled with blank tokens.

Queries are used as given: the layers scale them by ``d_k ** -0.5`` beforehand.

Needs torch and the standard library only. MIT licence: copy freely, and keep the
first two lines.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _check(q, k, v, g, beta, state, *, tokens: bool) -> None:
    """Shapes of the rule's inputs, before any tensor work. ``tokens``: with a ``T``
    axis (``recurrent``, ``chunked``) or without (``step``)."""
    lead = "(B, H, T, " if tokens else "(B, H, "
    named = dict(q=q, k=k, v=v, g=g, beta=beta)
    for name, tensor in named.items():
        if not isinstance(tensor, torch.Tensor) or not tensor.is_floating_point():
            raise TypeError(f"{name} must be a floating-point torch.Tensor, got "
                            f"{getattr(tensor, 'dtype', type(tensor).__name__)}")
    axes = 4 if tokens else 3
    for name in ("q", "k", "v"):
        if named[name].dim() != axes:
            width = "d_v" if name == "v" else "d_k"
            raise ValueError(f"{name} must have shape {lead}{width}), got shape "
                             f"{tuple(named[name].shape)}")
    if q.shape != k.shape or v.shape[:-1] != k.shape[:-1]:
        raise ValueError(
            f"q and k must have the same shape {lead}d_k) and v the same lead "
            f"{lead}d_v); got q {tuple(q.shape)}, k {tuple(k.shape)}, v "
            f"{tuple(v.shape)}"
        )
    lead_shape, d_k = tuple(k.shape[:-1]), k.shape[-1]
    if tuple(beta.shape) != lead_shape:
        raise ValueError(f"beta must have shape {lead_shape}, got {tuple(beta.shape)}")
    if tuple(g.shape) not in (lead_shape, (*lead_shape, d_k)):
        raise ValueError(
            f"g must have shape {lead_shape} (one decay per head) or "
            f"{(*lead_shape, d_k)} (one per key channel), got {tuple(g.shape)}"
        )
    if state is not None:
        expected = (k.shape[0], k.shape[1], d_k, v.shape[-1])
        if not isinstance(state, torch.Tensor) or tuple(state.shape) != expected:
            raise ValueError(
                f"state must be None or a tensor of shape (B, H, d_k, d_v) = "
                f"{expected}, got {getattr(state, 'shape', type(state).__name__)}"
            )


def _per_channel(g: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """``g`` with a last axis of 1 (one decay per head) or ``d_k`` (per channel)."""
    return g if g.dim() == k.dim() else g.unsqueeze(-1)


# --8<-- [start:step]
def step(q, k, v, g, beta, state):
    """One token of the gated delta rule, ``S' = diag(exp(g)) S``,
    ``u = beta (v - S'^T k)``, ``S_new = S' + k u^T``, ``o = S_new^T q``: ``q``, ``k``
    ``(B, H, d_k)``, ``v`` ``(B, H, d_v)``, ``g`` ``(B, H)`` or ``(B, H, d_k)``,
    ``beta`` ``(B, H)``, ``state`` ``(B, H, d_k, d_v)``. Returns the output
    ``(B, H, d_v)`` and the new state ``(B, H, d_k, d_v)``."""
    _check(q, k, v, g, beta, state, tokens=False)
    if state is None:
        raise ValueError("state must be a tensor of shape (B, H, d_k, d_v), got None")
    decay = _per_channel(g, k).exp().unsqueeze(-1)  # (B, H, d_k or 1, 1)
    state = state * decay  # (B, H, d_k, d_v): forget a little
    recalled = (k.unsqueeze(-2) @ state).squeeze(-2)  # (B, H, d_v): S'^T k
    written = beta.unsqueeze(-1) * (v - recalled)  # (B, H, d_v): the missing part
    state = state + k.unsqueeze(-1) * written.unsqueeze(-2)  # (B, H, d_k, d_v)
    out = (q.unsqueeze(-2) @ state).squeeze(-2)  # (B, H, d_v): S^T q
    return out, state
# --8<-- [end:step]


def step_in_place(q, k, v, g, beta, state):
    """``step`` for decoding without gradients: the new state is written into
    ``state`` ``(B, H, d_k, d_v)`` (contiguous) instead of a new tensor, so that a
    token costs no fresh state-sized allocation. Returns the output ``(B, H, d_v)``."""
    _check(q, k, v, g, beta, state, tokens=False)
    if state is None or not state.is_contiguous() or torch.is_grad_enabled() and (
        state.requires_grad or any(t.requires_grad for t in (q, k, v, g, beta))
    ):
        raise ValueError("step_in_place needs a contiguous state and no gradients "
                         "(use step to differentiate)")
    b, h, d_k, d_v = state.shape
    state.mul_(_per_channel(g, k).exp().unsqueeze(-1))  # (B, H, d_k, d_v): decayed
    flat = state.view(b * h, d_k, d_v)  # the same memory
    recalled = torch.bmm(k.reshape(b * h, 1, d_k), flat).view(b, h, d_v)  # S'^T k
    written = beta.unsqueeze(-1) * (v - recalled)  # (B, H, d_v)
    flat.baddbmm_(k.reshape(b * h, d_k, 1), written.reshape(b * h, 1, d_v))  # + k u^T
    return torch.bmm(q.reshape(b * h, 1, d_k), flat).view(b, h, d_v)  # S^T q


# --8<-- [start:recurrent]
def recurrent(q, k, v, g, beta, state=None):
    """The rule token by token: ``q``, ``k`` ``(B, H, T, d_k)``, ``v``
    ``(B, H, T, d_v)``, ``g`` ``(B, H, T)`` or ``(B, H, T, d_k)``, ``beta``
    ``(B, H, T)``, ``state`` ``(B, H, d_k, d_v)`` or None (zeros). Returns the outputs
    ``(B, H, T, d_v)`` and the final state ``(B, H, d_k, d_v)``."""
    _check(q, k, v, g, beta, state, tokens=True)
    b, h, num_tokens, d_k = k.shape
    if state is None:
        state = q.new_zeros(b, h, d_k, v.shape[-1])  # (B, H, d_k, d_v)
    outputs = []
    for t in range(num_tokens):
        out, state = step(q[:, :, t], k[:, :, t], v[:, :, t], g[:, :, t],
                          beta[:, :, t], state)  # (B, H, d_v), (B, H, d_k, d_v)
        outputs.append(out)
    return torch.stack(outputs, dim=2), state  # (B, H, T, d_v), (B, H, d_k, d_v)
# --8<-- [end:recurrent]


# --8<-- [start:within]
def decay_within(log_decay: torch.Tensor) -> torch.Tensor:
    """``exp(c_i - c_j)`` for ``j <= i`` (0 above the diagonal): the decay a write at
    position ``j`` of a chunk has met by position ``i``. ``log_decay`` ``c`` holds the
    cumulative sums of ``g`` over the chunk, ``(..., C, 1)`` (one decay per head) or
    ``(..., C, d_k)``; returns ``(..., C, C)`` or ``(..., C, C, d_k)``. The leading
    axes (``B, H``, and the chunks) are carried through."""
    size = log_decay.shape[-2]
    lower = torch.ones(size, size, dtype=log_decay.dtype, device=log_decay.device)
    lower = lower.tril()  # (C, C): 1 where j <= i, 0 above the diagonal
    if log_decay.shape[-1] == 1:  # one decay per head: a (C, C) matrix
        gaps = log_decay - log_decay.transpose(-1, -2)  # (..., C, C): c_i - c_j
    else:  # one per channel: a (C, C) matrix for each of the d_k channels
        gaps = log_decay.unsqueeze(-2) - log_decay.unsqueeze(-3)  # (..., C, C, d_k)
        lower = lower.unsqueeze(-1)  # (C, C, 1)
    # j > i would be a growth, and may overflow: set to 0 before the exponential, and
    # the decay to 0 after it (exp(-inf) = 0 would do both, but runs several times
    # slower than the exponential of a moderate number on some CPUs)
    return gaps.mul_(lower).exp_() * lower  # (..., C, C) or (..., C, C, d_k)


def decayed_products(a, b, decay) -> torch.Tensor:
    """``M[i, r, j] = a_ir^T diag(decay[i, j]) b_j``, for ``R`` rows ``a_ir`` at each
    position ``i``: ``a`` ``(..., C, R, d_k)``, ``b`` ``(..., C, d_k)``, ``decay`` from
    ``decay_within``; returns ``(..., C, R, C)``."""
    if decay.dim() == b.dim():  # one decay per head: it factors out of the product
        products = a.flatten(-3, -2) @ b.transpose(-1, -2)  # (..., C R, C)
        return products.unflatten(-2, a.shape[-3:-1]) * decay.unsqueeze(-2)
    # one per channel: X[i, j] = diag(decay[i, j]) b_j, made once, and read by one
    # matrix product per position i, (R, d_k) @ (d_k, C), for all R rows at once
    x = decay * b.unsqueeze(-3)  # (..., C, C, d_k): X[i, j, c] = decay[i, j, c] b_jc
    return a @ x.transpose(-1, -2)  # (..., C, R, d_k) @ (..., C, d_k, C)


def chunk_overlaps(q, k, beta, log_decay, budget: int = 2**19):
    """For every chunk, the decayed overlaps ``beta_i k_i^T G_i G_j^-1 k_j`` (the
    system's ``A`` before its strict lower triangle is taken) and the scores
    ``q_i^T G_i G_j^-1 k_j`` (``j <= i``): ``(B, H, n, C, C)`` each, from ``q``, ``k``
    ``(B, H, n, C, d_k)``, ``beta`` ``(B, H, n, C, 1)`` and the summed ``g``. Both
    take the same decays, so their rows ``beta_i k_i`` and ``q_i`` go in one product.
    With one decay per head, all chunks at once; with one per key channel a chunk's
    decays are ``C C d_k`` numbers per head, so the chunks of all heads go a group at
    a time, at most ``budget`` decays a group (one chunk at least): a few MB, read
    by the product while they are still in the processor's cache."""
    b, h, n, size, d_k = k.shape
    rows = torch.stack((beta * k, q), dim=-2)  # (B, H, n, C, 2, d_k)
    if log_decay.shape[-1] == 1:
        decay = decay_within(log_decay)  # (B, H, n, C, C)
        both = decayed_products(rows, k, decay)  # (B, H, n, C, 2, C)
    else:
        rows = rows.flatten(0, 2)  # (B H n, C, 2, d_k): the chunks of all heads
        k, log_decay = k.flatten(0, 2), log_decay.flatten(0, 2)  # (B H n, C, d_k)
        group = max(1, budget // (size * size * d_k))  # chunks a group
        parts = [slice(i, i + group) for i in range(0, b * h * n, group)]
        both = torch.cat([decayed_products(rows[p], k[p], decay_within(log_decay[p]))
                          for p in parts])  # (B H n, C, 2, C)
        both = both.view(b, h, n, size, 2, size)  # (B, H, n, C, 2, C)
    return both[..., 0, :], both[..., 1, :]  # (B, H, n, C, C) twice
# --8<-- [end:within]


# --8<-- [start:chunked]
def chunked(q, k, v, g, beta, state=None, chunk_size: int = 64):
    """The rule chunk by chunk; the same outputs ``(B, H, T, d_v)`` and final state
    ``(B, H, d_k, d_v)`` as ``recurrent`` (same arguments). The work inside the
    ``n = ceil(T / chunk_size)`` chunks is done for all of them at once; a loop over
    the chunks does only what needs the state: four operations per chunk.

    Inside a chunk that starts from the state ``S_0``, with ``c_i`` the summed ``g``
    up to position ``i`` and ``G_i = diag(exp(c_i))``, the written values ``u`` solve
    one lower-triangular system, ``(I + A) u = beta v - (beta G k) S_0`` with
    ``A[i, j] = beta_i k_i^T G_i G_j^-1 k_j`` for ``j < i``; so ``u = U - R S_0``
    with ``U = (I + A)^-1 beta v`` and ``R = (I + A)^-1 beta G k``, both computed for
    every chunk before the loop. The loop takes ``u``, what the decayed queries read
    of ``S_0``, and the state carried to the next chunk,
    ``G_C S_0 + sum_j G_C G_j^-1 k_j u_j^T``; after it, for every chunk at once,
    ``o_i = (G_i q_i)^T S_0 + sum_{j <= i} (q_i^T G_i G_j^-1 k_j) u_j``.
    The last chunk is filled with blank tokens (``q = k = v = 0``, ``beta = g = 0``:
    nothing read, written or forgotten).
    """
    _check(q, k, v, g, beta, state, tokens=True)
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or (
        chunk_size < 1
    ):
        raise ValueError(f"chunk_size must be a positive int, got {chunk_size!r}")
    b, h, num_tokens, d_k = k.shape
    d_v = v.shape[-1]
    if state is None:
        state = q.new_zeros(b, h, d_k, d_v)  # (B, H, d_k, d_v)
    g = _per_channel(g, k)  # (B, H, T, 1 or d_k)
    pad = -num_tokens % chunk_size  # blank tokens to fill the last chunk
    if pad:
        q, k, v, g = (F.pad(t, (0, 0, 0, pad)) for t in (q, k, v, g))  # (B, H, T', .)
        beta = F.pad(beta, (0, pad))  # (B, H, T')
    n = (num_tokens + pad) // chunk_size  # chunks
    split = (b, h, n, chunk_size)  # (B, H, n, C, .): every chunk at once
    q, k, v = q.reshape(*split, d_k), k.reshape(*split, d_k), v.reshape(*split, d_v)
    beta = beta.reshape(*split, 1)  # (B, H, n, C, 1)
    log_decay = g.reshape(*split, -1).cumsum(dim=3)  # (B, H, n, C, 1 or d_k): c_i
    overlaps, scores = chunk_overlaps(q, k, beta, log_decay)  # (B, H, n, C, C) twice
    eye = torch.eye(chunk_size, dtype=k.dtype, device=k.device)  # (C, C)
    system = eye + overlaps.tril(-1)  # I + A
    inverse = torch.linalg.solve_triangular(
        system, eye, upper=False, unitriangular=True
    )  # (B, H, n, C, C): (I + A)^-1, lower triangular
    values = inverse @ (beta * v)  # (B, H, n, C, d_v): U
    keys_read = inverse @ (beta * log_decay.exp() * k)  # (B, H, n, C, d_k): R
    total = log_decay[..., -1:, :]  # (B, H, n, 1, 1 or d_k): each chunk's decay
    carried = (k * (total - log_decay).exp()).transpose(-1, -2)  # (B, H, n, d_k, C)
    # The loop: the B H heads side by side as one batch; each chunk a view, no copy.
    per_chunk = [t.reshape(b * h, n, *t.shape[3:]).unbind(1) for t in (
        q * log_decay.exp(), values, keys_read, carried,
        total.exp().transpose(-1, -2),
    )]  # n views each: (B H, C, d_k), (B H, C, d_v), .., (B H, 1 or d_k, 1)
    state = state.reshape(b * h, d_k, d_v)  # (B H, d_k, d_v)
    read, written = [], []
    for queries_c, values_c, keys_read_c, carried_c, decay_c in zip(*per_chunk):
        read.append(torch.bmm(queries_c, state))  # (B H, C, d_v): (G q)^T S_0
        written.append(torch.baddbmm(values_c, keys_read_c, state, alpha=-1))  # u
        state = torch.baddbmm(state * decay_c, carried_c, written[-1])  # S_C
    read = torch.stack(read, dim=1).view(b, h, n, chunk_size, d_v)  # (B,H,n,C,d_v)
    written = torch.stack(written, dim=1).view(b, h, n, chunk_size, d_v)  # u
    out = (read + scores @ written).view(b, h, -1, d_v)[:, :, :num_tokens]
    return out, state.view(b, h, d_k, d_v)  # .., (B, H, d_k, d_v)
# --8<-- [end:chunked]
