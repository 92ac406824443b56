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
  ``C`` tokens and a loop over chunks only. Any ``T``: the last chunk may be shorter.

Queries are used as given: the layers scale them by ``d_k ** -0.5`` beforehand.

Needs torch and the standard library only. MIT licence: copy freely, and keep the
first two lines.
"""

from __future__ import annotations

import torch


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
    cumulative sums of ``g`` over the chunk, ``(B, H, C, 1)`` (one decay per head) or
    ``(B, H, C, d_k)``; returns ``(B, H, C, C)`` or ``(B, H, C, C, d_k)``."""
    size = log_decay.shape[-2]
    future = torch.ones(size, size, dtype=torch.bool, device=log_decay.device).triu(1)
    if log_decay.shape[-1] == 1:  # one decay per head: a (C, C) matrix
        gaps = log_decay - log_decay.transpose(-1, -2)  # (B, H, C, C): c_i - c_j
    else:  # one per channel: a (C, C) matrix for each of the d_k channels
        gaps = log_decay.unsqueeze(-2) - log_decay.unsqueeze(-3)  # (B, H, C, C, d_k)
        future = future.unsqueeze(-1)  # (C, C, 1)
    # j > i would be a growth, and may overflow: masked before the exponential
    return gaps.masked_fill(future, float("-inf")).exp()


def decayed_products(a, b, decay) -> torch.Tensor:
    """``M[i, j] = a_i^T diag(decay[i, j]) b_j``: ``a``, ``b`` ``(B, H, C, d_k)``,
    ``decay`` from ``decay_within``; returns ``(B, H, C, C)``."""
    if decay.dim() == a.dim():  # one decay per head: it factors out of the product
        return (a @ b.transpose(-1, -2)) * decay  # (B, H, C, C)
    return torch.einsum("bhic,bhjc,bhijc->bhij", a, b, decay)  # (B, H, C, C)
# --8<-- [end:within]


# --8<-- [start:chunked]
def chunked(q, k, v, g, beta, state=None, chunk_size: int = 64):
    """The rule chunk by chunk; the same outputs ``(B, H, T, d_v)`` and final state
    ``(B, H, d_k, d_v)`` as ``recurrent`` (same arguments), with a loop over
    ``ceil(T / chunk_size)`` chunks instead of ``T`` tokens.

    Inside a chunk that starts from the state ``S_0``, with ``c_i`` the summed ``g``
    up to position ``i`` and ``G_i = diag(exp(c_i))``, the written values ``u`` solve
    one lower-triangular system, ``(I + A) u = beta v - (beta G k) S_0`` with
    ``A[i, j] = beta_i k_i^T G_i G_j^-1 k_j`` for ``j < i``; then
    ``o_i = (G_i q_i)^T S_0 + sum_{j <= i} (q_i^T G_i G_j^-1 k_j) u_j`` and the state
    carried to the next chunk is ``G_C S_0 + sum_j G_C G_j^-1 k_j u_j^T``.
    """
    _check(q, k, v, g, beta, state, tokens=True)
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or (
        chunk_size < 1
    ):
        raise ValueError(f"chunk_size must be a positive int, got {chunk_size!r}")
    b, h, num_tokens, d_k = k.shape
    if state is None:
        state = q.new_zeros(b, h, d_k, v.shape[-1])  # (B, H, d_k, d_v)
    g = _per_channel(g, k)  # (B, H, T, 1 or d_k)
    outputs = []
    for start in range(0, num_tokens, chunk_size):
        part = slice(start, start + chunk_size)  # the last chunk may be shorter
        q_c, k_c, v_c = q[:, :, part], k[:, :, part], v[:, :, part]  # (B, H, C, d)
        beta_c = beta[:, :, part].unsqueeze(-1)  # (B, H, C, 1)
        log_decay = g[:, :, part].cumsum(dim=2)  # (B, H, C, 1 or d_k): c_i
        decay = decay_within(log_decay)  # (B, H, C, C) or (B, H, C, C, d_k)
        size = k_c.shape[2]
        eye = torch.eye(size, dtype=k.dtype, device=k.device)  # (C, C)
        system = eye + decayed_products(beta_c * k_c, k_c, decay).tril(-1)  # I + A
        inverse = torch.linalg.solve_triangular(
            system, eye, upper=False, unitriangular=True
        )  # (B, H, C, C): (I + A)^-1, lower triangular
        values = inverse @ (beta_c * v_c)  # (B, H, C, d_v): the part without S_0
        keys_read = inverse @ (beta_c * log_decay.exp() * k_c)  # (B, H, C, d_k)
        written = values - keys_read @ state  # (B, H, C, d_v): u
        scores = decayed_products(q_c, k_c, decay)  # (B, H, C, C), j <= i
        outputs.append((q_c * log_decay.exp()) @ state + scores @ written)
        total = log_decay[:, :, -1:]  # (B, H, 1, 1 or d_k): the whole chunk's decay
        carried = k_c * (total - log_decay).exp()  # (B, H, C, d_k): G_C G_j^-1 k_j
        state = (total.exp().transpose(-1, -2) * state  # (B, H, d_k, d_v): decayed
                 + carried.transpose(-1, -2) @ written)  # plus the chunk's writes
    return torch.cat(outputs, dim=2), state  # (B, H, T, d_v), (B, H, d_k, d_v)
# --8<-- [end:chunked]
