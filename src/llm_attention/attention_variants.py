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

      1 + attn_scale * ln(1 + floor((p + offset) / floor_scale))

  which is 1 for the first positions and then grows with the log of the position, in
  steps: sharper attention far into a long text, where a softmax over many keys would
  otherwise flatten. Llama 4 counts from 1 (``offset`` 1: the scale first grows at
  ``p = floor_scale - 1``); Mistral 4, which applies it to latent attention with
  ``floor_scale`` its YaRN ``original_max_position_embeddings``, from 0 (``offset`` 0).

``content_positions`` counts each row's positions from its first real token, so that
a position-dependent scale gives a left-padded row what its prompt alone gets.

The output gate of Qwen3-Next, Llama 4's chunks and positionless layers, Gemma 4's
values and shared keys and the rest live in ``modern.py``.

``scaled_dot_product_attention`` has no soft-capping and no sinks: ``ModernAttention``
refuses its fast path with either (its explicit path is the one tested).

Needs only torch. MIT licence: keep the first two lines of each file.
"""

from __future__ import annotations

import numbers

import torch
from torch import nn


# --8<-- [start:softcap]
def soft_cap(scores: torch.Tensor, cap: float) -> torch.Tensor:
    """``cap * tanh(scores / cap)``: about ``scores`` near 0, never beyond ``cap``."""
    return cap * torch.tanh(scores / cap)
# --8<-- [end:softcap]


# --8<-- [start:temperature]
def temperature_scales(
    positions: torch.Tensor, floor_scale: float, attn_scale: float, offset: float = 1.0
) -> torch.Tensor:
    """The query scale at each position, ``positions`` of any shape (``(T,)``, or
    ``(B, T)`` when each row counts its own):
    ``1 + attn_scale * ln(1 + floor((p + offset) / floor_scale))``, float32, the same
    shape. ``offset`` 1 is Llama 4's rule, 0 Mistral 4's."""
    steps = torch.floor((positions.float() + offset) / floor_scale)  # 0, 0, .., 1, ..
    return torch.log1p(steps) * attn_scale + 1.0  # the shape of positions
# --8<-- [end:temperature]


def check_temperature_tuning(tuning: object) -> None:
    """``(floor_scale, attn_scale)`` or ``(floor_scale, attn_scale, offset)``: two
    positive numbers and, optionally, the offset added to the position (1 by
    default: Llama 4's; 0: Mistral 4's)."""
    values = tuning if isinstance(tuning, tuple | list) else ()
    numbers_ok = all(
        isinstance(v, numbers.Real) and not isinstance(v, bool) for v in values
    )
    if len(values) not in (2, 3) or not numbers_ok or not (
        values[0] > 0 and values[1] > 0 and (len(values) == 2 or values[2] >= 0)
    ):
        raise ValueError(
            "temperature_tuning must be None or (floor_scale, attn_scale), two "
            "positive numbers, or (floor_scale, attn_scale, offset) with an offset "
            f">= 0, got {tuning!r}"
        )


def content_positions(
    num_tokens: int,
    start: int = 0,
    padding_mask: torch.Tensor | None = None,
    held_padding: torch.Tensor | None = None,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Each new token's position counted from its sequence's first real token, so
    that a left-padded row gets the positions of its prompt alone: ``(B, T)`` long, or
    ``(1, T)`` (``start..``) when nothing is padded.

    ``padding_mask`` ``(B, T)`` marks the new tokens (True = real), ``held_padding``
    ``(B, T_held)`` the tokens a cache holds before them. A left padding token gets
    position 0 (its output is never read)."""
    if padding_mask is None and held_padding is None:
        return torch.arange(start, start + num_tokens, device=device)[None]  # (1, T)
    batch = (padding_mask if padding_mask is not None else held_padding).shape[0]
    real = padding_mask
    if real is None:
        real = torch.ones(batch, num_tokens, dtype=torch.bool, device=device)  # (B, T)
    before = torch.full((batch, 1), start, dtype=torch.long, device=real.device)
    if held_padding is not None:  # the real tokens already held
        before = held_padding.long().sum(-1, keepdim=True)  # (B, 1)
    return (before + real.long().cumsum(-1) - 1).clamp(min=0)  # (B, T)


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
    ``mask_bool`` (True = hidden) broadcasting to ``(B, 1, T, T_k)``, or None when no
    key is hidden from any query; returns ``(B, H, T, d_v)``. A query with no key left
    gets zeros (or, with a sink, all its weight on the sink: zeros too).
    """
    b, num_heads, num_tokens, head_dim = queries.shape
    num_kv_heads = keys.shape[1]
    group = num_heads // num_kv_heads  # G query heads per key/value head
    # (B, H, T, d_h) -> (B, H_kv, G T, d_h): a group's heads as rows of queries for
    # its one key/value head, so that the keys are read where they lie, never copied
    rows = queries.reshape(b, num_kv_heads, group * num_tokens, head_dim)
    attn_scores = rows @ keys.transpose(-2, -1) * scale  # (B, H_kv, G T, T_k)
    attn_scores = attn_scores.view(b, num_kv_heads, group, num_tokens, -1)
    if softcap is not None:  # before the mask, so -inf stays -inf
        attn_scores = soft_cap(attn_scores, softcap)  # (B, H_kv, G, T, T_k)
    if mask_bool is not None and mask_bool.dim() == 4:  # (B, 1, T, T_k)
        mask_bool = mask_bool.unsqueeze(2)  # (B, 1, 1, T, T_k): shared by the G heads
    if mask_bool is not None:
        attn_scores = attn_scores.masked_fill(mask_bool, -torch.inf)
    if sinks is None:
        attn_weights = torch.softmax(attn_scores, dim=-1)  # (B, H_kv, G, T, T_k)
    else:  # one more column per row: the head's sink logit
        sink = sinks.view(1, num_kv_heads, group, 1, 1).to(attn_scores.dtype)
        sink = sink.expand(b, -1, -1, num_tokens, 1)  # (B, H_kv, G, T, 1)
        with_sink = torch.cat((attn_scores, sink), dim=-1)  # (B, H_kv, G, T, T_k + 1)
        attn_weights = torch.softmax(with_sink, dim=-1)[..., :-1]  # drop the sink
    if mask_bool is not None:  # a row of NaN -> zeros
        attn_weights = attn_weights.masked_fill(mask_bool, 0.0)
    attn_weights = dropout(attn_weights)  # (B, H_kv, G, T, T_k)
    attn_weights = attn_weights.reshape(b, num_kv_heads, group * num_tokens, -1)
    context_vec = attn_weights @ values  # (B, H_kv, G T, d_v)
    return context_vec.view(b, num_heads, num_tokens, -1)  # (B, H, T, d_v)
# --8<-- [end:explicit]
