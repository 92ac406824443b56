# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""The recall test of the linear-attention pages: write ``n`` pairs into a state, read
every key back, and measure how far each read lands from the value written with it.

``pairs`` draws the data (unit keys, and for values the ``n`` one-hot vectors, so that
a read shows directly how much of each stored value returns); ``recall`` writes them as
a plain sum of outer products and with the delta rule; ``errors`` measures the reads.
The Mamba-2 page writes the same pairs with its own rule. Float64 throughout, so that
an exact read shows as rounding. Not a model module: the pages' experiment.
"""

from __future__ import annotations

import torch

from llm_attention.delta_rule import recurrent


# --8<-- [start:recall]
def pairs(num_writes, d_k=8, seed=0):
    """The pairs to write: unit keys (n, d_k) and the one-hot values (n, n)."""
    gen = torch.Generator().manual_seed(seed)
    keys = torch.nn.functional.normalize(
        torch.randn(num_writes, d_k, generator=gen, dtype=torch.float64), dim=-1)
    return keys, torch.eye(num_writes, dtype=torch.float64)  # value j: the one-hot e_j


def recall(num_writes, d_k=8, seed=0):
    """What reading each key gives back, (n, n): from the plain sum, the delta rule."""
    keys, values = pairs(num_writes, d_k, seed)
    plain = keys @ (keys.T @ values)  # reads of the sum of outer products
    ones, zeros = (torch.ones(1, 1, num_writes, dtype=torch.float64),
                   torch.zeros(1, 1, num_writes, dtype=torch.float64))
    _, state = recurrent(keys[None, None], keys[None, None], values[None, None],
                         zeros, ones)  # beta = 1, no decay
    return plain, keys @ state[0, 0]


def errors(read):
    return (read - torch.eye(len(read), dtype=read.dtype)).norm(dim=1)  # per key
# --8<-- [end:recall]
