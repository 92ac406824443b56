# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""Rotary position embeddings (RoPE): positions encoded by rotating queries and keys.

Shapes: ``B`` batch, ``H`` heads, ``T`` tokens, ``T_max`` the most positions
(``context_length``), ``d_h`` one head's width (even), ``d_h / 2`` rotation pairs.

Dimension ``i`` and dimension ``i + d_h / 2`` of a query or key form a pair, which is
turned by the angle ``m * theta_i`` at position ``m``, with
``theta_i = base ** (-2 i / d_h)``: fast turns for the first pairs, slow for the last.
Because a rotation by ``m`` and one by ``n`` leave ``q . k`` turned by ``m - n``, the
attention score of a query and a key depends on their distance, not on where they sit.

The pairing (halves, not neighbours) and the tables match Llama, Mistral and Qwen
checkpoints, so their weights load unchanged; ``neighbours_to_halves`` reorders the
queries and keys of checkpoints that pair neighbours (Llama 4, DeepSeek).

Scaled and partial rotary (``rope_scaling.py``) only change the table: other speeds
``theta_i`` (``inv_freq``), cosines and sines multiplied by an ``attention_factor``, or
fewer pairs than ``d_h / 2``, in which case only the first ``2 * len(inv_freq)``
dimensions of each head turn and the rest pass through unchanged.

Builds on ``checks.py`` of this package, imported relatively: copy it with this file,
under any package name (its API page offers the set as one download). MIT licence: keep
the first two lines of each file.
"""

from __future__ import annotations

import numbers

import torch
from torch import nn

from .checks import check_size


# --8<-- [start:tables]
def rope_tables(
    head_dim: int,
    context_length: int,
    base: float = 10000.0,
    *,
    inv_freq: torch.Tensor | None = None,
    attention_factor: float = 1.0,
    device: torch.device | str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Cosines and sines of every angle ``m * theta_i``: ``(T_max, d_rot)`` twice, in
    float32, each pair's angle written twice (once for each half).

    ``theta_i = base ** (-2 i / d_h)`` unless ``inv_freq`` ``(d_rot / 2,)`` gives the
    speeds (scaled or partial rotary); ``d_rot = d_h`` by default. Both tables are
    multiplied by ``attention_factor`` (YaRN's), which scales every score by its square.
    """
    check_size("head_dim", head_dim)
    check_size("context_length", context_length)
    if head_dim % 2 != 0:
        raise ValueError(
            "head_dim must be even for rotary embeddings (dimensions turn in pairs), "
            f"got head_dim={head_dim}"
        )
    if isinstance(base, bool) or not isinstance(base, numbers.Real) or base <= 1:
        raise ValueError(f"base must be a number greater than 1, got {base!r}")
    if isinstance(attention_factor, bool) or not isinstance(
        attention_factor, numbers.Real
    ) or not attention_factor > 0:
        raise ValueError(
            f"attention_factor must be a positive number, got {attention_factor!r}"
        )
    if inv_freq is None:
        pair = torch.arange(0, head_dim, 2, device=device).float()  # (d_h / 2,): 2i
        theta = 1.0 / (base ** (pair / head_dim))  # (d_h / 2,): one speed per pair
    else:
        if not isinstance(inv_freq, torch.Tensor) or inv_freq.dim() != 1 or not (
            1 <= inv_freq.numel() <= head_dim // 2
        ):
            raise ValueError(
                f"inv_freq must be a 1-d tensor of 1 to head_dim / 2 = {head_dim // 2} "
                f"speeds, got {getattr(inv_freq, 'shape', type(inv_freq).__name__)}"
            )
        theta = inv_freq.to(device=device, dtype=torch.float32)  # (d_rot / 2,)
    position = torch.arange(context_length, device=device).float()  # (T_max,)
    angle = torch.outer(position, theta)  # (T_max, d_rot / 2): m * theta_i
    angle = torch.cat((angle, angle), dim=-1)  # (T_max, d_rot): both halves of a pair
    return angle.cos() * attention_factor, angle.sin() * attention_factor
# --8<-- [end:tables]


def neighbours_to_halves(x: torch.Tensor) -> torch.Tensor:
    """``(x0, x1, x2, x3, ...) -> (x0, x2, ..., x1, x3, ...)`` on the last dimension.

    Checkpoints whose rotary pairs are neighbours ``(2i, 2i + 1)`` (Llama 4, DeepSeek)
    become checkpoints whose pairs are halves, which ``apply_rope`` turns. Reorder the
    queries and the keys alike and every score ``q . k`` stays the same."""
    return torch.cat((x[..., 0::2], x[..., 1::2]), dim=-1)  # (..., d_h)


