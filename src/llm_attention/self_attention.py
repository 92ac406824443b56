# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""Self-attention with trainable weights.

Every token asks a query, offers a key and carries a value.

Shapes: ``T`` tokens, each a vector of ``d_in`` numbers; queries, keys and values have
``d_out`` numbers each (``d_k = d_out``, the width of the keys).

    queries      = X W_query                          (T, d_out)
    keys         = X W_key                            (T, d_out)
    values       = X W_value                          (T, d_out)
    attn_scores  = queries keys^T                     (T, T)
    attn_weights = softmax(attn_scores / sqrt(d_k))   (T, T)   each row sums to one
    context_vec  = attn_weights values                (T, d_out)

Two classes compute the same thing. ``SelfAttentionV1`` holds the three matrices as
plain ``nn.Parameter`` tensors of shape ``(d_in, d_out)``; ``SelfAttentionV2`` uses
``nn.Linear`` layers, which store their weight as ``(d_out, d_in)``, start from a better
random scale and can add a bias. Both take ONE sequence ``(T, d_in)``; batches come with
causal attention (``causal.py``).

In the book these classes are ``SelfAttention_v1`` and ``SelfAttention_v2``.

Builds on ``checks.py`` of this package, imported relatively: copy it with this file,
under any package name (its API page offers the set as one download). MIT licence: keep
the first two lines of each file.
"""

from __future__ import annotations

import torch
from torch import nn

from .checks import check_size


def _check_sequence(x: object, d_in: int, dtype: torch.dtype) -> None:
    """The input must be one sequence ``(T, d_in)`` of floats, in the weights' dtype."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(
            f"x must be a torch.Tensor of shape (T, d_in={d_in}), "
            f"got {type(x).__name__}"
        )
    if not x.is_floating_point():
        raise TypeError(f"x must hold floating-point numbers, got dtype {x.dtype}")
    if x.dim() == 3:
        raise ValueError(
            f"x must be one sequence of shape (T, d_in={d_in}), "
            f"got a batch of shape {tuple(x.shape)}; "
            "pass one sequence at a time (CausalAttention takes batches)"
        )
    if x.dim() != 2:
        raise ValueError(
            f"x must be one sequence of shape (T, d_in={d_in}), "
            f"got shape {tuple(x.shape)}"
        )
    if x.shape[1] != d_in:
        raise ValueError(
            f"x must have d_in={d_in} numbers per token, got shape {tuple(x.shape)}"
        )
    if x.shape[0] == 0:
        raise ValueError(f"x must have at least one token, got shape {tuple(x.shape)}")
    if x.dtype != dtype:
        raise TypeError(
            f"x must have the dtype of the weights, {dtype}, got {x.dtype}; "
            "convert one of them"
        )


# --8<-- [start:v1]
class SelfAttentionV1(nn.Module):
    """Self-attention with its three weight matrices held as ``nn.Parameter``s.

    ``context_vec = softmax(Q K^T / sqrt(d_out)) V``, where
    ``Q = x @ W_query``, ``K = x @ W_key`` and ``V = x @ W_value``.

    Args:
        d_in: numbers per input token.
        d_out: numbers per query, key, value and output vector.

    Shapes: ``x`` is ``(T, d_in)``, the output ``(T, d_out)``. ``W_query``,
    ``W_key`` and ``W_value`` are ``(d_in, d_out)``, drawn in that order from
    ``torch.rand`` (uniform on [0, 1)).
    """

    def __init__(self, d_in: int, d_out: int) -> None:
        super().__init__()
        check_size("d_in", d_in)
        check_size("d_out", d_out)
        self.d_in, self.d_out = d_in, d_out
        self.W_query = nn.Parameter(torch.rand(d_in, d_out))  # (d_in, d_out)
        self.W_key = nn.Parameter(torch.rand(d_in, d_out))  # (d_in, d_out)
        self.W_value = nn.Parameter(torch.rand(d_in, d_out))  # (d_in, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_sequence(x, self.d_in, self.W_query.dtype)
        queries = x @ self.W_query  # (T, d_in) @ (d_in, d_out) -> (T, d_out)
        keys = x @ self.W_key  # (T, d_out)
        values = x @ self.W_value  # (T, d_out)
        attn_scores = queries @ keys.T  # (T, d_out) @ (d_out, T) -> (T, T)
        d_k = keys.shape[-1]
        # (T, T), each row sums to 1:
        attn_weights = torch.softmax(attn_scores / d_k**0.5, dim=-1)
        context_vec = attn_weights @ values  # (T, T) @ (T, d_out) -> (T, d_out)
        return context_vec
# --8<-- [end:v1]


# --8<-- [start:v2]
class SelfAttentionV2(nn.Module):
    """Self-attention with ``nn.Linear`` layers: ``SelfAttentionV1``'s maths.

    ``context_vec = softmax(Q K^T / sqrt(d_out)) V``, where
    ``Q = W_query(x)``, ``K = W_key(x)`` and ``V = W_value(x)``;
    each ``nn.Linear`` computes ``x @ weight.T (+ bias)``.

    Args:
        d_in: numbers per input token.
        d_out: numbers per query, key, value and output vector.
        qkv_bias: whether the three projections add a learned bias (a bool).

    Shapes: ``x`` is ``(T, d_in)``, the output ``(T, d_out)``. Each layer's
    ``weight`` is ``(d_out, d_in)``, the transpose of ``SelfAttentionV1``'s
    matrices; the layers are created in the order W_query, W_key, W_value.
    """

    def __init__(self, d_in: int, d_out: int, qkv_bias: bool = False) -> None:
        super().__init__()
        check_size("d_in", d_in)
        check_size("d_out", d_out)
        if not isinstance(qkv_bias, bool):
            got = f"{qkv_bias!r} ({type(qkv_bias).__name__})"
            raise TypeError(f"qkv_bias must be a bool, got {got}")
        self.d_in, self.d_out = d_in, d_out
        # Each weight is (d_out, d_in):
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)  # (d_out, d_in)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)  # (d_out, d_in)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)  # (d_out, d_in)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_sequence(x, self.d_in, self.W_query.weight.dtype)
        queries = self.W_query(x)  # (T, d_in) -> (T, d_out)
        keys = self.W_key(x)  # (T, d_out)
        values = self.W_value(x)  # (T, d_out)
        attn_scores = queries @ keys.T  # (T, d_out) @ (d_out, T) -> (T, T)
        d_k = keys.shape[-1]
        # (T, T), each row sums to 1:
        attn_weights = torch.softmax(attn_scores / d_k**0.5, dim=-1)
        context_vec = attn_weights @ values  # (T, T) @ (T, d_out) -> (T, d_out)
        return context_vec
# --8<-- [end:v2]
