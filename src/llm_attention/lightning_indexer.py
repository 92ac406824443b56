# SPDX-License-Identifier: MIT
# Copyright (c) 2026 The llm-attention authors
"""The lightning indexer of DeepSeek Sparse Attention (DeepSeek-V3.2): a cheap score
for every (query, earlier token) pair, and the top-k tokens each query keeps.

Shapes: ``B`` batch, ``T`` new tokens (queries), ``T_k`` tokens held (keys),
``d_in`` input width, ``d_q = q_lora_rank`` (the query's bottleneck, shared with the
latent attention), ``H_I`` indexer heads, ``d_I`` the width of an indexer head,
``d_r`` its first dimensions that turn, ``k`` tokens kept per query.

    q_{t,j} = RoPE(W_query (norm(x_t W_query_down)))_j   (B, T, H_I, d_I)
    k_s     = RoPE(LayerNorm(x_s W_key))                 (B, T_k, d_I)   one per token
    w_{t,j} = (x_t W_head_weights)_j / sqrt(H_I)         (B, T, H_I)
    I_{t,s} = sum_j w_{t,j} ReLU(q_{t,j} . k_s / sqrt(d_I))   (B, T, T_k)

Each query keeps the ``k`` tokens of largest ``I_{t,s}`` among those it may see
(``top_k_keys``); the latent attention then runs over those alone. The indexer's heads
are few and narrow and its key is one vector per token for all of them, so scoring every
pair costs far less than attending over it; it is still one score per pair, which grows
with the square of the length.

Rotary positions turn the first ``d_r`` dimensions of each indexer query and key, paired
as halves ``(i, i + d_r / 2)`` (the layout of ``rope.py``), while DeepSeek's latent
attention pairs neighbours ``(2i, 2i + 1)``; the same angles serve both. GLM-5's
indexer pairs neighbours too (``rope_interleave=True``).

The selection is not differentiable: the scores run without gradients, as in
DeepSeek's and transformers' code (DeepSeek trains the indexer with a loss of its own).

Builds on ``rope.py`` and ``checks.py`` of this package, imported relatively: copy them
with this file, under any package name (its API page offers the set as one download).
MIT licence: keep the first two lines of each file.
"""

from __future__ import annotations

import numbers

import torch
from torch import nn

from .checks import check_flag, check_size
from .rope import apply_rope, neighbours_to_halves

HF_NAMES = {  # transformers' DeepseekV32Indexer name -> ours
    "wq_b": "W_query",
    "wk": "W_key",
    "k_norm": "key_norm",
    "weights_proj": "W_head_weights",
}


