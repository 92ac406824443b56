# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""Causal self-attention over a batch.

Each token attends to itself and the tokens before it.

Shapes: ``B`` sequences in a batch, ``T`` tokens each, ``L = context_length``
(``T <= L``), ``d_in`` numbers per input token, ``d_out`` per output token.

    queries, keys, values = X W_query, X W_key, X W_value  (B, T, d_out)
    attn_scores  = queries keys^T                          (B, T, T)
    attn_scores[b, i, j] = -inf wherever j > i             (B, T, T)
    attn_weights = softmax(attn_scores / sqrt(d_out))      (B, T, T)
    attn_weights = dropout(attn_weights)                   (B, T, T)
    context_vec  = attn_weights values                     (B, T, d_out)

Row ``i`` of the weights sums to one over the keys ``j <= i``; the future gets weight
zero. Dropout acts in training mode only. So token ``i``'s output depends only on tokens
``0..i``, and a language model trained to predict token ``i + 1`` cannot peek at it.

Builds on ``checks.py`` of this package, imported relatively: copy it with this file,
under any package name (its API page offers the set as one download). MIT licence: keep
the first two lines of each file.
"""

from __future__ import annotations


import torch
from torch import nn

from .checks import check_dropout, check_flag, check_size


def _check_batch(
    x: object, d_in: int, context_length: int, weight: torch.Tensor
) -> None:
    """Reject anything but a (B, T, d_in) tensor with 1 <= T <= context_length,
    in the weights' dtype and on their device.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(
            f"x must be a torch.Tensor of shape (B, T, d_in), got {type(x).__name__}"
        )
    if x.dim() != 3:
        hint = ""
        if x.dim() == 2:
            hint = " (one sequence? add a batch dimension with x.unsqueeze(0))"
        raise ValueError(
            f"x must have shape (B, T, d_in) with d_in={d_in}, "
            f"got shape {tuple(x.shape)}{hint}"
        )
    if x.shape[-1] != d_in:
        raise ValueError(
            f"x must have d_in={d_in} numbers per token (last dimension), "
            f"got shape {tuple(x.shape)}"
        )
    if not x.is_floating_point():
        raise TypeError(f"x must hold floating-point numbers, got dtype {x.dtype}")
    if x.shape[1] == 0:
        raise ValueError(
            "x must hold at least one token per sequence, "
            f"got shape {tuple(x.shape)}"
        )
    if x.shape[1] > context_length:
        raise ValueError(
            f"x has {x.shape[1]} tokens per sequence, "
            f"more than context_length={context_length}; "
            f"pass at most {context_length} tokens "
            "or build the module with a larger context_length"
        )
    if x.dtype != weight.dtype:
        raise TypeError(
            f"x must have the module's dtype {weight.dtype}, got dtype {x.dtype} "
            "(use module.to(x.dtype))"
        )
    if x.device != weight.device:
        raise ValueError(
            f"x must be on the module's device {weight.device}, "
            f"got device {x.device}"
        )


class CausalAttention(nn.Module):
    r"""Single-head causal self-attention, with dropout on the attention weights.

    $$\mathrm{softmax}\Big(\frac{Q K^\top}{\sqrt{d_{out}}} + M\Big) V,
    \qquad M_{ij} = -\infty \text{ if } j > i, \; 0 \text{ otherwise}$$

    with $Q = X W_{query}$, $K = X W_{key}$, $V = X W_{value}$; dropout acts on
    the softmax output in training mode.

    Args:
        d_in: numbers per input token.
        d_out: numbers per output token (size of queries, keys, values).
        context_length: the longest sequence accepted; sets the mask's size.
        dropout: chance of zeroing an attention weight in training, in [0, 1).
        qkv_bias: add a bias to the query, key and value projections.

    Shapes:
        x: (B, T, d_in) with T <= context_length -> output: (B, T, d_out)

    The mask is a buffer named ``mask``: (context_length, context_length), bool,
    True above the diagonal (the future, hidden). A buffer follows
    ``.to(device)`` and is not a parameter. ``persistent=False``: it follows
    from context_length and is not learned, so it stays out of the state dict.
    """

    # --8<-- [start:methods]
    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        dropout: float,
        qkv_bias: bool = False,
    ) -> None:
        super().__init__()
        check_size("d_in", d_in)
        check_size("d_out", d_out)
        check_size("context_length", context_length)
        check_dropout(dropout)
        check_flag("qkv_bias", qkv_bias)
        self.d_in, self.d_out = d_in, d_out
        self.context_length = context_length
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        L = context_length
        future = torch.ones(L, L, dtype=torch.bool).triu(diagonal=1)  # (L, L)
        self.register_buffer("mask", future, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_batch(x, self.d_in, self.context_length, self.W_query.weight)
        num_tokens = x.shape[1]
        queries = self.W_query(x)  # (B, T, d_out)
        keys = self.W_key(x)  # (B, T, d_out)
        values = self.W_value(x)  # (B, T, d_out)
        attn_scores = queries @ keys.transpose(1, 2)  # (B, T, T)
        future = self.mask[:num_tokens, :num_tokens]  # (T, T), True = hidden
        attn_scores = attn_scores.masked_fill(future, -torch.inf)  # (B, T, T)
        d_k = keys.shape[-1]
        attn_weights = torch.softmax(attn_scores / d_k**0.5, -1)  # (B, T, T)
        attn_weights = self.dropout(attn_weights)  # (B, T, T)
        context_vec = attn_weights @ values  # (B, T, d_out)
        return context_vec
    # --8<-- [end:methods]
