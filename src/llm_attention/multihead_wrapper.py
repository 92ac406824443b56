# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""Multi-head attention the plain way: several causal attention heads side by side.

Shapes: ``B`` sequences in a batch, ``T`` tokens each (``T <= context_length``),
``d_in`` numbers per input token, ``d_out`` per token and head, ``H = num_heads``.

    head_h(X) = CausalAttention_h(X)                       (B, T, d_out)
    output    = concat(head_1(X), ..., head_H(X), dim=-1)  (B, T, H * d_out)

Each head has its own weights.

The heads run one after the other, each with its own projections and attention, and
their outputs are concatenated. ``multihead.py`` does the same work with one projection
per role split into heads, plus an output projection.

Builds on ``causal.py`` and ``checks.py`` of this package, imported relatively: copy
them with this file, under any package name (its API page offers the set as one
download). MIT licence: keep the first two lines of each file.
"""

from __future__ import annotations

import torch
from torch import nn

from .causal import CausalAttention
from .checks import check_size


class MultiHeadAttentionWrapper(nn.Module):
    r"""``num_heads`` independent ``CausalAttention`` heads, outputs concatenated.

    $$\mathrm{head}_1(X) \,\|\, \cdots \,\|\, \mathrm{head}_H(X)$$

    Args:
        d_in: numbers per input token.
        d_out: numbers per output token of EACH head (the book's convention).
        context_length: the longest sequence accepted.
        dropout: chance of zeroing an attention weight in training, in [0, 1).
        num_heads: how many heads, each with its own W_query, W_key, W_value.
        qkv_bias: add a bias to the query, key and value projections.

    Shapes:
        x: (B, T, d_in), T <= context_length -> output: (B, T, num_heads * d_out)
    """

    # --8<-- [start:methods]
    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        dropout: float,
        num_heads: int,
        qkv_bias: bool = False,
    ) -> None:
        super().__init__()
        check_size("num_heads", num_heads)
        self.heads = nn.ModuleList(
            [
                CausalAttention(d_in, d_out, context_length, dropout, qkv_bias)
                for _ in range(num_heads)
            ]
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        outputs = [head(x) for head in self.heads]  # H x (B, T, d_out)
        return torch.cat(outputs, dim=-1)  # (B, T, H * d_out)
    # --8<-- [end:methods]
