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
checkpoints, so their weights load unchanged.

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
    device: torch.device | str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Cosines and sines of every angle ``m * theta_i``: ``(T_max, d_h)`` twice, in
    float32, each pair's angle written twice (once for each half)."""
    check_size("head_dim", head_dim)
    check_size("context_length", context_length)
    if head_dim % 2 != 0:
        raise ValueError(
            "head_dim must be even for rotary embeddings (dimensions turn in pairs), "
            f"got head_dim={head_dim}"
        )
    if isinstance(base, bool) or not isinstance(base, numbers.Real) or base <= 1:
        raise ValueError(f"base must be a number greater than 1, got {base!r}")
    pair = torch.arange(0, head_dim, 2, device=device).float()  # (d_h / 2,): 2i
    theta = 1.0 / (base ** (pair / head_dim))  # (d_h / 2,): one speed per pair
    position = torch.arange(context_length, device=device).float()  # (T_max,)
    angle = torch.outer(position, theta)  # (T_max, d_h / 2): m * theta_i
    angle = torch.cat((angle, angle), dim=-1)  # (T_max, d_h): both halves of a pair
    return angle.cos(), angle.sin()  # (T_max, d_h) twice
# --8<-- [end:tables]


# --8<-- [start:apply]
def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """``(x1, x2) -> (-x2, x1)`` on the two halves of the last dimension."""
    x1, x2 = x.chunk(2, dim=-1)  # (..., d_h / 2) twice
    return torch.cat((-x2, x1), dim=-1)  # (..., d_h)


def apply_rope(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, start: int = 0
) -> torch.Tensor:
    """Turn each pair of ``x`` ``(B, H, T, d_h)`` by the angle of its position,
    ``start..start + T - 1`` (with a KV cache, ``start`` is the cache's length)."""
    if not isinstance(x, torch.Tensor) or x.dim() != 4:
        raise ValueError(
            "x must be a tensor of shape (B, H, T, d_h), got "
            f"{tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__}"
        )
    if x.shape[-1] != cos.shape[-1]:
        raise ValueError(
            f"x has head width {x.shape[-1]} but the tables were made for "
            f"head_dim={cos.shape[-1]}"
        )
    if isinstance(start, bool) or not isinstance(start, int) or start < 0:
        raise ValueError(f"start must be an int >= 0, got {start!r}")
    end = start + x.shape[2]
    if end > cos.shape[0]:
        raise ValueError(
            f"positions {start}..{end - 1} go beyond the context: the tables hold "
            f"positions 0..{cos.shape[0] - 1} (context_length={cos.shape[0]})"
        )
    cos = cos[start:end].to(x.dtype)  # (T, d_h), broadcast over B and H
    sin = sin[start:end].to(x.dtype)  # (T, d_h)
    return x * cos + rotate_half(x) * sin  # (B, H, T, d_h)
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

    Shapes:
        ``forward(x, start=0)``: ``x`` ``(B, H, T, d_h)`` at positions
        ``start..start + T - 1``; the output has the same shape.
    """

    def __init__(self, head_dim: int, context_length: int, base: float = 10000.0):
        super().__init__()
        cos, sin = rope_tables(head_dim, context_length, base)  # (T_max, d_h) twice
        self.register_buffer("cos", cos, persistent=False)  # follows from the args
        self.register_buffer("sin", sin, persistent=False)
        self.base = base

    def forward(self, x: torch.Tensor, start: int = 0) -> torch.Tensor:
        return apply_rope(x, self.cos, self.sin, start)  # (B, H, T, d_h)

    def extra_repr(self) -> str:
        head_dim, context_length = self.cos.shape[1], self.cos.shape[0]
        return f"{head_dim=}, {context_length=}, base={self.base}"


# --8<-- [end:class]