# --8<-- [start:apply]
def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """``(x1, x2) -> (-x2, x1)`` on the two halves of the last dimension."""
    x1, x2 = x.chunk(2, dim=-1)  # (..., d_h / 2) twice
    return torch.cat((-x2, x1), dim=-1)  # (..., d_h)


def apply_rope(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, start: int = 0
) -> torch.Tensor:
    """Turn each pair of ``x`` ``(B, H, T, d_h)`` by the angle of its position,
    ``start..start + T - 1`` (with a KV cache, ``start`` is the cache's length).

    Tables narrower than the head (``d_rot < d_h``, partial rotary) turn the first
    ``d_rot`` dimensions and pass the others through."""
    if not isinstance(x, torch.Tensor) or x.dim() != 4:
        raise ValueError(
            "x must be a tensor of shape (B, H, T, d_h), got "
            f"{tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__}"
        )
    if x.shape[-1] < cos.shape[-1]:
        raise ValueError(
            f"x has head width {x.shape[-1]} but the tables turn {cos.shape[-1]} "
            "dimensions"
        )
    if isinstance(start, bool) or not isinstance(start, int) or start < 0:
        raise ValueError(f"start must be an int >= 0, got {start!r}")
    end = start + x.shape[2]
    if end > cos.shape[0]:
        raise ValueError(
            f"positions {start}..{end - 1} go beyond the context: the tables hold "
            f"positions 0..{cos.shape[0] - 1} (context_length={cos.shape[0]})"
        )
    cos = cos[start:end].to(x.dtype)  # (T, d_rot), broadcast over B and H
    sin = sin[start:end].to(x.dtype)  # (T, d_rot)
    rotary_dim = cos.shape[-1]  # d_rot: d_h, or fewer with partial rotary
    if rotary_dim == x.shape[-1]:
        return x * cos + rotate_half(x) * sin  # (B, H, T, d_h)
    turned, passed = x[..., :rotary_dim], x[..., rotary_dim:]  # d_rot and the rest
    turned = turned * cos + rotate_half(turned) * sin  # (B, H, T, d_rot)
    return torch.cat((turned, passed), dim=-1)  # (B, H, T, d_h)
# --8<-- [end:apply]


# --8<-- [start:class]
class RotaryEmbedding(nn.Module):
    r"""Rotary position embedding for heads of width ``head_dim``.

    For the pair $(x_i, x_{i + d_h/2})$ at position $m$, with
    $\theta_i = \text{base}^{-2i/d_h}$:

    $$\begin{pmatrix} x_i' \\ x_{i+d_h/2}' \end{pmatrix} =
    \begin{pmatrix} \cos m\theta_i & -\sin m\theta_i \\
    \sin m\theta_i & \cos m\theta_i \end{pmatrix}
    \begin{pmatrix} x_i \\ x_{i+d_h/2} \end{pmatrix}$$

    Args:
        head_dim: ``d_h``, even.
        context_length: ``T_max``, the most positions.
        base: the base of the angles (10,000 in Llama 2; larger in newer models).
        inv_freq: the speeds ``theta_i`` ``(d_rot / 2,)``, when not
            ``base ** (-2i / d_h)``: scaled angles, or partial rotary (``d_rot < d_h``)
            as made by ``rope_scaling.rope_frequencies``.
        attention_factor: multiplies the tables (YaRN's attention factor).

    Shapes:
        ``forward(x, start=0)``: ``x`` ``(B, H, T, d_h)`` at positions
        ``start..start + T - 1``; the output has the same shape.
    """

    def __init__(
        self,
        head_dim: int,
        context_length: int,
        base: float = 10000.0,
        *,
        inv_freq: torch.Tensor | None = None,
        attention_factor: float = 1.0,
    ):
        super().__init__()
        cos, sin = rope_tables(
            head_dim, context_length, base,
            inv_freq=inv_freq, attention_factor=attention_factor,
        )  # (T_max, d_rot) twice
        self.register_buffer("cos", cos, persistent=False)  # follows from the args
        self.register_buffer("sin", sin, persistent=False)
        self.head_dim = head_dim
        self.base = base

    def forward(self, x: torch.Tensor, start: int = 0) -> torch.Tensor:
        width = x.shape[-1] if isinstance(x, torch.Tensor) and x.dim() == 4 else None
        if width is not None and width != self.head_dim:
            raise ValueError(
                f"x has head width {x.shape[-1]} but the tables were made for "
                f"head_dim={self.head_dim}"
            )
        return apply_rope(x, self.cos, self.sin, start)  # (B, H, T, d_h)

    def extra_repr(self) -> str:
        rotary_dim, context_length = self.cos.shape[1], self.cos.shape[0]
        return (
            f"head_dim={self.head_dim}, {rotary_dim=}, {context_length=}, "
            f"base={self.base}"
        )


# --8<-- [end:class]
