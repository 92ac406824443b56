# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""The small, precise ways 2026 families change attention, each a few lines.

Shapes: ``B`` batch, ``H`` query heads, ``H_kv`` key/value heads, ``G = H // H_kv``,
``T`` queries, ``T_k`` keys, ``d_h`` one head's width.

- **Soft-capping** (Gemma 2): ``s -> cap * tanh(s / cap)`` squashes every score into
  ``(-cap, cap)`` before the mask and the softmax, so no score can run away.
- **Attention sinks** (gpt-oss): one learned logit ``s_h`` per head joins every row
  of scores as an extra column; the softmax runs over keys and sink, and the sink's
  share is dropped. The weights of a row then add up to less than 1: a head may attend
  to nothing.

      w_j = exp(a_j) / (exp(s_h) + sum_k exp(a_k))

- **The (1 + w) RMSNorm** (Gemma 3, Qwen3-Next): the norm's weight is stored as an
  offset from 1 and starts at zero.
- **The score scale**: ``scale`` replaces ``1 / sqrt(d_h)`` (Gemma's
  ``query_pre_attn_scalar ** -0.5``; 1 in Gemma 4).
- **Temperature tuning** (Llama 4's layers without rotary positions): the query at
  position ``p`` is multiplied by

      1 + attn_scale * ln(1 + floor((p + 1) / floor_scale))

  which is 1 for the first ``floor_scale - 1`` positions and then grows with the log
  of the position, in steps: sharper attention far into a long text, where a softmax
  over many keys would otherwise flatten.

The output gate of Qwen3-Next, Llama 4's chunks and positionless layers, Gemma 4's
values and shared keys and the rest live in ``modern.py``.

``scaled_dot_product_attention`` has no soft-capping and no sinks: ``ModernAttention``
refuses its fast path with either (its explicit path is the one tested).

Needs only torch. MIT licence: keep the first two lines of each file.
"""

from __future__ import annotations

import torch
from torch import nn


# --8<-- [start:softcap]
def soft_cap(scores: torch.Tensor, cap: float) -> torch.Tensor:
    """``cap * tanh(scores / cap)``: about ``scores`` near 0, never beyond ``cap``."""
    return cap * torch.tanh(scores / cap)
# --8<-- [end:softcap]


# --8<-- [start:temperature]
def temperature_scales(
    positions: torch.Tensor, floor_scale: float, attn_scale: float
) -> torch.Tensor:
    """Llama 4's query scale at each position ``(T,)``:
    ``1 + attn_scale * ln(1 + floor((p + 1) / floor_scale))``, ``(T,)`` float32."""
    steps = torch.floor((positions.float() + 1.0) / floor_scale)  # (T,): 0, 0, .., 1
    return torch.log1p(steps) * attn_scale + 1.0  # (T,)
# --8<-- [end:temperature]


# --8<-- [start:norm]
class UnitOffsetRMSNorm(nn.Module):
    r"""RMSNorm whose weight is stored as an offset from 1 (Gemma, Qwen3-Next).

    $$y = \frac{x}{\sqrt{\mathrm{mean}(x^2) + \epsilon}} \odot (1 + w)$$

    computed in float32 and returned in ``x``'s dtype. ``w`` starts at zero.

    Shapes: ``x`` ``(..., dim)``, output the same.
    """

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))  # (dim,): the offset w

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return (normed * (1.0 + self.weight.float())).type_as(x)  # (..., dim)

    def extra_repr(self) -> str:
        return f"{self.weight.shape[0]}, eps={self.eps}"
# --8<-- [end:norm]


# --8<-- [start:explicit]
def variant_attention_explicit(
    queries, keys, values, mask_bool, dropout, *, scale, softcap=None, sinks=None
):
    """``softmax(cap(Q K^T * scale) + M) V`` with each key/value head shared by ``G``
    query heads, an optional soft cap and optional sinks ``(H,)``.

    ``queries`` ``(B, H, T, d_h)``, ``keys`` ``(B, H_kv, T_k, d_h)``, ``values``
    ``(B, H_kv, T_k, d_v)`` (``d_v`` may differ from ``d_h``: latent attention),
    ``mask_bool`` (True = hidden) broadcasting to ``(B, 1, T, T_k)``; returns
    ``(B, H, T, d_v)``. A query with no key left gets zeros (or, with a sink, all its
    weight on the sink: zeros too).
    """
    b, num_heads, num_tokens, head_dim = queries.shape
    num_kv_heads = keys.shape[1]
    group = num_heads // num_kv_heads  # G query heads per key/value head
    queries = queries.view(b, num_kv_heads, group, num_tokens, head_dim)
    keys = keys.unsqueeze(2)  # (B, H_kv, 1, T_k, d_h): broadcast over G
    values = values.unsqueeze(2)  # (B, H_kv, 1, T_k, d_h)
    attn_scores = queries @ keys.transpose(-2, -1) * scale  # (B, H_kv, G, T, T_k)
    if softcap is not None:  # before the mask, so -inf stays -inf
        attn_scores = soft_cap(attn_scores, softcap)  # (B, H_kv, G, T, T_k)
    if mask_bool.dim() == 4:  # (B, 1, T, T_k) -> (B, 1, 1, T, T_k)
        mask_bool = mask_bool.unsqueeze(2)
    attn_scores = attn_scores.masked_fill(mask_bool, -torch.inf)  # (B, H_kv, G, T, T_k)
    if sinks is None:
        attn_weights = torch.softmax(attn_scores, dim=-1)  # (B, H_kv, G, T, T_k)
    else:  # one more column per row: the head's sink logit
        sink = sinks.view(1, num_kv_heads, group, 1, 1).to(attn_scores.dtype)
        sink = sink.expand(b, -1, -1, num_tokens, 1)  # (B, H_kv, G, T, 1)
        with_sink = torch.cat((attn_scores, sink), dim=-1)  # (B, H_kv, G, T, T_k + 1)
        attn_weights = torch.softmax(with_sink, dim=-1)[..., :-1]  # drop the sink
    attn_weights = attn_weights.masked_fill(mask_bool, 0.0)  # a row of NaN -> zeros
    attn_weights = dropout(attn_weights)  # (B, H_kv, G, T, T_k)
    context_vec = attn_weights @ values  # (B, H_kv, G, T, d_v)
    return context_vec.view(b, num_heads, num_tokens, -1)  # (B, H, T, d_v)
# --8<-- [end:explicit]