# --8<-- [start:class]
class LightningIndexer(nn.Module):
    r"""Scores every token a query may attend to, with a few small ReLU heads.

    $$I_{t,s} = \sum_{j=1}^{H_I} w_{t,j}\,
        \mathrm{ReLU}\!\Big(\frac{q_{t,j} \cdot k_s}{\sqrt{d_I}}\Big)$$

    with ``w_{t,j}`` a weight per head computed from the query's token (divided by
    ``sqrt(H_I)``), ``q_{t,j}`` head ``j``'s query, made from the latent attention's
    query bottleneck, and ``k_s`` one key per token, shared by every head, after a
    LayerNorm. Rotary angles turn the first ``rope_dim`` dimensions of both, as halves.

    Args:
        d_in: width of each input token vector.
        q_lora_rank: ``d_q``, the width of the query bottleneck it reads.
        num_heads: ``H_I``.
        head_dim: ``d_I``.
        rope_dim: ``d_r``, the dimensions that turn (even, at most ``head_dim``).
        norm_eps: the LayerNorm's epsilon.
        rope_interleave: the turned dimensions pair neighbours ``(2i, 2i + 1)``
            (GLM-5's indexer) rather than halves (DeepSeek-V3.2's).

    Shapes:
        ``keys(x, cos, sin, start)``: ``x`` ``(B, T, d_in)`` -> ``(B, T, d_I)``.
        ``scores(x, query_latent, keys, cos, sin, start)``: ``query_latent``
        ``(B, T, d_q)``, ``keys`` ``(B, T_k, d_I)`` -> ``(B, T, T_k)`` in float32.
        ``cos``, ``sin``: rotary tables ``(T_max, d_r)`` (``rope.rope_tables``).
    """

    def __init__(
        self,
        d_in: int,
        q_lora_rank: int,
        num_heads: int,
        head_dim: int,
        rope_dim: int,
        *,
        norm_eps: float = 1e-6,
        rope_interleave: bool = False,
    ) -> None:
        sizes = dict(d_in=d_in, q_lora_rank=q_lora_rank, num_heads=num_heads,
                     head_dim=head_dim, rope_dim=rope_dim)
        for name, value in sizes.items():
            check_size(name, value)
        if rope_dim % 2 or rope_dim > head_dim:
            raise ValueError(
                f"rope_dim must be even and at most head_dim={head_dim} (its first "
                f"dimensions turn in pairs), got {rope_dim}"
            )
        if isinstance(norm_eps, bool) or not isinstance(norm_eps, numbers.Real) or (
            not norm_eps > 0
        ):
            raise ValueError(f"norm_eps must be a positive float, got {norm_eps!r}")
        check_flag("rope_interleave", rope_interleave)
        super().__init__()
        self.rope_interleave = rope_interleave
        self.num_heads, self.head_dim, self.rope_dim = num_heads, head_dim, rope_dim
        self.W_query = nn.Linear(q_lora_rank, num_heads * head_dim, bias=False)
        self.W_key = nn.Linear(d_in, head_dim, bias=False)  # one key for all heads
        self.key_norm = nn.LayerNorm(head_dim, eps=norm_eps)
        self.W_head_weights = nn.Linear(d_in, num_heads, bias=False)

    def keys(self, x, cos, sin, start: int) -> torch.Tensor:
        """``k_s = RoPE(LayerNorm(x_s W_key))`` for the tokens ``x`` ``(B, T, d_in)`` at
        positions ``start..``: ``(B, T, d_I)``, one key per token for every head."""
        key = self.key_norm(self.W_key(x))  # (B, T, d_I)
        key = self.turn(key.unsqueeze(1), cos, sin, start)  # (B, 1, T, d_I)
        return key.squeeze(1)  # (B, T, d_I)

    def turn(self, x, cos, sin, start: int) -> torch.Tensor:
        """Rotary positions on the first ``d_r`` dimensions of ``x`` ``(B, H, T,
        d_I)``; neighbour pairs gathered into halves first with
        ``rope_interleave``."""
        if self.rope_interleave:  # queries and keys alike: every score stays
            turned = neighbours_to_halves(x[..., : self.rope_dim])  # (B, H, T, d_r)
            x = torch.cat((turned, x[..., self.rope_dim :]), dim=-1)  # (B,H,T,d_I)
        return apply_rope(x, cos, sin, start)  # (B, H, T, d_I)

    # --8<-- [start:scores]
    def scores(self, x, query_latent, keys, cos, sin, start: int) -> torch.Tensor:
        """``I_{t,s}`` for the new tokens ``x`` against ``keys`` (held and new):
        ``(B, T, T_k)``, float32, future and padding not yet hidden."""
        b, num_tokens, _ = x.shape  # (B, T, d_in)
        queries = self.W_query(query_latent)  # (B, T, H_I d_I)
        queries = queries.view(b, num_tokens, self.num_heads, -1)  # (B, T, H_I, d_I)
        queries = self.turn(queries.transpose(1, 2), cos, sin, start)  # (B,H_I,T,d_I)
        queries = queries.transpose(1, 2)  # (B, T, H_I, d_I)
        dots = torch.matmul(  # every head against the one key of each token
            queries.float(), keys.float().transpose(-1, -2).unsqueeze(1)
        )  # (B, T, H_I, d_I) @ (B, 1, d_I, T_k) -> (B, T, H_I, T_k)
        dots = torch.relu(dots * self.head_dim**-0.5)  # (B, T, H_I, T_k)
        weight = self.W_head_weights.weight  # (H_I, d_in)
        weights = self.W_head_weights(x.to(weight.dtype))  # (B, T, H_I)
        weights = weights.float() * self.num_heads**-0.5  # (B, T, H_I)
        # the heads' ReLU scores summed with their weights
        return torch.matmul(weights.unsqueeze(-2), dots).squeeze(-2)  # (B, T, T_k)
    # --8<-- [end:scores]

    def extra_repr(self) -> str:
        return (
            f"num_heads={self.num_heads}, head_dim={self.head_dim}, "
            f"rope_dim={self.rope_dim}"
            + (", rope_interleave=True" if self.rope_interleave else "")
        )


# --8<-- [end:class]


# --8<-- [start:top_k]
def top_k_keys(index_scores, mask_bool, k: int) -> torch.Tensor:
    """The ``min(k, T_k)`` keys of largest score each query may see: indices ``(B, T,
    min(k, T_k))`` into the ``T_k`` keys, in no particular order.

    ``index_scores`` ``(B, T, T_k)``; ``mask_bool`` (True = hidden: the future,
    padding) ``(T, T_k)`` or ``(B, 1, T, T_k)``. A hidden key scores ``-inf``, so it
    is chosen only when a query sees fewer than ``k`` keys; the attention hides it
    again. Ties are broken as ``torch.topk`` breaks them, as in the reference code.
    """
    check_size("k", k)
    for name, value in (("index_scores", index_scores), ("mask_bool", mask_bool)):
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"{name} must be a tensor, got {type(value).__name__}")
    if index_scores.dim() != 3:
        raise ValueError(
            "index_scores must have shape (B, T, T_k), got "
            f"{tuple(index_scores.shape)}"
        )
    b, num_tokens, num_keys = index_scores.shape
    shapes = ((num_tokens, num_keys), (b, 1, num_tokens, num_keys))
    if mask_bool.dtype != torch.bool or tuple(mask_bool.shape) not in shapes:
        raise ValueError(
            f"mask_bool must be a bool tensor of shape {shapes[0]} (T, T_k) or "
            f"{shapes[1]} (B, 1, T, T_k), got {mask_bool.dtype} "
            f"{tuple(mask_bool.shape)}"
        )
    if mask_bool.dim() == 4:
        mask_bool = mask_bool.squeeze(1)  # (B, T, T_k)
    scores = index_scores.masked_fill(mask_bool, -torch.inf)  # (B, T, T_k)
    return scores.topk(min(k, scores.shape[-1]), dim=-1).indices  # (B, T, k)
# --8<-- [end:top_k]
